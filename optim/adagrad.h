// Adagrad (Duchi et al. 2011), matching torch.optim.Adagrad (PyTorch 1.13, foreach=False, dense
// gradients) to f32 rounding: sum += g^2, then param -= clr * g / (sqrt(sum) + eps) with
// clr = lr / (1 + (step - 1) * lr_decay).
//
// Note [Adagrad's state at the first step]
// PyTorch 1.13's constructor creates every parameter's state (step 0 and sum filled with
// initial_accumulator_value), so its state_dict() right after construction holds them, as it does
// for a parameter that never gets a gradient. Ours creates sum at a parameter's first step, with
// the same values, so every step computes the same numbers; only what exists before then differs:
// - ZeRO (dist/sharded_optimizer.h) builds its sharded state from this optimizer and never steps
//   it: sums created here would put a full-size copy of the whole model's state on every rank,
//   which sharding exists to avoid, and unstepped copies that the sharded checkpoints (which
//   write a parameter's state from its first step on, for every optimizer) would not match.
// - Memory reports count optimizer state as it is created, as for the other optimizers.
// - A PyTorch-made state (step 0 and a sum) loads: the first step continues from that sum
//   (test_optim_parity.cpp checks PyTorch's post-construction state), and state_dict() then
//   writes it back, step 0 included.
#pragma once

#include <tuple>
#include <utility>

#include "optim/update_rule_optimizer.h"

namespace sl::optim {

/// Note: each group's sum starts from that group's initial_accumulator_value. PyTorch 1.13 fills
/// every sum from the constructor's argument and ignores a group's own value; the two agree when
/// the groups share one value (its fixture cases do).
struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0.0;
  double weight_decay = 0.0;
  double initial_accumulator_value = 0.0;
  double eps = 1e-10;
  bool maximize = false;
  /// Keep an fp32 master copy of f16/bf16 parameters (and an fp32 sum) and update that.
  bool master_weights = false;
  /// The kernel hyperparameters.
  AdagradHyper hyper() const {
    return {lr, lr_decay, weight_decay, initial_accumulator_value, eps, maximize};
  }
  /// What a saved group lists, PyTorch's keys in its order (UpdateRuleOptimizer).
  static constexpr auto saved_options() {
    using O = AdagradOptions;
    return std::make_tuple(std::pair{"lr", &O::lr}, std::pair{"lr_decay", &O::lr_decay},
                           std::pair{"weight_decay", &O::weight_decay},
                           std::pair{"initial_accumulator_value", &O::initial_accumulator_value},
                           std::pair{"eps", &O::eps}, std::pair{"maximize", &O::maximize});
  }
};

/// step(): one step of every parameter with a gradient; state `sum`, created at the first step
/// filled with initial_accumulator_value (PyTorch fills it in the constructor; the values are the
/// same: Note [Adagrad's state at the first step]). Throws ValueError for hyperparameters made
/// invalid since construction.
class Adagrad
    : public UpdateRuleOptimizer<AdagradOptions, &adagrad_update, &ops::check_adagrad_hyper,
                                 &AdagradOptions::saved_options> {
 public:
  /// One group. Throws ValueError for invalid hyperparameters (negative or non-finite lr,
  /// lr_decay, weight_decay, initial_accumulator_value or eps), naming the option and its value,
  /// as PyTorch's constructor.
  explicit Adagrad(const TensorList& params, AdagradOptions options = {});
  explicit Adagrad(const std::vector<ParamGroup<AdagradOptions>>& groups);
  const char* name() const override { return "Adagrad"; }
  /// Adagrad has no momentum: 0, and set_momentum throws ValueError (as PyTorch's OneCycleLR
  /// refuses cycle_momentum for it).
  double momentum(size_t) const override { return 0.0; }
  void set_momentum(size_t group, double m) override;
  StateKeys state_keys(size_t) const override { return state_keys_of({"sum"}); }
};

}  // namespace sl::optim
