// Helpers that differentiable ops use to record themselves (see autograd/ops/*.cpp).
//
//   Tensor mul(const Tensor& a, const Tensor& b) {
//     Tensor out = ops::binary(BinaryOp::mul, a, b);
//     if (needs_grad(a, b)) {
//       record("MulBackward", {a, b}, {&out},
//              [sa = SavedTensor(a), sb = SavedTensor(b)](const BackwardCtx& c) -> variable_list {
//                ...
//              });
//     }
//     return out;
//   }
#pragma once

#include <initializer_list>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"

namespace sl {

/// True when grad mode is on and any defined argument requires grad.
template <class... Ts>
bool needs_grad(const Ts&... ts) {
  if (!GradMode::is_enabled()) return false;
  return ((ts.defined() && ts.requires_grad()) || ...);
}
bool needs_grad_list(const TensorList& ts);

namespace detail {
/// Gives `node` edges to `inputs` and makes it the grad_fn of each output (record's body).
void attach_node(const std::shared_ptr<Node>& node, std::initializer_list<Tensor> inputs,
                 std::initializer_list<Tensor*> outputs);
void attach_node(const std::shared_ptr<Node>& node, const TensorList& inputs,
                 const std::vector<Tensor*>& outputs);
/// record_inplace's body: edge 0 to self's previous history, then `others`.
void attach_node_inplace(const std::shared_ptr<Node>& node, Tensor& self,
                         std::initializer_list<Tensor> others);
}  // namespace detail

/// Whether a recorded op's backward lambda is built only from differentiable ops (sl::mul, not
/// ops::binary; no fused backward kernel when grad mode is on), so that a backward with
/// create_graph can differentiate it again. Each op that says `supported` has a gradgradcheck
/// test (tests/autograd/test_double_backward*.cpp); Note [Double backward], autograd/engine.cpp.
enum class DoubleBackward : bool { unsupported, supported };

namespace detail {
template <class F>
std::shared_ptr<Node> make_lambda_node(const char* name, F&& fn, DoubleBackward db) {
  auto node = std::make_shared<LambdaNode<std::decay_t<F>>>(name, std::forward<F>(fn));
  node->double_differentiable = db == DoubleBackward::supported;
  return node;
}
}  // namespace detail

/// Creates a LambdaNode holding `fn` (callable as variable_list(const BackwardCtx&)) with edges to
/// `inputs` and makes it the grad_fn of each output.
/// Outputs must be fresh (not views of inputs) or views created by this op.
template <class F>
void record(const char* name, std::initializer_list<Tensor> inputs,
            std::initializer_list<Tensor*> outputs, F&& fn,
            DoubleBackward db = DoubleBackward::unsupported) {
  detail::attach_node(detail::make_lambda_node(name, std::forward<F>(fn), db), inputs, outputs);
}
template <class F>
void record(const char* name, const TensorList& inputs, const std::vector<Tensor*>& outputs, F&& fn,
            DoubleBackward db = DoubleBackward::unsupported) {
  detail::attach_node(detail::make_lambda_node(name, std::forward<F>(fn), db), inputs, outputs);
}

/// Before an in-place op on `self` computed from `others`: throws AutogradError when autograd
/// cannot record it while grad mode is on: self is a leaf that requires grad, or a view that
/// check_inplace_view (autograd/view_tracking.h) refuses.
void check_inplace(const Tensor& self, const char* op, std::initializer_list<Tensor> others = {});
/// After an in-place op on self computed from `others`: bumps self's version and, when recording,
/// makes a new node (edge 0: self's previous history, then `others`) self's grad_fn.
template <class F>
void record_inplace(const char* name, Tensor& self, std::initializer_list<Tensor> others, F&& fn) {
  detail::attach_node_inplace(
      std::make_shared<LambdaNode<std::decay_t<F>>>(name, std::forward<F>(fn)), self, others);
}

/// Reduces a broadcast gradient back to `shape` by summing the broadcast dims.
Tensor sum_to(const Tensor& grad, const Shape& shape);

/// Helpers for backward formulas: while a backward records a graph (create_graph, grad mode on)
/// they are the differentiable ops (Tensor::reshape, Tensor::expand, sl::sum); otherwise the
/// kernels those call, without view tracking or recording (the same values).
Tensor grad_reshape(const Tensor& g, const Shape& shape);
Tensor grad_expand(const Tensor& g, const Shape& shape);
Tensor grad_sum(const Tensor& g, const std::vector<int64_t>& dims, bool keepdim);

}  // namespace sl
