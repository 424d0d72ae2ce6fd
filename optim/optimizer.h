// Optimizer: parameter groups, per-parameter state, zero_grad, state_dict / load_state_dict.
//
// Optimizers take plain lists of tensors (no dependency on nn::Module): a parameter group is a
// list of tensors plus the optimizer's hyperparameters, e.g. AdamW with weight decay on the
// weights and none on biases and LayerNorm (see split_no_decay). Parameters are numbered over
// all groups in order, as in PyTorch's state_dict; a parameter may appear in one group only.
//
// Note [Optimizer state_dict]
// state_dict() returns a Section (nn/serialize/state_dict.h):
//   tensors: "state.<i>.<key>" for each defined state tensor of parameter i, with PyTorch's keys
//            (momentum_buffer, exp_avg, exp_avg_sq, max_exp_avg_sq, square_avg, grad_avg, sum,
//            exp_inf: ParamState::kKeys) plus "master";
//   meta:    {"optimizer": "AdamW", "param_groups": [{<hyperparameters>, "params": [0, 1]}],
//             "state": {"<i>": {"step": n}}} (NAdam: {"step": n, "mu_product": x}, Note [NAdam's
//             mu_product])
// load_state_dict checks the optimizer type, the group sizes and every tensor's shape against
// the current parameters, restores the hyperparameters (as PyTorch does), and converts the
// state tensors to each parameter's device (and dtype: the parameter's, f32 for masters).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/serialize/state_dict.h"
#include "optim/functional.h"

namespace sl::optim {

/// A list of parameters with the hyperparameters that apply to them.
template <class Options>
struct ParamGroup {
  TensorList params;
  Options options;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// "SGD", "Adam", "AdamW", "Lamb", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam".
  virtual const char* name() const = 0;
  /// One update of every parameter that has a gradient (parameters whose grad() is undefined
  /// are skipped, as in PyTorch). Runs under no-grad. Throws ShapeError when a gradient's shape
  /// differs from its parameter's, and what the kernels throw for bad dtypes or devices.
  virtual void step() = 0;
  /// Clears every parameter's gradient: drops it (set_to_none, PyTorch's default since 2.0) or
  /// fills it with zeros.
  void zero_grad(bool set_to_none = true);

  size_t num_param_groups() const { return params_.size(); }
  const TensorList& params(size_t group) const;
  /// Parameters over all groups.
  size_t num_params() const;
  /// Learning rate of a group (schedulers read and write it).
  virtual double lr(size_t group) const = 0;
  virtual void set_lr(size_t group, double lr) = 0;
  /// PyTorch's group["initial_lr"]: the lr a group had when the first epoch scheduler was
  /// created on it (OneCycleLR sets max_lr / div_factor). Every later scheduler starts from it,
  /// not from the current lr that an earlier scheduler may have changed. Unset (nullopt) until
  /// a scheduler sets it; saved in state_dict's param_groups when set, and restored (or unset)
  /// by load_state_dict.
  std::optional<double> initial_lr(size_t group) const;
  void set_initial_lr(size_t group, double lr);
  /// The momentum-like hyperparameter that OneCycleLR cycles: SGD's momentum, Adam's beta1.
  virtual double momentum(size_t group) const = 0;
  virtual void set_momentum(size_t group, double m) = 0;

  /// Whether a group keeps fp32 master copies of its low-precision parameters.
  virtual bool master_weights(size_t group) const = 0;
  /// Which state tensors (ParamState::kKeys; never "master", which master_weights decides) a
  /// step keeps for each parameter of a group: SGD momentum_buffer with momentum, else none;
  /// Adam/AdamW exp_avg and exp_avg_sq, plus max_exp_avg_sq with amsgrad; Lamb exp_avg and
  /// exp_avg_sq; RMSprop square_avg, plus grad_avg when centered and momentum_buffer with
  /// momentum; Adagrad sum; Adamax exp_avg and exp_inf; NAdam and RAdam exp_avg and exp_avg_sq
  /// (NAdam's scalar mu_product is not a tensor of the parameter's size). Sharded modes keep one
  /// buffer per dtype group for the union over optimizer groups and checkpoint each parameter's own
  /// keys only, as unsharded modes do.
  virtual StateKeys state_keys(size_t group) const = 0;
  /// How many element-wise state tensors a step keeps for each parameter of a group (the size
  /// of state_keys), each of the parameter's size (in float32 beside a master copy, else in the
  /// parameter's dtype). Memory estimates use it.
  int state_tensors(size_t group) const { return static_cast<int>(state_keys(group).count()); }

  /// State of parameter `index` of `group` (empty before its first step).
  ParamState& state(size_t group, size_t index);
  const ParamState& state(size_t group, size_t index) const;
  /// State of a parameter by identity; null when it is not one of ours.
  ParamState* find_state(const Tensor& param);

  /// See Note [Optimizer state_dict]. The tensors are the live state (not copies), as in
  /// PyTorch: save them before the next step changes them.
  serialize::Section state_dict() const;
  /// Throws ValueError when the saved state does not fit these parameters.
  void load_state_dict(const serialize::Section& s);

 protected:
  Optimizer() = default;
  /// Adds a group: checks the parameters (defined, floating, a leaf as PyTorch's "can't optimize
  /// a non-leaf Tensor", not already present), throwing ValueError (DTypeError for the dtype)
  /// that names the optimizer and the parameter's index in its group.
  void add_params(const TensorList& params);
  /// Hyperparameters of a group as JSON (without "params").
  virtual serialize::Json group_to_json(size_t group) const = 0;
  /// Restores every group's hyperparameters from the saved "param_groups" array (as many as
  /// there are groups); parses all before changing any, throwing ValueError when malformed.
  virtual void load_groups_from_json(const serialize::Json& groups) = 0;
  /// Calls f(group, index, param, grad, state) for each parameter that has a gradient, with
  /// the grad's shape checked.
  template <class F>
  void for_each_with_grad(const char* op, const F& f);

 private:
  void check_grad(const char* op, const Tensor& p, const Tensor& g) const;

  std::vector<TensorList> params_;
  std::vector<std::vector<ParamState>> state_;
  std::vector<std::optional<double>> initial_lr_;
};

template <class F>
void Optimizer::for_each_with_grad(const char* op, const F& f) {
  for (size_t g = 0; g < params_.size(); ++g) {
    for (size_t i = 0; i < params_[g].size(); ++i) {
      const Tensor& p = params_[g][i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      check_grad(op, p, grad);
      f(g, i, p, grad, state_[g][i]);
    }
  }
}

/// An optimizer whose groups each hold one Options struct (with `lr`, `master_weights` and a
/// hyper() whose `lr` the kernels use): the members that only read or append the groups' options,
/// written once for SGD, Adam/AdamW, Lamb, RMSprop, Adagrad, Adamax, NAdam and RAdam. A derived
/// class supplies check_options.
template <class Options>
class GroupedOptimizer : public Optimizer {
 public:
  /// Adds a group: its hyperparameters are checked first (ValueError from check_options, naming
  /// the option and its value), then its parameters (add_params' errors); on a throw the
  /// optimizer is unchanged.
  void add_param_group(const ParamGroup<Options>& group) {
    check_options(group.options, name());
    options_.push_back(group.options);
    try {
      add_params(group.params);
    } catch (...) {
      options_.pop_back();
      throw;
    }
  }
  /// A group's options (schedulers and users may change them between steps); IndexError for a
  /// group out of range.
  Options& options(size_t group) {
    check_group(group);
    return options_[group];
  }
  const Options& options(size_t group) const {
    check_group(group);
    return options_[group];
  }
  /// The lr the group's kernels step with (read through Options::hyper(), which throws for an lr
  /// that is required and was never given: SGD's).
  double lr(size_t group) const override { return options(group).hyper().lr; }
  void set_lr(size_t group, double lr) override { options(group).lr = lr; }
  bool master_weights(size_t group) const override { return options(group).master_weights; }

 protected:
  GroupedOptimizer() = default;
  /// A constructor's body: one group of `params`, or each of `groups` in order (add_param_group).
  /// Throws ValueError "optimizer got an empty parameter list" (PyTorch's) when there is no
  /// parameter, or no group; a group without parameters is accepted, as in PyTorch.
  void add_initial_groups(const TensorList& params, const Options& options) {
    SL_CHECK(!params.empty(), name(), ": optimizer got an empty parameter list");
    add_param_group({params, options});
  }
  void add_initial_groups(const std::vector<ParamGroup<Options>>& groups) {
    SL_CHECK(!groups.empty(), name(), ": optimizer got an empty parameter list (no groups)");
    for (const auto& g : groups) add_param_group(g);
  }
  /// Throws ValueError for hyperparameters the optimizer cannot step with, naming `op`.
  virtual void check_options(const Options& o, const char* op) const = 0;
  /// check_options on every group: a step's first act, since options may have changed.
  void check_all_options() const {
    for (const Options& o : options_) check_options(o, name());
  }

  std::vector<Options> options_;

 private:
  void check_group(size_t group) const {
    SL_CHECK_INDEX(group < options_.size(), name(), ": group ", group, " out of range (",
                   options_.size(), " groups)");
  }
};

/// Splits named parameters into (decay, no_decay) for weight-decay parameter groups: a
/// parameter goes to no_decay when it has fewer than 2 dims (biases, norm weights) or its name
/// contains one of `no_decay_substrings` (e.g. "bias", "LayerNorm.weight" as in BERT).
std::pair<TensorList, TensorList> split_no_decay(
    const std::vector<std::pair<std::string, Tensor>>& named_params,
    const std::vector<std::string>& no_decay_substrings = {"bias", "LayerNorm.weight"});

}  // namespace sl::optim
