// RMSprop (Hinton's lecture 6e; centered as Graves 2013), matching torch.optim.RMSprop
// (PyTorch 1.13, foreach=False) to f32 rounding: square_avg = alpha * square_avg + (1 - alpha)
// g^2, then param -= lr * g / (sqrt(square_avg [- grad_avg^2 when centered]) + eps), through a
// momentum buffer when momentum > 0.
#pragma once

#include <tuple>
#include <utility>

#include "optim/update_rule_optimizer.h"

namespace sl::optim {

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;
  bool centered = false;
  bool maximize = false;
  /// Keep an fp32 master copy of f16/bf16 parameters (and fp32 state) and update that.
  bool master_weights = false;
  /// The kernel hyperparameters.
  RmspropHyper hyper() const {
    return {lr, alpha, eps, weight_decay, momentum, centered, maximize};
  }
  /// What a saved group lists, PyTorch's keys in its order (UpdateRuleOptimizer).
  static constexpr auto saved_options() {
    using O = RMSpropOptions;
    return std::make_tuple(std::pair{"lr", &O::lr}, std::pair{"alpha", &O::alpha},
                           std::pair{"eps", &O::eps}, std::pair{"weight_decay", &O::weight_decay},
                           std::pair{"momentum", &O::momentum}, std::pair{"centered", &O::centered},
                           std::pair{"maximize", &O::maximize});
  }
};

/// step(): one step of every parameter with a gradient; state square_avg, momentum_buffer
/// (momentum > 0), grad_avg (centered), all starting at zero. Throws ValueError for
/// hyperparameters made invalid since construction.
class RMSprop
    : public UpdateRuleOptimizer<RMSpropOptions, &rmsprop_update, &ops::check_rmsprop_hyper,
                                 &RMSpropOptions::saved_options> {
 public:
  /// One group. Throws ValueError for invalid hyperparameters (negative or non-finite lr, eps,
  /// momentum, weight_decay or alpha), naming the option and its value, as PyTorch's constructor.
  explicit RMSprop(const TensorList& params, RMSpropOptions options = {});
  explicit RMSprop(const std::vector<ParamGroup<RMSpropOptions>>& groups);
  const char* name() const override { return "RMSprop"; }
  double momentum(size_t group) const override { return options(group).momentum; }
  void set_momentum(size_t group, double m) override { options(group).momentum = m; }
  /// square_avg, plus grad_avg when centered and momentum_buffer when momentum > 0.
  StateKeys state_keys(size_t group) const override {
    const RMSpropOptions& o = options(group);
    return state_keys_of({"square_avg"}) |
           (o.centered ? state_keys_of({"grad_avg"}) : StateKeys()) |
           (o.momentum > 0.0 ? state_keys_of({"momentum_buffer"}) : StateKeys());
  }
};

}  // namespace sl::optim
