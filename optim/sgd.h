// Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay,
// matching torch.optim.SGD (PyTorch 1.13, foreach=False) to f32 rounding.
#pragma once

#include "optim/optimizer.h"

namespace sl::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
  /// Keep an fp32 master copy of f16/bf16 parameters and update that (issue 5).
  bool master_weights = false;
  SgdHyper hyper() const { return {lr, momentum, dampening, weight_decay, nesterov, maximize}; }
};

class SGD : public GroupedOptimizer<SGDOptions> {
 public:
  /// One group. Throws ValueError for invalid hyperparameters (negative lr, nesterov without
  /// momentum or with dampening, ...), as PyTorch's constructor does.
  explicit SGD(const TensorList& params, SGDOptions options = {});
  explicit SGD(const std::vector<ParamGroup<SGDOptions>>& groups);

  const char* name() const override { return "SGD"; }
  void step() override;
  double momentum(size_t group) const override { return options(group).momentum; }
  void set_momentum(size_t group, double m) override { options(group).momentum = m; }
  StateKeys state_keys(size_t group) const override {
    return options(group).momentum != 0.0 ? state_keys_of({"momentum_buffer"}) : StateKeys();
  }

 protected:
  void check_options(const SGDOptions& o, const char* op) const override;
  serialize::Json group_to_json(size_t group) const override;
  void load_groups_from_json(const serialize::Json& groups) override;
};

}  // namespace sl::optim
