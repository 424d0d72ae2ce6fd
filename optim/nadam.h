// NAdam (Dozat 2016, Adam with Nesterov momentum), matching torch.optim.NAdam (PyTorch 1.13,
// foreach=False; no maximize) to f32 rounding: Adam's moments, the momentum coefficients mu_t =
// beta1 (1 - 0.5 * 0.96^(t momentum_decay)) and their running product mu_product (Note [NAdam's
// mu_product] in core/ops/optim.h), then param -= lr (1 - mu_t) / (1 - mu_product) g / denom +
// lr mu_{t+1} / (1 - mu_product mu_{t+1}) exp_avg / denom, denom = sqrt(exp_avg_sq / bc2) + eps.
#pragma once

#include <tuple>
#include <utility>

#include "optim/adam_like.h"

namespace sl::optim {

struct NAdamOptions {
  double lr = 2e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum_decay = 4e-3;
  /// Keep an fp32 master copy of f16/bf16 parameters (and fp32 state) and update that.
  bool master_weights = false;
  /// The kernel hyperparameters.
  NadamHyper hyper() const { return {lr, beta1, beta2, eps, weight_decay, momentum_decay}; }
  /// The options beyond Adam's common ones, as a saved group lists them (AdamLike).
  static constexpr auto own_options() {
    return std::make_tuple(std::pair{"momentum_decay", &NAdamOptions::momentum_decay});
  }
};

/// step(): one step of every parameter with a gradient; state exp_avg and exp_avg_sq (zeros) and
/// the scalar mu_product (1 before the first step), which each step multiplies by mu_t of the
/// group's beta1 and momentum_decay at that step, as PyTorch's. Throws ValueError for
/// hyperparameters made invalid since construction.
class NAdam : public AdamLike<NAdamOptions, &nadam_update, &ops::check_nadam_hyper> {
 public:
  /// One group. Throws ValueError for invalid hyperparameters (lr, eps, weight_decay,
  /// momentum_decay negative or not finite, a beta outside [0, 1)), naming the option and its
  /// value, as PyTorch's constructor (and in its order: lr, eps, betas, weight_decay,
  /// momentum_decay).
  explicit NAdam(const TensorList& params, NAdamOptions options = {});
  explicit NAdam(const std::vector<ParamGroup<NAdamOptions>>& groups);
  const char* name() const override { return "NAdam"; }
  StateKeys state_keys(size_t) const override { return state_keys_of({"exp_avg", "exp_avg_sq"}); }
};

}  // namespace sl::optim
