// Adamax (Kingma & Ba 2015, Adam with the infinity norm), matching torch.optim.Adamax
// (PyTorch 1.13, foreach=False) to f32 rounding: exp_avg = beta1 exp_avg + (1 - beta1) g, exp_inf =
// max(beta2 exp_inf, |g| + eps), param -= lr / (1 - beta1^t) * exp_avg / exp_inf.
#pragma once

#include <tuple>
#include <utility>

#include "optim/adam_like.h"

namespace sl::optim {

struct AdamaxOptions {
  double lr = 2e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool maximize = false;
  /// Keep an fp32 master copy of f16/bf16 parameters (and fp32 state) and update that.
  bool master_weights = false;
  /// The kernel hyperparameters.
  AdamaxHyper hyper() const { return {lr, beta1, beta2, eps, weight_decay, maximize}; }
  /// The options beyond Adam's common ones, as a saved group lists them (AdamLike).
  static constexpr auto own_options() {
    return std::make_tuple(std::pair{"maximize", &AdamaxOptions::maximize});
  }
};

/// step(): one step of every parameter with a gradient; state exp_avg and exp_inf, both starting
/// at zero. Throws ValueError for hyperparameters made invalid since construction.
class Adamax : public AdamLike<AdamaxOptions, &adamax_update, &ops::check_adamax_hyper> {
 public:
  /// One group. Throws ValueError for invalid hyperparameters (lr, eps, weight_decay negative or
  /// not finite, a beta outside [0, 1)), naming the option and its value, as PyTorch's constructor
  /// (and in its order: lr, eps, betas, weight_decay).
  explicit Adamax(const TensorList& params, AdamaxOptions options = {});
  explicit Adamax(const std::vector<ParamGroup<AdamaxOptions>>& groups);
  const char* name() const override { return "Adamax"; }
  StateKeys state_keys(size_t) const override { return state_keys_of({"exp_avg", "exp_inf"}); }
};

}  // namespace sl::optim
