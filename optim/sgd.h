// Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay,
// matching torch.optim.SGD (PyTorch 1.13, foreach=False) to f32 rounding.
#pragma once

#include <optional>
#include <tuple>
#include <utility>

#include "optim/update_rule_optimizer.h"

namespace sl::optim {

struct SGDOptions {
  /// Required, as torch.optim.SGD's lr=required: there is no default learning rate. SGD refuses
  /// a group without one (ValueError "SGD: lr must be given ..."), as hyper() does.
  std::optional<double> lr;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
  /// Keep an fp32 master copy of f16/bf16 parameters and update that (issue 5).
  bool master_weights = false;
  /// The kernel hyperparameters. Throws ValueError when lr was not given.
  SgdHyper hyper() const;
  /// What a saved group lists, PyTorch's keys in its order (UpdateRuleOptimizer).
  static constexpr auto saved_options() {
    using O = SGDOptions;
    return std::make_tuple(
        std::pair{"lr", &O::lr}, std::pair{"momentum", &O::momentum},
        std::pair{"dampening", &O::dampening}, std::pair{"weight_decay", &O::weight_decay},
        std::pair{"nesterov", &O::nesterov}, std::pair{"maximize", &O::maximize});
  }
};

/// step(): one step of every parameter with a gradient; state momentum_buffer when momentum != 0,
/// created at its first step (sgd_update). Throws ValueError for hyperparameters made invalid
/// since construction.
class SGD : public UpdateRuleOptimizer<SGDOptions, &sgd_update, &ops::check_sgd_hyper,
                                       &SGDOptions::saved_options> {
 public:
  /// One group; `options` must give lr (there is no default argument either). Throws ValueError
  /// without an lr ("SGD: lr must be given") and for invalid hyperparameters (negative lr,
  /// nesterov without momentum or with dampening, ...), as PyTorch's constructor does.
  explicit SGD(const TensorList& params, SGDOptions options);
  /// Each group must give its lr (PyTorch's groups may take the constructor's lr instead; ours
  /// have no such default); the same errors.
  explicit SGD(const std::vector<ParamGroup<SGDOptions>>& groups);

  const char* name() const override { return "SGD"; }
  double momentum(size_t group) const override { return options(group).momentum; }
  void set_momentum(size_t group, double m) override { options(group).momentum = m; }
  StateKeys state_keys(size_t group) const override {
    return options(group).momentum != 0.0 ? state_keys_of({"momentum_buffer"}) : StateKeys();
  }
};

}  // namespace sl::optim
