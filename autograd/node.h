// The autograd graph: nodes (one per recorded op), edges, saved tensors.
//
// Note [Autograd graph]
// A recorded op creates one Node whose next_edges point, for each forward input, at the node that
// produced it (or at the AccumulateGrad node of a leaf that requires grad). Output tensors hold
// the node as grad_fn with their index as output_nr. Backward (autograd/engine.cpp) runs nodes
// in dependency order, highest sequence number first, so gradients of parameters used last in
// forward arrive first; AccumulateGrad nodes run as soon as they are ready (DDP and ZeRO start
// communication from the hooks they fire).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace sl {

using variable_list = std::vector<Tensor>;
class Node;

/// Points at input slot `input_nr` of `node` (the slot receiving one forward output's grad).
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

/// Shape/dtype/device of one forward output, used to check and zero-fill its gradient.
struct OutputMeta {
  Shape sizes;
  DType dtype = kDefaultFloat;
  Device device;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// Op name used in error messages and graph dumps ("MulBackward").
  virtual const char* name() const = 0;
  /// Gradients w.r.t. the forward outputs (one per OutputMeta; missing ones zero-filled) to
  /// gradients w.r.t. the forward inputs (one per next edge; undefined = no gradient).
  virtual variable_list apply(variable_list&& grads) = 0;
  /// Frees saved tensors after a backward without retain_graph.
  virtual void release_saved() {}

  std::vector<Edge> next_edges;
  std::vector<OutputMeta> outputs;
  uint64_t sequence_nr;

  struct PreHook {
    size_t id;
    uint32_t output_nr;
    GradHook fn;
  };
  /// Hooks on gradients in flight for this node's outputs (non-leaf register_hook/retain_grad).
  std::vector<PreHook> pre_hooks;
  /// Whether apply() builds its gradients only from differentiable ops, so that a backward with
  /// create_graph records how they were computed (Note [Double backward], autograd/engine.cpp).
  /// When false, create_graph gives the gradients a node that refuses a second backward.
  bool double_differentiable = false;
};

/// The context a backward lambda receives.
struct BackwardCtx {
  const variable_list& grads;
  uint64_t needs_mask;
  /// Gradient w.r.t. forward output i (always defined: missing ones are zero-filled).
  const Tensor& grad(size_t i = 0) const { return grads[i]; }
  /// Whether forward input i needs a gradient (skip computing it otherwise).
  bool needs(size_t i) const { return (needs_mask >> i) & 1u; }
};

/// A node whose backward is a lambda written beside the forward (the usual case); see LambdaNode.
class LambdaNodeBase : public Node {
 public:
  explicit LambdaNodeBase(const char* name) : name_(name) {}
  const char* name() const override { return name_; }
  /// Throws AutogradError when the saved state was released by an earlier backward.
  variable_list apply(variable_list&& grads) final;

 protected:
  virtual bool released() const = 0;
  virtual variable_list call(const BackwardCtx& ctx) = 0;

 private:
  const char* name_;
};

/// The lambda `F` stored inside the node, so that recording an op costs one allocation for the
/// node and its captures together (a std::function would allocate captures over 16 bytes
/// separately). record() (autograd/function.h) creates these.
template <class F>
class LambdaNode final : public LambdaNodeBase {
 public:
  template <class G>
  LambdaNode(const char* name, G&& fn)
      : LambdaNodeBase(name), fn_(std::in_place, std::forward<G>(fn)) {}
  void release_saved() override { fn_.reset(); }

 private:
  bool released() const override { return !fn_.has_value(); }
  variable_list call(const BackwardCtx& ctx) override { return (*fn_)(ctx); }
  std::optional<F> fn_;
};

/// Throws when a gradient hook returned a gradient of another size (ShapeError), dtype
/// (DTypeError) or device (DeviceError) than the one it was given, as PyTorch ("hook has changed
/// the size of value"): `on` says where the hook sits ("a leaf", "a non-leaf").
void check_hook_result(const char* on, const Tensor& given, const Tensor& returned);

/// Adds incoming gradients into a leaf's .grad(), running the leaf's hooks.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  const char* name() const override { return "AccumulateGrad"; }
  variable_list apply(variable_list&& grads) override;
  const Tensor& variable() const { return variable_; }

 private:
  Tensor variable_;
};

/// A tensor saved for backward, with the version it had when saved. unpack() throws
/// AutogradError if it was modified in place since. Stores a detached alias and, for a tensor
/// that requires grad, the edge to its history at saving time; an op's own output is saved with
/// SavedTensor::output, which keeps no reference to the node (no reference cycle).
class SavedTensor {
 public:
  SavedTensor() = default;
  /// Saves an input of the op (or any tensor that is not one of its outputs).
  explicit SavedTensor(const Tensor& t);
  /// Saves output `output_nr` of the op that records the node saving it. Under create_graph it
  /// unpacks as that output, so a second backward reaches the node again.
  static SavedTensor output(const Tensor& out, uint32_t output_nr = 0);
  /// The saved tensor; `op` names the backward in the error. While a backward records a graph
  /// (create_graph), a tensor that required grad comes back attached to its history.
  Tensor unpack(const char* op) const;
  bool defined() const { return tensor_.defined(); }

 private:
  Tensor tensor_;
  Edge history_;
  uint32_t version_ = 0;
  uint32_t output_nr_ = 0;
  bool is_output_ = false;
};

namespace detail {
/// The node whose backward runs with create_graph on this thread, or null (autograd/engine.cpp
/// sets it around each apply): SavedTensor::output tensors unpack as its outputs.
Node* create_graph_node();
/// Sets create_graph_node() for its scope; nests.
class CreateGraphNodeScope {
 public:
  explicit CreateGraphNodeScope(Node* node);
  ~CreateGraphNodeScope();
  CreateGraphNodeScope(const CreateGraphNodeScope&) = delete;
  CreateGraphNodeScope& operator=(const CreateGraphNodeScope&) = delete;

 private:
  Node* prev_;
};
/// An alias of `t` (its storage, no autograd state) whose grad_fn is `e.node`, output e.input_nr.
Tensor alias_with_history(const Tensor& t, const Edge& e);
}  // namespace detail

/// The edge a gradient for `t` must flow into: its grad_fn, its AccumulateGrad (leaves that
/// require grad), or an invalid edge.
Edge gradient_edge(const Tensor& t);
/// The AccumulateGrad node of a leaf that requires grad (created on first use).
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);

}  // namespace sl
