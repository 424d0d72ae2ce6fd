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

/// Creates a LambdaNode with edges to `inputs` and makes it the grad_fn of each output.
/// Outputs must be fresh (not views of inputs) or views created by this op.
void record(const char* name, std::initializer_list<Tensor> inputs,
            std::initializer_list<Tensor*> outputs, BackwardFn fn);
void record(const char* name, const TensorList& inputs, const std::vector<Tensor*>& outputs,
            BackwardFn fn);

/// Before an in-place op on `self`: throws AutogradError when autograd forbids it (a leaf that
/// requires grad, or a view of a tensor that requires grad, while grad mode is on).
void check_inplace(const Tensor& self, const char* op);
/// After an in-place op on self computed from `others`: bumps self's version and, when recording,
/// makes a new node (edge 0: self's previous history, then `others`) self's grad_fn.
void record_inplace(const char* name, Tensor& self, std::initializer_list<Tensor> others,
                    BackwardFn fn);

/// Reduces a broadcast gradient back to `shape` by summing the broadcast dims.
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace sl
