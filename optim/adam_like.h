// AdamLike: the members shared by the optimizers whose groups hold Adam's lr, betas, eps and
// weight_decay (Adam/AdamW, Lamb, Adamax, NAdam, RAdam), written once: the hyperparameter check,
// the step loop, beta1 as OneCycleLR's momentum and the saved group's JSON.
#pragma once

#include <string>
#include <tuple>
#include <type_traits>

#include "autograd/grad_mode.h"
#include "optim/optimizer.h"

namespace sl::optim {

/// An optimizer over groups of Options, each stepped by kUpdate(param, grad, state,
/// options.hyper(), options.master_weights) (adam_update, lamb_update, ...) after
/// kCheck(options.hyper(), name()) (ops::check_adam_hyper, ...) has passed for every group.
/// Options has lr, beta1, beta2, eps, weight_decay, master_weights, hyper() and a static
/// own_options(): a tuple of {"name", &Options::member} pairs (double or bool members) for its
/// other hyperparameters, in the order a saved group lists them. A saved group is {"lr", "betas":
/// [beta1, beta2], "eps", "weight_decay", <own options>, "master_weights"}, PyTorch's keys.
/// A derived class supplies name(), state_keys() and its constructors (which call
/// add_param_group; the base cannot, name() being pure virtual while it is built).
template <class Options, auto kUpdate, auto kCheck>
class AdamLike : public GroupedOptimizer<Options> {
 public:
  /// One update of every parameter with a gradient (state created at its first step, as the
  /// update function says). Throws ValueError for hyperparameters made invalid since
  /// construction, before changing anything.
  void step() override {
    NoGradGuard no_grad;
    this->check_all_options();
    const std::string op = std::string(this->name()) + ".step";
    this->for_each_with_grad(
        op.c_str(), [&](size_t g, size_t, const Tensor& p, const Tensor& grad, ParamState& st) {
          const Options& o = this->options_[g];
          kUpdate(p, grad, st, o.hyper(), o.master_weights);
        });
  }
  /// beta1, which OneCycleLR cycles (PyTorch's cycle_momentum with betas).
  double momentum(size_t group) const override { return this->options(group).beta1; }
  void set_momentum(size_t group, double m) override { this->options(group).beta1 = m; }

 protected:
  AdamLike() = default;
  void check_options(const Options& o, const char* op) const override { kCheck(o.hyper(), op); }

  serialize::Json group_to_json(size_t group) const override {
    const Options& o = this->options(group);
    serialize::Json j =
        serialize::Json::object({{"lr", o.lr},
                                 {"betas", serialize::Json::array({o.beta1, o.beta2})},
                                 {"eps", o.eps},
                                 {"weight_decay", o.weight_decay}});
    std::apply([&](const auto&... f) { (j.set(f.first, o.*f.second), ...); },
               Options::own_options());
    j.set("master_weights", o.master_weights);
    return j;
  }

  /// Every key but master_weights (false when absent: older checkpoints) is required; the parsed
  /// groups are checked as the constructor checks them, naming "<name>.load_state_dict".
  void load_groups_from_json(const serialize::Json& groups) override {
    const std::string op = std::string(this->name()) + ".load_state_dict";
    std::vector<Options> parsed;
    for (size_t g = 0; g < groups.size(); ++g) {
      const serialize::Json& j = groups[g];
      Options o;
      o.lr = j.at("lr").as_double();
      const serialize::Json& betas = j.at("betas");
      SL_CHECK(betas.size() == 2, op, ": betas must have 2 entries, got ", betas.size());
      o.beta1 = betas[0].as_double();
      o.beta2 = betas[1].as_double();
      o.eps = j.at("eps").as_double();
      o.weight_decay = j.at("weight_decay").as_double();
      std::apply([&](const auto&... f) { (read_option(j.at(f.first), o.*f.second), ...); },
                 Options::own_options());
      if (const serialize::Json* mw = j.find("master_weights")) o.master_weights = mw->as_bool();
      check_options(o, op.c_str());
      parsed.push_back(o);
    }
    this->options_ = std::move(parsed);
  }

 private:
  template <class T>
  static void read_option(const serialize::Json& v, T& out) {
    static_assert(std::is_same_v<T, double> || std::is_same_v<T, bool>);
    if constexpr (std::is_same_v<T, bool>) {
      out = v.as_bool();
    } else {
      out = v.as_double();
    }
  }
};

}  // namespace sl::optim
