// RAdam (Liu et al. 2020, rectified Adam), matching torch.optim.RAdam (PyTorch 1.13, foreach=False;
// no maximize) to f32 rounding: Adam's moments; while the approximated SMA length rho_t is at most
// 5 the step is lr times the bias-corrected exp_avg, after that it is scaled by the adaptive lr
// sqrt(1 - beta2^t) / (sqrt(exp_avg_sq) + eps) and the rectification term (radam_step_scalars).
#pragma once

#include <tuple>

#include "optim/adam_like.h"

namespace sl::optim {

struct RAdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  /// Keep an fp32 master copy of f16/bf16 parameters (and fp32 state) and update that.
  bool master_weights = false;
  /// The kernel hyperparameters.
  RadamHyper hyper() const { return {lr, beta1, beta2, eps, weight_decay}; }
  /// None beyond Adam's common options (AdamLike).
  static constexpr auto own_options() { return std::tuple<>(); }
};

/// step(): one step of every parameter with a gradient; state exp_avg and exp_avg_sq, both
/// starting at zero. Throws ValueError for hyperparameters made invalid since construction.
class RAdam : public AdamLike<RAdamOptions, &radam_update, &ops::check_radam_hyper> {
 public:
  /// One group. Throws ValueError for invalid hyperparameters (lr, eps, weight_decay negative or
  /// not finite, a beta outside [0, 1)), naming the option and its value, as PyTorch's constructor
  /// (and in its order: lr, eps, betas, weight_decay).
  explicit RAdam(const TensorList& params, RAdamOptions options = {});
  explicit RAdam(const std::vector<ParamGroup<RAdamOptions>>& groups);
  const char* name() const override { return "RAdam"; }
  StateKeys state_keys(size_t) const override { return state_keys_of({"exp_avg", "exp_avg_sq"}); }
};

}  // namespace sl::optim
