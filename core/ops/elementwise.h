// The "elementwise" family: unary and binary maps with NumPy broadcasting and PyTorch's type
// promotion, ternary where, clamp. Not differentiable (see autograd/ops/elementwise.h).
#pragma once

#include <cstdint>
#include <optional>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

enum class UnaryOp : uint8_t {
  neg, abs, exp, log, log1p, expm1, sqrt, rsqrt, square, reciprocal, tanh, sigmoid, relu,
  gelu,       // exact: x * Phi(x)
  gelu_tanh,  // tanh approximation
  silu, sin, cos, sign, erf, floor, ceil, round, trunc,
  logical_not, isnan, isinf, isfinite,  // bool results
  count_
};
const char* unary_op_name(UnaryOp op);
/// True for ops whose result is bool whatever the input.
constexpr bool unary_op_is_predicate(UnaryOp op) {
  return op == UnaryOp::logical_not || op == UnaryOp::isnan || op == UnaryOp::isinf ||
         op == UnaryOp::isfinite;
}
/// True for ops that need a floating input (integers are promoted to float32 first).
constexpr bool unary_op_needs_float(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg:
    case UnaryOp::abs:
    case UnaryOp::square:
    case UnaryOp::relu:
    case UnaryOp::sign:
    case UnaryOp::floor:
    case UnaryOp::ceil:
    case UnaryOp::round:
    case UnaryOp::trunc:
    case UnaryOp::logical_not:
    case UnaryOp::isnan:
    case UnaryOp::isinf:
    case UnaryOp::isfinite:
      return false;
    default:
      return true;
  }
}

/// True for ops PyTorch 1.13 refuses on a bool tensor ("abs_cpu" not implemented for 'Bool',
/// "Boolean inputs not supported for relu"); neg is refused with a message of its own. square of
/// a bool is pow(x, 2) there, an int64 result. Note [Bool inputs] in core/ops/elementwise.cpp.
constexpr bool unary_op_refuses_bool(UnaryOp op) {
  switch (op) {
    case UnaryOp::abs:
    case UnaryOp::relu:
    case UnaryOp::gelu:
    case UnaryOp::gelu_tanh:
    case UnaryOp::silu:
    case UnaryOp::floor:
    case UnaryOp::ceil:
    case UnaryOp::round:
    case UnaryOp::trunc:
      return true;
    default:
      return false;
  }
}

enum class BinaryOp : uint8_t {
  add,  // a + alpha * b
  sub,  // a - alpha * b
  mul, div, pow, maximum, minimum, atan2, fmod, remainder,
  eq, ne, lt, le, gt, ge,                   // bool results
  logical_and, logical_or, logical_xor,     // bool results
  // Fused backward helpers: a = incoming gradient, b = saved tensor (x or y as named).
  relu_backward,       // b <= 0 ? 0 : a, b = y (or x); a NaN b passes a, as PyTorch
  sigmoid_backward,    // a * b * (1 - b), b = y
  tanh_backward,       // a * (1 - b^2), b = y
  gelu_backward,       // a * d/dx gelu(x), b = x
  gelu_tanh_backward,  // a * d/dx gelu_tanh(x), b = x
  silu_backward,       // a * d/dx silu(x), b = x
  count_
};
const char* binary_op_name(BinaryOp op);
constexpr bool binary_op_is_predicate(BinaryOp op) {
  return op >= BinaryOp::eq && op <= BinaryOp::logical_xor;
}

/// out = op(in); out and in have the same sizes. CPU: in has out's dtype, except for predicates
/// (out is bool). Any strides.
SL_DECLARE_KERNEL(unary_kernel, void(UnaryOp op, const Tensor& out, const Tensor& in));
/// out = op(a, b); a and b are expanded to out's sizes and share one dtype (out is bool for
/// predicates, else that dtype). `alpha` scales b for add/sub.
SL_DECLARE_KERNEL(binary_kernel,
                  void(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                       Scalar alpha));
/// out = cond ? a : b; cond is bool; all expanded to out's sizes; a, b have out's dtype.
SL_DECLARE_KERNEL(where_kernel,
                  void(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b));
/// out = min(max(in, lo), hi) with optional bounds; same dtype.
SL_DECLARE_KERNEL(clamp_kernel, void(const Tensor& out, const Tensor& in,
                                     std::optional<Scalar> lo, std::optional<Scalar> hi));

namespace ops {

/// PyTorch's result_type for two operands: tensors with dims outrank 0-d tensors within a
/// category (bool < integer < floating).
DType result_type(const Tensor& a, const Tensor& b);
/// result_type for a tensor and a wrapped number.
DType result_type(const Tensor& a, Scalar b);

/// op(in): float ops promote integer and bool inputs to float32, square promotes bool to int64;
/// DTypeError for a bool input to the ops unary_op_refuses_bool names and neg, and for an integer
/// input to gelu, gelu_tanh and silu (as PyTorch 1.13; errors name gelu_tanh as gelu).
Tensor unary(UnaryOp op, const Tensor& in);
/// In place; throws DTypeError when the result type cannot be stored in self (predicates, float
/// ops on integer or bool tensors, square of a bool) or unary() would refuse self.
void unary_(UnaryOp op, const Tensor& self);
/// alpha (add and sub only) follows PyTorch: a floating alpha needs a floating result, a bool
/// alpha a bool result; DTypeError otherwise.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha = 1);
/// With a scalar operand: the scalar is converted to the result type, and one that does not fit
/// an integer result (NaN, inf, out of range) throws ValueError naming the op (check_scalar_fits;
/// stricter than PyTorch, which wraps an out-of-range integer scalar silently here).
Tensor binary(BinaryOp op, const Tensor& a, Scalar b);
Tensor binary(BinaryOp op, Scalar a, const Tensor& b);
/// self = op(self, b). b must broadcast to self's shape; the result is cast to self's dtype
/// (floating into integer throws DTypeError, as in PyTorch).
void binary_(BinaryOp op, const Tensor& self, const Tensor& b, Scalar alpha = 1);
void binary_(BinaryOp op, const Tensor& self, Scalar b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// in limited to [lo, hi] (either may be absent; NaN stays NaN); an integer or bool input with a
/// floating bound is computed in the default float dtype, a bool input with an integer bound in
/// int64 (only bool bounds on a bool input: DTypeError), as PyTorch 1.13. A bound that does not fit
/// an integer input throws ValueError (check_scalar_fits), as PyTorch.
Tensor clamp(const Tensor& in, std::optional<Scalar> lo, std::optional<Scalar> hi);
/// clamp in place: a floating bound on an integer self throws DTypeError (the float result cannot
/// be stored), an integer bound out of self's range ValueError.
void clamp_(const Tensor& self, std::optional<Scalar> lo, std::optional<Scalar> hi);
/// in with `value` where mask (bool) is true, of the shape in and mask broadcast to (as PyTorch's
/// out-of-place masked_fill, in grows where mask has more dims); a value that does not fit an
/// integer in throws ValueError (check_scalar_fits), shapes that do not broadcast ShapeError.
Tensor masked_fill(const Tensor& in, const Tensor& mask, Scalar value);
/// masked_fill in place: mask must broadcast to self's own shape (ShapeError naming masked_fill_
/// and both shapes where self would have to grow, as PyTorch).
void masked_fill_(const Tensor& self, const Tensor& mask, Scalar value);

}  // namespace ops
}  // namespace sl
