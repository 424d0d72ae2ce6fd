// nn::Module: the base of every layer and model, with PyTorch's module tree semantics.
//
// A module owns named parameters, buffers and child modules, in registration order. Their dotted
// names ("encoder.layer.0.attention.self.query.weight") are built exactly as PyTorch builds them,
// so a state dict written by PyTorch (or Hugging Face) loads by name. Modules are held by
// std::shared_ptr; model code registers children in its constructor and keeps the returned
// holder:
//
//   struct Net : nn::Module {
//     Net() : Module("Net") {}
//     std::shared_ptr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
//     std::shared_ptr<nn::Linear> fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 2));
//     Tensor forward(const Tensor& x) override { return fc2->forward(fc1->forward(x).relu()); }
//   };
//
// Note [Parameter identity]
// A parameter is one TensorImpl shared by the module's registry, the layer's member handle
// (`weight`), optimizers and autograd hooks. Everything that changes a parameter's memory
// (to(device, dtype), load_state_dict, a distributed wrapper re-pointing parameters at views of a
// flat buffer) rewrites that TensorImpl in place with set_data(), so every holder sees the change
// and hooks stay attached. Replacing the handle in the registry (parameter_slot) does not reach
// the layer's member; use set_data / set_parameter_data unless that is what you want.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace sl::nn {

/// Makes `dst` alias `src`'s memory in place: dst's TensorImpl takes src's storage, sizes,
/// strides, offset and dtype, keeping its identity, autograd flags, hooks and .grad() (a .grad()
/// whose shape no longer matches is dropped). Like PyTorch's `param.data = src`. Throws
/// ValueError when either is undefined.
void set_data(const Tensor& dst, const Tensor& src);

/// An ordered name -> tensor map (a module's state dict). Iterates in insertion order.
class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;
  StateDict() = default;
  StateDict(std::initializer_list<Item> items);
  /// Adds a key; throws ValueError when it is already present.
  void insert(const std::string& name, const Tensor& t);
  /// Adds or replaces a key.
  void set(const std::string& name, const Tensor& t);
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  /// The tensor under `name`, or null.
  const Tensor* find(const std::string& name) const;
  /// The tensor under `name`; throws IndexError naming the key when absent.
  const Tensor& at(const std::string& name) const;
  /// Removes a key (no-op when absent).
  void erase(const std::string& name);
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const;
  std::vector<Item>::const_iterator begin() const { return items_.begin(); }
  std::vector<Item>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

/// What a non-strict load_state_dict found: keys the module has but the dict lacks, and keys the
/// dict has but the module lacks (PyTorch's _IncompatibleKeys). A shape mismatch is never
/// reported here: it throws, strict or not.
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
  bool ok() const { return missing_keys.empty() && unexpected_keys.empty(); }
  /// One line per problem, empty when ok().
  std::string str() const;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  /// `type_name` is the class name shown by str() ("Linear", "Sequential").
  explicit Module(std::string type_name = "Module");
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  /// The one-tensor forward that Sequential and operator() call. Modules with another signature
  /// (attention, RNNs, losses) define their own forward overloads; calling this one on them
  /// throws ValueError.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  // ---- registration ---------------------------------------------------------------------
  /// Registers a parameter (marked requires_grad when `requires_grad`) and returns the handle to
  /// keep as a member. An undefined tensor registers an absent parameter (bias=False): it
  /// appears in no listing. Throws ValueError for an empty name, a name with '.', or a name
  /// already used by a parameter, buffer or child; DTypeError for a non-floating parameter.
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  /// Registers a buffer (running statistics, masks); non-persistent buffers are left out of the
  /// state dict. Same naming rules and absent (undefined) buffers as parameters.
  Tensor register_buffer(const std::string& name, Tensor t, bool persistent = true);
  /// Registers a child module and returns it; same naming rules. Throws ValueError for null.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    register_child(name, m);
    return m;
  }
  /// Replaces an existing child (e.g. swapping a layer for a wrapped one); returns it.
  template <class M>
  std::shared_ptr<M> replace_module(const std::string& name, std::shared_ptr<M> m) {
    replace_child(name, m);
    return m;
  }

  // ---- traversal (PyTorch order: own entries in registration order, then children) ---------
  using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
  /// Parameters with dotted names; a tensor shared under several names (tied weights) is listed
  /// once, under its first name, as in PyTorch.
  NamedTensors named_parameters(bool recurse = true) const;
  TensorList parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  TensorList buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  /// This module (named `prefix`, "" by default) and every descendant, depth first, each module
  /// once.
  std::vector<std::pair<std::string, Module*>> named_modules(const std::string& prefix = "") const;
  /// The parameter, buffer or module at a dotted path; throws IndexError naming the missing part.
  Tensor get_parameter(const std::string& dotted) const;
  Tensor get_buffer(const std::string& dotted) const;
  Module& get_submodule(const std::string& dotted) const;
  /// The registry slot of a parameter, for callers that replace the handle itself (see Note
  /// [Parameter identity]; set_parameter_data keeps identity and is usually what you want).
  Tensor& parameter_slot(const std::string& dotted);
  /// set_data(get_parameter(dotted), src) after checking that src has the parameter's shape
  /// (ShapeError otherwise): how a distributed wrapper re-points a parameter at a view of a flat
  /// buffer without changing the model code or the Tensor users hold.
  void set_parameter_data(const std::string& dotted, const Tensor& src);

  // ---- modes, devices, gradients ------------------------------------------------------------
  /// Sets training mode on this module and all descendants.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Moves/converts every parameter and buffer in place (Note [Parameter identity]); dtype
  /// conversion applies to floating tensors only, as in PyTorch. Gradients follow.
  void to(Device device);
  void to(DType dtype);
  void to(Device device, DType dtype);
  /// Clears (set_to_none) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true);
  /// Calls fn on every descendant (children first, depth first) and then on this module, as
  /// torch.nn.Module.apply.
  void apply(const std::function<void(Module&)>& fn);
  /// Number of parameter elements (each shared tensor counted once); only those with
  /// requires_grad when trainable_only.
  int64_t num_parameters(bool trainable_only = false) const;

  // ---- printing -----------------------------------------------------------------------------
  /// The module tree as PyTorch's repr prints it:
  ///   Sequential(
  ///     (0): Linear(in_features=4, out_features=8, bias=True)
  ///     (1): ReLU()
  ///   )
  std::string str() const;
  /// The text inside the parentheses of this module's line (no children).
  virtual std::string extra_repr() const { return ""; }

  // ---- state dicts --------------------------------------------------------------------------
  /// Parameters and persistent buffers under their dotted names, sharing memory with the module
  /// (every name, including tied duplicates).
  StateDict state_dict() const;
  /// Copies values by name (under NoGradGuard, converting dtype/device to the module's, as
  /// PyTorch's copy_ does). Throws before copying anything: ShapeError listing every key whose
  /// shape differs ("name: checkpoint [a, b] vs model [c, d]"), strict or not, as PyTorch does;
  /// then, when strict, ValueError listing every missing and unexpected key. Not strict: copies
  /// the keys both sides have and returns the missing and unexpected ones. To load a checkpoint
  /// whose head has another shape (fine-tuning), leave those keys out of the dict.
  LoadResult load_state_dict(const StateDict& dict, bool strict = true);

 protected:
  /// Renames the class shown by str() (e.g. PyTorch's NonDynamicallyQuantizableLinear).
  void set_type_name(std::string name) { type_name_ = std::move(name); }
  /// Training mode; train() sets it on the whole tree.
  bool training_ = true;

 private:
  struct Slot {
    std::string name;
    Tensor tensor;
    bool persistent = true;
  };
  void check_new_name(const std::string& name, const char* what) const;
  void register_child(const std::string& name, std::shared_ptr<Module> m);
  void replace_child(const std::string& name, std::shared_ptr<Module> m);
  void collect_named_modules(const std::string& prefix,
                             std::vector<std::pair<std::string, Module*>>& out,
                             std::vector<const Module*>& seen) const;
  void collect_state(const std::string& prefix, StateDict& out) const;
  void convert(const std::function<Tensor(const Tensor&, bool is_param)>& fn);
  std::string str_indented(int indent) const;
  const Slot* find_param(const std::string& name) const;
  const Slot* find_buffer(const std::string& name) const;

  std::string type_name_;
  std::vector<Slot> params_;
  std::vector<Slot> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// The usual holder of a module.
template <class M>
using Holder = std::shared_ptr<M>;

}  // namespace sl::nn

namespace sl::nn::repr {
/// A double as Python's repr prints it ("0.1", "1e-05", "20.0"), for extra_repr strings.
std::string py_float(double v);
/// "True" / "False".
inline const char* py_bool(bool b) {
  return b ? "True" : "False";
}
/// A tuple as Python prints it: "(3,)", "(3, 3)".
std::string py_tuple(const std::vector<int64_t>& v);
}  // namespace sl::nn::repr
