// Derivatives of activations as differentiable ops, shared by the backward formulas that record
// a graph under create_graph (Note [Double backward] in autograd/engine.cpp) where the plain
// backward is a fused kernel: gelu's own and linear_act's, softmax's and attention's. Internal
// (not installed).
#pragma once

#include "core/tensor.h"

namespace sl::detail {

/// d gelu / dx at x as differentiable ops: Phi(x) + x phi(x), or for the tanh form
/// (tanh_form) with u = sqrt(2/pi) (x + 0.044715 x^3): 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'.
Tensor gelu_derivative(const Tensor& x, bool tanh_form);

/// The gradient w.r.t. the input of y = softmax(x) along dim, from y and the output gradient g,
/// as differentiable ops: y * (g - sum(g * y)).
Tensor softmax_backward_ops(const Tensor& g, const Tensor& y, int64_t dim);

}  // namespace sl::detail
