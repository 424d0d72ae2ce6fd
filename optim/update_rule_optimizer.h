// UpdateRuleOptimizer: the members shared by every optimizer whose step applies one update
// function to each parameter with a gradient (SGD, RMSprop, Adagrad, and through AdamLike Adam,
// AdamW, Lamb, Adamax, NAdam and RAdam), written once: the hyperparameter check, the step loop and
// the saved group's JSON, read from and written to a list of the options' members.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "optim/optimizer.h"

namespace sl::optim {

/// An optimizer over groups of Options, each parameter stepped by kUpdate(param, grad, state,
/// options.hyper(), options.master_weights) (sgd_update, adam_update, ...) after
/// kCheck(options.hyper(), op) (ops::check_sgd_hyper, ...) has passed for every group. A saved
/// group is kSavedOptions()'s members in order, then "master_weights": kSavedOptions returns a
/// tuple of {"key", member} pairs, a member being a pointer to a double, bool or
/// std::optional<double> member of Options, or a pair of pointers to two double members (saved as
/// a 2-entry array: Adam's "betas"). A derived class supplies name(), state_keys(), momentum(),
/// set_momentum() and its constructors (which call add_initial_groups; the base cannot, name()
/// being pure virtual while it is built).
template <class Options, auto kUpdate, auto kCheck, auto kSavedOptions>
class UpdateRuleOptimizer : public GroupedOptimizer<Options> {
 public:
  /// One update of every parameter with a gradient (state created at its first step, as the
  /// update function says). Throws ValueError for hyperparameters made invalid since
  /// construction, before changing anything, naming "<name>".
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

 protected:
  UpdateRuleOptimizer() = default;
  void check_options(const Options& o, const char* op) const override { kCheck(o.hyper(), op); }

  serialize::Json group_to_json(size_t group) const override {
    const Options& o = this->options(group);
    serialize::Json j = serialize::Json::object();
    std::apply([&](const auto&... f) { (write_option(j, f.first, o, f.second), ...); },
               kSavedOptions());
    j.set("master_weights", o.master_weights);
    return j;
  }

  /// Every key but master_weights (false when absent: older checkpoints) is required; the parsed
  /// groups are checked as the constructor checks them, naming "<name>.load_state_dict", and
  /// replace the current ones only when all pass.
  void load_groups_from_json(const serialize::Json& groups) override {
    const std::string op = std::string(this->name()) + ".load_state_dict";
    std::vector<Options> parsed;
    for (size_t g = 0; g < groups.size(); ++g) {
      const serialize::Json& j = groups[g];
      Options o;
      std::apply([&](const auto&... f) { (read_option(j, f.first, op, o, f.second), ...); },
                 kSavedOptions());
      if (const serialize::Json* mw = j.find("master_weights")) o.master_weights = mw->as_bool();
      check_options(o, op.c_str());
      parsed.push_back(o);
    }
    this->options_ = std::move(parsed);
  }

 private:
  template <class T>
  static void write_option(serialize::Json& j, const char* key, const Options& o, T Options::*m) {
    static_assert(std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                  std::is_same_v<T, std::optional<double>>);
    if constexpr (std::is_same_v<T, std::optional<double>>) {
      // null for an option never given (a step or lr() refuses such a group first)
      j.set(key, (o.*m).has_value() ? serialize::Json(*(o.*m)) : serialize::Json());
    } else {
      j.set(key, o.*m);
    }
  }
  static void write_option(serialize::Json& j, const char* key, const Options& o,
                           std::pair<double Options::*, double Options::*> m) {
    j.set(key, serialize::Json::array({o.*m.first, o.*m.second}));
  }
  template <class T>
  static void read_option(const serialize::Json& j, const char* key, const std::string&, Options& o,
                          T Options::*m) {
    const serialize::Json& v = j.at(key);
    if constexpr (std::is_same_v<T, bool>) {
      o.*m = v.as_bool();
    } else {
      o.*m = v.as_double();
    }
  }
  static void read_option(const serialize::Json& j, const char* key, const std::string& op,
                          Options& o, std::pair<double Options::*, double Options::*> m) {
    const serialize::Json& v = j.at(key);
    SL_CHECK(v.size() == 2, op, ": ", key, " must have 2 entries, got ", v.size());
    o.*m.first = v[0].as_double();
    o.*m.second = v[1].as_double();
  }
};

}  // namespace sl::optim
