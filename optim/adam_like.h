// AdamLike: the members shared by the optimizers whose groups hold Adam's lr, betas, eps and
// weight_decay (Adam/AdamW, Lamb, Adamax, NAdam, RAdam): UpdateRuleOptimizer's step, check and
// saved group with Adam's common keys first, and beta1 as OneCycleLR's momentum.
#pragma once

#include <tuple>
#include <utility>

#include "optim/update_rule_optimizer.h"

namespace sl::optim {

/// The members a saved Adam-like group lists, PyTorch's keys: {"lr", "betas": [beta1, beta2],
/// "eps", "weight_decay", <Options::own_options()>} (UpdateRuleOptimizer adds "master_weights").
template <class Options>
constexpr auto adam_like_saved_options() {
  return std::tuple_cat(
      std::make_tuple(std::pair{"lr", &Options::lr},
                      std::pair{"betas", std::pair{&Options::beta1, &Options::beta2}},
                      std::pair{"eps", &Options::eps},
                      std::pair{"weight_decay", &Options::weight_decay}),
      Options::own_options());
}

/// An optimizer over groups of Options, each stepped by kUpdate(param, grad, state,
/// options.hyper(), options.master_weights) (adam_update, lamb_update, ...) after
/// kCheck(options.hyper(), name()) (ops::check_adam_hyper, ...) has passed for every group.
/// Options has lr, beta1, beta2, eps, weight_decay, master_weights, hyper() and a static
/// own_options(): a tuple of {"name", &Options::member} pairs (double or bool members) for its
/// other hyperparameters, in the order a saved group lists them (adam_like_saved_options).
/// A derived class supplies name(), state_keys() and its constructors (which call
/// add_initial_groups; the base cannot, name() being pure virtual while it is built).
template <class Options, auto kUpdate, auto kCheck>
class AdamLike
    : public UpdateRuleOptimizer<Options, kUpdate, kCheck, &adam_like_saved_options<Options>> {
 public:
  /// beta1, which OneCycleLR cycles (PyTorch's cycle_momentum with betas).
  double momentum(size_t group) const override { return this->options(group).beta1; }
  void set_momentum(size_t group, double m) override { this->options(group).beta1 = m; }

 protected:
  AdamLike() = default;
};

}  // namespace sl::optim
