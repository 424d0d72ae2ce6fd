#include "core/ops/elementwise.h"

#include "core/ops/copy.h"
#include "core/ops/overlap.h"

namespace sl {

SL_DEFINE_KERNEL(unary_kernel, void(UnaryOp op, const Tensor& out, const Tensor& in));
SL_DEFINE_KERNEL(binary_kernel, void(BinaryOp op, const Tensor& out, const Tensor& a,
                                     const Tensor& b, Scalar alpha));
SL_DEFINE_KERNEL(where_kernel,
                 void(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b));
SL_DEFINE_KERNEL(clamp_kernel, void(const Tensor& out, const Tensor& in, std::optional<Scalar> lo,
                                    std::optional<Scalar> hi));

const char* unary_op_name(UnaryOp op) {
  static const char* names[] = {
      "neg",       "abs",    "exp",        "log",         "log1p",   "expm1", "sqrt",
      "rsqrt",     "square", "reciprocal", "tanh",        "sigmoid", "relu",  "gelu",
      "gelu_tanh", "silu",   "sin",        "cos",         "sign",    "erf",   "floor",
      "ceil",      "round",  "trunc",      "logical_not", "isnan",   "isinf", "isfinite"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(UnaryOp::count_));
  return names[static_cast<int>(op)];
}

const char* binary_op_name(BinaryOp op) {
  static const char* names[] = {"add",
                                "sub",
                                "mul",
                                "div",
                                "pow",
                                "maximum",
                                "minimum",
                                "atan2",
                                "fmod",
                                "remainder",
                                "eq",
                                "ne",
                                "lt",
                                "le",
                                "gt",
                                "ge",
                                "logical_and",
                                "logical_or",
                                "logical_xor",
                                "relu_backward",
                                "sigmoid_backward",
                                "tanh_backward",
                                "gelu_backward",
                                "gelu_tanh_backward",
                                "silu_backward"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(BinaryOp::count_));
  return names[static_cast<int>(op)];
}

namespace ops {

namespace {
int category(DType t) {
  return is_bool(t) ? 0 : is_integral(t) ? 1 : 2;
}

bool needs_float_result(BinaryOp op) {
  return op == BinaryOp::div || op == BinaryOp::atan2 || op >= BinaryOp::relu_backward;
}

/// A 0-d CPU tensor used with a tensor on another device acts as a scalar (as in PyTorch).
Tensor move_scalar_to(const Tensor& t, Device d) {
  if (t.device() == d) return t;
  if (t.dim() == 0 && t.is_cpu()) return to_device(t, d);
  return t;
}
}  // namespace

DType result_type(const Tensor& a, const Tensor& b) {
  bool da = a.dim() > 0, db = b.dim() > 0;
  if (da == db) return promote_types(a.dtype(), b.dtype());
  const Tensor& dimmed = da ? a : b;
  const Tensor& zero = da ? b : a;
  if (category(zero.dtype()) > category(dimmed.dtype())) return zero.dtype();
  return dimmed.dtype();
}

DType result_type(const Tensor& a, Scalar b) {
  DType sd = b.natural_dtype();
  if (category(sd) > category(a.dtype())) return sd;
  return a.dtype();
}

// Note [Bool inputs]: PyTorch 1.13 refuses a bool tensor for neg, abs, relu, gelu, silu,
// floor/ceil/round/trunc, and for pow, fmod and remainder whose computation type is bool
// (bool ^ bool, True ^ bool tensor); square(bool) is pow(x, 2), computed in int64 as bool ^ int
// is; the float ops (exp, log, sqrt, sigmoid, ...) give float32 and sign stays bool. Checked
// before any cast, so a float op never hides the refusal (gelu would otherwise promote). gelu and
// silu refuse integer tensors too, where exp, sigmoid and the other float ops promote.
namespace {
/// True for ops PyTorch 1.13 refuses on an integer tensor ("GeluKernelImpl" / "silu_cpu" not
/// implemented for 'Long'), where the other float ops promote to float32.
constexpr bool unary_op_refuses_integer(UnaryOp op) {
  return op == UnaryOp::gelu || op == UnaryOp::gelu_tanh || op == UnaryOp::silu;
}

/// The op's name in errors: PyTorch's, so gelu_tanh is gelu (approximate='tanh').
const char* error_name(UnaryOp op) {
  return op == UnaryOp::gelu_tanh ? "gelu" : unary_op_name(op);
}

void check_unary_dtype(UnaryOp op, const char* name, const char* suffix, DType dt) {
  SL_CHECK_DTYPE(!(is_integral(dt) && unary_op_refuses_integer(op)), name, suffix,
                 ": not implemented for ", dtype_name(dt),
                 " tensors (a floating-point input is needed)");
  if (!is_bool(dt)) return;
  SL_CHECK_DTYPE(op != UnaryOp::neg, name, suffix,
                 ": negation is not supported for bool tensors; use logical_not");
  SL_CHECK_DTYPE(!unary_op_refuses_bool(op), name, suffix,
                 ": not supported for bool tensors (convert to an integer or floating dtype)");
}
}  // namespace

Tensor unary(UnaryOp op, const Tensor& in) {
  const char* name = error_name(op);
  check_defined(name, in);
  check_unary_dtype(op, name, "", in.dtype());
  Tensor x = in;
  if (unary_op_needs_float(op) && !is_floating(x.dtype())) x = cast(x, kDefaultFloat);
  if (op == UnaryOp::square && is_bool(x.dtype())) x = cast(x, DType::i64);
  Tensor out = empty(x.sizes(), unary_op_is_predicate(op) ? DType::b8 : x.dtype(), x.device());
  if (out.numel() > 0) unary_kernel(x.device().kind, op, out, x);
  return out;
}

void unary_(UnaryOp op, const Tensor& self) {
  const char* name = error_name(op);
  check_defined(name, self);
  SL_CHECK_DTYPE(!unary_op_is_predicate(op) || is_bool(self.dtype()), name,
                 "_: result type bool cannot be stored in place in a ", dtype_name(self.dtype()),
                 " tensor");
  check_unary_dtype(op, name, "_", self.dtype());
  SL_CHECK_DTYPE(!unary_op_needs_float(op) || is_floating(self.dtype()), name,
                 "_: result type float cannot be stored in place in a ", dtype_name(self.dtype()),
                 " tensor");
  SL_CHECK_DTYPE(!(op == UnaryOp::square && is_bool(self.dtype())), name,
                 "_: result type int64 cannot be stored in place in a bool tensor");
  check_no_internal_overlap(detail::str_cat(name, "_").c_str(), self);
  if (self.numel() > 0) unary_kernel(self.device().kind, op, self, self);
  self.bump_version();
}

namespace {

/// PyTorch's alpha_check for add/sub: a bool alpha only for a bool result, and a floating alpha
/// only for a floating result (it would be truncated for an integer one: int + int with
/// alpha 2.5 used to add 2 silently). `result` is the computation's dtype.
void check_alpha(const char* name, BinaryOp op, DType result, Scalar alpha) {
  if (op != BinaryOp::add && op != BinaryOp::sub) return;
  SL_CHECK_DTYPE(!alpha.is_bool() || is_bool(result), name, ": a bool alpha (", alpha.to_double(),
                 ") is only supported for a bool result; the result is ", dtype_name(result));
  SL_CHECK_DTYPE(!alpha.is_floating() || is_floating(result), name, ": alpha ", alpha.to_double(),
                 " is a floating-point number, but the result is ", dtype_name(result),
                 "; for integral tensors alpha must be an integer");
}

/// Note [Bool inputs]: pow, fmod and remainder refuse a bool computation type, as PyTorch.
void check_bool_computation(const char* name, BinaryOp op, DType ct) {
  const bool refuses = op == BinaryOp::pow || op == BinaryOp::fmod || op == BinaryOp::remainder;
  SL_CHECK_DTYPE(!(refuses && is_bool(ct)), name,
                 ": not supported for bool tensors (both operands bool; convert one to an integer "
                 "or floating dtype)");
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a_in, const Tensor& b_in, Scalar alpha) {
  const char* name = binary_op_name(op);
  check_defined(name, a_in, "first operand");
  check_defined(name, b_in, "second operand");
  Tensor a = move_scalar_to(a_in, b_in.device());
  Tensor b = move_scalar_to(b_in, a.device());
  check_same_device(name, {&a, &b});
  DType ct = result_type(a, b);
  if (needs_float_result(op) && !is_floating(ct)) ct = kDefaultFloat;
  SL_CHECK_DTYPE(!((op == BinaryOp::sub) && is_bool(ct)), name,
                 ": subtraction of bool tensors is not supported; use logical_xor");
  check_bool_computation(name, op, ct);
  check_alpha(name, op, ct, alpha);
  Shape shape = a.sizes() == b.sizes() ? a.sizes() : broadcast_shapes(a.sizes(), b.sizes(), name);
  if (a.dtype() != ct) a = cast(a, ct);
  if (b.dtype() != ct) b = cast(b, ct);
  if (a.sizes() != shape) a = a.expand(shape);
  if (b.sizes() != shape) b = b.expand(shape);
  Tensor out = empty(shape, binary_op_is_predicate(op) ? DType::b8 : ct, a.device());
  if (out.numel() > 0) binary_kernel(a.device().kind, op, out, a, b, alpha);
  return out;
}

namespace {

/// PyTorch refuses an integer (or bool) tensor raised to a negative integer scalar: the exact
/// result is not an integer. A tensor of exponents is not checked (as in PyTorch: the integer
/// kernel gives 0, or +-1 for bases +-1).
void check_int_pow_exponent(const char* name, DType result, Scalar e) {
  SL_CHECK_DTYPE(is_floating(result) || e.is_floating() || e.to_double() >= 0, name,
                 ": integers to negative integer powers are not allowed (", dtype_name(result),
                 " tensor, exponent ", e.to_double(),
                 "); use a floating exponent or convert the tensor to a floating dtype");
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, Scalar b) {
  check_defined(binary_op_name(op), a);
  if (op == BinaryOp::pow) check_int_pow_exponent("pow", result_type(a, b), b);
  return binary(op, a, scalar_operand(b, result_type(a, b), a.device(), binary_op_name(op)));
}

Tensor binary(BinaryOp op, Scalar a, const Tensor& b) {
  check_defined(binary_op_name(op), b);
  return binary(op, scalar_operand(a, result_type(b, a), b.device(), binary_op_name(op)), b);
}

void binary_(BinaryOp op, const Tensor& self, const Tensor& b_in, Scalar alpha) {
  // every message names the in-place op ("add_")
  const std::string inplace_name = detail::str_cat(binary_op_name(op), "_");
  const char* name = inplace_name.c_str();
  check_defined(name, self);
  check_defined(name, b_in, "second operand");
  Tensor b = move_scalar_to(b_in, self.device());
  check_same_device(name, {&self, &b});
  DType ct = result_type(self, b);
  if (needs_float_result(op) && !is_floating(ct)) ct = kDefaultFloat;
  SL_CHECK_DTYPE(!binary_op_is_predicate(op) || is_bool(self.dtype()), name,
                 ": result type bool cannot be stored in place in a ", dtype_name(self.dtype()),
                 " tensor");
  SL_CHECK_DTYPE(category(ct) <= category(self.dtype()) || binary_op_is_predicate(op), name,
                 ": result type ", dtype_name(ct), " cannot be cast to the in-place output's ",
                 dtype_name(self.dtype()));
  check_bool_computation(name, op, ct);
  check_alpha(name, op, ct, alpha);
  if (b.sizes() != self.sizes()) {
    Shape s = broadcast_shapes(self.sizes(), b.sizes(), name);
    SL_CHECK_SHAPE(s == self.sizes(), name, ": output of shape ", shape_str(self.sizes()),
                   " does not match the broadcast shape ", shape_str(s));
    b = b.expand(self.sizes());
  }
  // Note [In-place overlap]
  check_no_internal_overlap(name, self);
  if (partially_overlaps(self, b)) b = contiguous(b, /*force_copy=*/true);
  // compute in self's dtype (PyTorch computes in the promoted type then casts; for the floating
  // types both agree to rounding, and integer self never receives a float result)
  if (!binary_op_is_predicate(op) && b.dtype() != self.dtype()) b = cast(b, self.dtype());
  Tensor a = self;
  if (binary_op_is_predicate(op) && b.dtype() != self.dtype()) {
    a = cast(self, ct);
    b = cast(b, ct);
  }
  if (self.numel() > 0) binary_kernel(self.device().kind, op, self, a, b, alpha);
  self.bump_version();
}

void binary_(BinaryOp op, const Tensor& self, Scalar b) {
  const std::string name = detail::str_cat(binary_op_name(op), "_");
  check_defined(name.c_str(), self);
  if (op == BinaryOp::pow) check_int_pow_exponent("pow_", self.dtype(), b);
  binary_(op, self, scalar_operand(b, result_type(self, b), self.device(), name.c_str()));
}

Tensor where(const Tensor& cond_in, const Tensor& a_in, const Tensor& b_in) {
  check_defined("where", cond_in, "condition");
  check_defined("where", a_in, "first value");
  check_defined("where", b_in, "second value");
  Tensor a = move_scalar_to(a_in, cond_in.device());
  Tensor b = move_scalar_to(b_in, cond_in.device());
  check_same_device("where", {&cond_in, &a, &b});
  SL_CHECK_DTYPE(is_bool(cond_in.dtype()), "where: condition must be bool, got ",
                 dtype_name(cond_in.dtype()));
  DType ct = result_type(a, b);
  Shape shape =
      broadcast_shapes(broadcast_shapes(cond_in.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor c = cond_in.sizes() == shape ? cond_in : cond_in.expand(shape);
  if (a.dtype() != ct) a = cast(a, ct);
  if (b.dtype() != ct) b = cast(b, ct);
  if (a.sizes() != shape) a = a.expand(shape);
  if (b.sizes() != shape) b = b.expand(shape);
  Tensor out = empty(shape, ct, c.device());
  if (out.numel() > 0) where_kernel(c.device().kind, out, c, a, b);
  return out;
}

Tensor clamp(const Tensor& in, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  check_defined("clamp", in);
  SL_CHECK(lo || hi, "clamp: at least one of min and max must be given");
  Tensor x = in;
  // value_or, not `lo && lo->is_floating()`: GCC at -O3 evaluates both sides of that without a
  // branch, reading the empty optional's uninitialised payload (harmless, but memcheck reports
  // it); Scalar() is an integer, so an absent bound never asks for floating point
  const bool float_bound =
      lo.value_or(Scalar()).is_floating() || hi.value_or(Scalar()).is_floating();
  if (!is_floating(x.dtype()) && float_bound) {
    x = cast(x, kDefaultFloat);
  } else if (is_bool(x.dtype())) {
    // Note [Bool inputs]: PyTorch 1.13 computes clamp in the type its bounds promote to: a bool
    // tensor with an integer bound gives int64 (clamp(b, 0, 1), clamp(b, 2)), with a floating
    // one float32 (above); with only bool bounds it stays bool and is refused ("clamp_cpu" not
    // implemented for 'Bool'). Scalar(true): an absent bound counts as bool here.
    const bool int_bound =
        !lo.value_or(Scalar(true)).is_bool() || !hi.value_or(Scalar(true)).is_bool();
    SL_CHECK_DTYPE(int_bound, "clamp: not supported for bool tensors with bool bounds");
    x = cast(x, DType::i64);
  }
  for (const auto& bound : {lo, hi}) {
    if (bound) check_scalar_fits("clamp", *bound, x.dtype());
  }
  Tensor out = empty_like(x);
  if (out.numel() > 0) clamp_kernel(x.device().kind, out, x, lo, hi);
  return out;
}

void clamp_(const Tensor& self, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  check_defined("clamp_", self);
  SL_CHECK(lo || hi, "clamp_: at least one of min and max must be given");
  SL_CHECK_DTYPE(!is_bool(self.dtype()), "clamp_: not supported for bool tensors");
  const bool float_bound =
      lo.value_or(Scalar()).is_floating() || hi.value_or(Scalar()).is_floating();
  SL_CHECK_DTYPE(is_floating(self.dtype()) || !float_bound, "clamp_: result type ",
                 dtype_name(kDefaultFloat), " cannot be cast to the in-place output's ",
                 dtype_name(self.dtype()), " (a floating bound on an integer tensor)");
  for (const auto& bound : {lo, hi}) {
    if (bound) check_scalar_fits("clamp_", *bound, self.dtype());
  }
  check_no_internal_overlap("clamp_", self);
  if (self.numel() > 0) clamp_kernel(self.device().kind, self, self, lo, hi);
  self.bump_version();
}

Tensor masked_fill(const Tensor& in, const Tensor& mask, Scalar value) {
  check_defined("masked_fill", in);
  check_defined("masked_fill", mask, "mask");
  SL_CHECK_DTYPE(is_bool(mask.dtype()), "masked_fill: mask must be bool, got ",
                 dtype_name(mask.dtype()));
  Tensor v = scalar_tensor(value, in.dtype(), in.device(), "masked_fill");
  Tensor m = move_scalar_to(mask, in.device());
  broadcast_shapes(in.sizes(), m.sizes(), "masked_fill");  // ShapeError naming masked_fill
  return where(m, v, in);
}

void masked_fill_(const Tensor& self, const Tensor& mask, Scalar value) {
  check_defined("masked_fill_", self);
  check_defined("masked_fill_", mask, "mask");
  Shape s = broadcast_shapes(self.sizes(), mask.sizes(), "masked_fill_");
  SL_CHECK_SHAPE(s == self.sizes(), "masked_fill_: output of shape ", shape_str(self.sizes()),
                 " does not match the broadcast shape ", shape_str(s), " (mask of shape ",
                 shape_str(mask.sizes()), ")");
  check_no_internal_overlap("masked_fill_", self);
  Tensor r = masked_fill(self, mask, value);
  copy_(self, r);
}

}  // namespace ops
}  // namespace sl
