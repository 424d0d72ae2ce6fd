// Adam and AdamW (betas, eps, weight_decay, amsgrad), matching torch.optim.Adam / AdamW
// (PyTorch 1.13, foreach=False) to f32 rounding. Adam adds weight_decay * param to the gradient
// (L2 penalty); AdamW multiplies the parameter by 1 - lr * weight_decay first (decoupled decay).
#pragma once

#include <tuple>
#include <utility>

#include "optim/adam_like.h"

namespace sl::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
  /// Keep an fp32 master copy of f16/bf16 parameters (and fp32 moments) and update that.
  bool master_weights = false;
  /// The kernel hyperparameters (weight decay added to the gradient).
  AdamHyper hyper() const {
    return {lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, /*decoupled=*/false};
  }
  /// The options beyond Adam's common ones, as a saved group lists them (AdamLike).
  static constexpr auto own_options() {
    return std::make_tuple(std::pair{"amsgrad", &AdamOptions::amsgrad},
                           std::pair{"maximize", &AdamOptions::maximize});
  }
};

/// AdamOptions with AdamW's default weight decay (0.01), decoupled.
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
  bool master_weights = false;
  /// The kernel hyperparameters (decoupled weight decay).
  AdamHyper hyper() const {
    return {lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, /*decoupled=*/true};
  }
  static constexpr auto own_options() {
    return std::make_tuple(std::pair{"amsgrad", &AdamWOptions::amsgrad},
                           std::pair{"maximize", &AdamWOptions::maximize});
  }
};

/// The shared implementation; use Adam or AdamW. step(): one step of every parameter with a
/// gradient; state exp_avg and exp_avg_sq (and max_exp_avg_sq with amsgrad), zeros at its first
/// step. Throws ValueError for hyperparameters made invalid since construction.
template <class Options>
class AdamBase : public AdamLike<Options, &adam_update, &ops::check_adam_hyper> {
 public:
  /// The kernel hyperparameters of a group.
  AdamHyper hyper(size_t group) const { return this->options(group).hyper(); }
  StateKeys state_keys(size_t group) const override {
    return this->options(group).amsgrad ? state_keys_of({"exp_avg", "exp_avg_sq", "max_exp_avg_sq"})
                                        : state_keys_of({"exp_avg", "exp_avg_sq"});
  }

 protected:
  AdamBase() = default;
};

class Adam : public AdamBase<AdamOptions> {
 public:
  /// Throws ValueError for invalid hyperparameters (betas outside [0, 1), negative lr, ...).
  explicit Adam(const TensorList& params, AdamOptions options = {});
  explicit Adam(const std::vector<ParamGroup<AdamOptions>>& groups);
  const char* name() const override { return "Adam"; }
};

class AdamW : public AdamBase<AdamWOptions> {
 public:
  explicit AdamW(const TensorList& params, AdamWOptions options = {});
  explicit AdamW(const std::vector<ParamGroup<AdamWOptions>>& groups);
  const char* name() const override { return "AdamW"; }
};

}  // namespace sl::optim
