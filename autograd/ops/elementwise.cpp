// Differentiable elementwise ops: each forward calls the core kernel, and its backward is the
// lambda beside it. Gradients of broadcast operands are summed back to their shapes (sum_to).
#include "autograd/ops/elementwise.h"

#include <cmath>
#include <limits>
#include <utility>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/activation_derivative.h"
#include "core/amp.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"

namespace sl {

namespace {

/// Records a unary op whose gradient is grad_fn(g, x, y) (x input, y output; each saved only
/// when requested).
/// grad_fn must be built from differentiable ops when grad mode is on (create_graph): every
/// unary op here supports double backward.
template <class F>
Tensor unary_op(UnaryOp op, const char* node_name, const Tensor& a, bool save_x, bool save_y,
                F grad_fn) {
  Tensor out = ops::unary(op, a);
  if (needs_grad(a)) {
    SavedTensor sx = save_x ? SavedTensor(a) : SavedTensor();
    SavedTensor sy = save_y ? SavedTensor::output(out) : SavedTensor();
    record(
        node_name, {a}, {&out},
        [sx, sy, node_name, grad_fn](const BackwardCtx& c) -> variable_list {
          return {grad_fn(c.grad(), sx.unpack(node_name), sy.unpack(node_name))};
        },
        DoubleBackward::supported);
  }
  return out;
}

/// Non-differentiable result (comparisons, sign, ...).
Tensor no_grad_result(Tensor t) { return t; }

}  // namespace

// ---- binary arithmetic ------------------------------------------------------------------------

namespace {

/// a + alpha * b or a - alpha * b. sub is its own kernel op rather than add with -alpha: that
/// turned bool - bool into a logical or, and an integer alpha into a floating one (which add
/// refuses for integer tensors).
Tensor add_or_sub(bool is_sub, const Tensor& a, const Tensor& b, Scalar alpha) {
  Tensor out = ops::binary(is_sub ? BinaryOp::sub : BinaryOp::add, a, b, alpha);
  if (needs_grad(a, b)) {
    Shape sa = a.sizes(), sb = b.sizes();
    const double scale = is_sub ? -alpha.to_double() : alpha.to_double();  // d out / d b
    record(
        is_sub ? "SubBackward" : "AddBackward", {a, b}, {&out},
        [sa = std::move(sa), sb = std::move(sb), scale](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor gb;
          if (c.needs(1)) gb = sum_to(scale == 1.0 ? g : mul(g, Scalar(scale)), sb);
          return {c.needs(0) ? sum_to(g, sa) : Tensor(), gb};
        },
        DoubleBackward::supported);
  }
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  return add_or_sub(false, a, b, alpha);
}

Tensor add(const Tensor& a, Scalar b) {
  Tensor out = ops::binary(BinaryOp::add, a, b);
  if (needs_grad(a)) {
    record(
        "AddBackward", {a}, {&out},
        [](const BackwardCtx& c) -> variable_list { return {c.grad()}; },
        DoubleBackward::supported);
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  return add_or_sub(true, a, b, alpha);
}

Tensor sub(const Tensor& a, Scalar b) {
  return add(a, b.is_floating() ? Scalar(-b.to_double()) : Scalar(-b.to_int()));
}

Tensor rsub(const Tensor& a, Scalar b) { return add(neg(a), b); }

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = ops::binary(BinaryOp::mul, a, b);
  if (needs_grad(a, b)) {
    Shape sa = a.sizes(), sb = b.sizes();
    SavedTensor va = b.requires_grad() ? SavedTensor(a) : SavedTensor();
    SavedTensor vb = a.requires_grad() ? SavedTensor(b) : SavedTensor();
    record(
        "MulBackward", {a, b}, {&out},
        [sa = std::move(sa), sb = std::move(sb), va, vb](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor ga, gb;
          if (c.needs(0)) ga = sum_to(mul(g, vb.unpack("MulBackward")), sa);
          if (c.needs(1)) gb = sum_to(mul(g, va.unpack("MulBackward")), sb);
          return {ga, gb};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor mul(const Tensor& a, Scalar b) {
  Tensor out = ops::binary(BinaryOp::mul, a, b);
  if (needs_grad(a)) {
    record(
        "MulBackward", {a}, {&out},
        [b](const BackwardCtx& c) -> variable_list { return {mul(c.grad(), b)}; },
        DoubleBackward::supported);
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = ops::binary(BinaryOp::div, a, b);
  if (needs_grad(a, b)) {
    Shape sa = a.sizes(), sb = b.sizes();
    SavedTensor vb(b);
    SavedTensor vout = b.requires_grad() ? SavedTensor::output(out) : SavedTensor();
    record(
        "DivBackward", {a, b}, {&out},
        [sa = std::move(sa), sb = std::move(sb), vb, vout](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor bb = vb.unpack("DivBackward");
          Tensor ga, gb;
          if (c.needs(0)) ga = sum_to(div(g, bb), sa);
          if (c.needs(1)) gb = sum_to(neg(div(mul(g, vout.unpack("DivBackward")), bb)), sb);
          return {ga, gb};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor div(const Tensor& a, Scalar b) {
  Tensor out = ops::binary(BinaryOp::div, a, b);
  if (needs_grad(a)) {
    record(
        "DivBackward", {a}, {&out},
        [b](const BackwardCtx& c) -> variable_list { return {div(c.grad(), b)}; },
        DoubleBackward::supported);
  }
  return out;
}

Tensor div(Scalar a, const Tensor& b_in) {
  const Tensor b = autocast(b_in, AmpPolicy::fp32);  // PyTorch's __rdiv__ is on the fp32 list
  Tensor out = ops::binary(BinaryOp::div, a, b);
  if (needs_grad(b)) {
    SavedTensor vb(b), vout = SavedTensor::output(out);
    record(
        "DivBackward", {b}, {&out},
        [vb, vout](const BackwardCtx& c) -> variable_list {
          // d(a/b)/db = -(a/b)/b
          return {neg(div(mul(c.grad(), vout.unpack("DivBackward")), vb.unpack("DivBackward")))};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor pow(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = autocast(a_in, AmpPolicy::fp32), b = autocast(b_in, AmpPolicy::fp32);
  Tensor out = ops::binary(BinaryOp::pow, a, b);
  if (needs_grad(a, b)) {
    Shape sa = a.sizes(), sb = b.sizes();
    SavedTensor va(a), vb(b), vout = SavedTensor::output(out);
    record(
        "PowBackward", {a, b}, {&out},
        [sa = std::move(sa), sb = std::move(sb), va, vb,
         vout](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor x = va.unpack("PowBackward"), e = vb.unpack("PowBackward");
          Tensor ga, gb;
          if (c.needs(0)) {
            // b * a^(b-1), with 0 where b == 0 (so 0^0 has zero gradient, as in PyTorch)
            Tensor d = mul(e, pow(x, sub(e, 1)));
            ga = sum_to(mul(g, masked_fill(d, eq(e, 0), 0)), sa);
          }
          if (c.needs(1)) {
            // a^b * log(a), with 0 where a == 0 and b >= 0
            Tensor d = mul(vout.unpack("PowBackward"), log(x));
            Tensor zero_mask = logical_and(eq(x, 0), ge(e, 0));
            gb = sum_to(mul(g, masked_fill(d, zero_mask, 0)), sb);
          }
          return {ga, gb};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor pow(const Tensor& a_in, Scalar e) {
  const Tensor a = autocast(a_in, AmpPolicy::fp32);
  Tensor out = ops::binary(BinaryOp::pow, a, e);
  if (needs_grad(a)) {
    SavedTensor va(a);
    record(
        "PowBackward", {a}, {&out},
        [va, e](const BackwardCtx& c) -> variable_list {
          double ev = e.to_double();
          if (ev == 0.0) return {zeros_like(c.grad())};
          Tensor x = va.unpack("PowBackward");
          return {mul(c.grad(), mul(pow(x, Scalar(ev - 1.0)), Scalar(ev)))};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor pow(Scalar a, const Tensor& b_in) {
  const Tensor b = autocast(b_in, AmpPolicy::fp32);
  Tensor out = ops::binary(BinaryOp::pow, a, b);
  if (needs_grad(b)) {
    SavedTensor vout = SavedTensor::output(out), vb(b);
    record(
        "PowBackward", {b}, {&out},
        [vout, vb, a](const BackwardCtx& c) -> variable_list {
          double av = a.to_double();
          Tensor y = vout.unpack("PowBackward");
          // d(a^b)/db = a^b log(a). At a = 0 that is 0 * -inf: PyTorch takes 0 where b >= 0 and
          // keeps the -inf (times the incoming gradient) where b < 0, where a^b is itself inf.
          if (av == 0.0) {
            Tensor b = vb.unpack("PowBackward");
            Tensor g = mul(c.grad(), mul(y, Scalar(-std::numeric_limits<double>::infinity())));
            return {masked_fill(g, ge(b, Scalar(0)), 0)};
          }
          return {mul(c.grad(), mul(y, Scalar(std::log(av))))};
        },
        DoubleBackward::supported);
  }
  return out;
}

namespace {
Tensor max_min(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  Tensor out = ops::binary(op, a, b);
  if (needs_grad(a, b)) {
    Shape sa = a.sizes(), sb = b.sizes();
    SavedTensor va(a), vb(b);
    bool is_max = op == BinaryOp::maximum;
    record(
        name, {a, b}, {&out},
        [sa = std::move(sa), sb = std::move(sb), va, vb, is_max,
         name](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor x = va.unpack(name), y = vb.unpack(name);
          Tensor tie = eq(x, y);
          Tensor half = mul(g, 0.5);
          Tensor zero = zeros_like(g);
          Tensor ga, gb;
          // The loser gets 0, ties split the gradient evenly, and otherwise it passes, as
          // PyTorch's formula: where a NaN meets anything neither loses, so both get all of it.
          if (c.needs(0)) {
            Tensor a_loses = is_max ? lt(x, y) : gt(x, y);
            ga = sum_to(where(a_loses, zero, where(tie, half, g)), sa);
          }
          if (c.needs(1)) {
            Tensor b_loses = is_max ? gt(x, y) : lt(x, y);
            gb = sum_to(where(b_loses, zero, where(tie, half, g)), sb);
          }
          return {ga, gb};
        },
        DoubleBackward::supported);
  }
  return out;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  return max_min(BinaryOp::maximum, "MaximumBackward", a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return max_min(BinaryOp::minimum, "MinimumBackward", a, b);
}

// ---- unary ------------------------------------------------------------------------------------

Tensor neg(const Tensor& a) {
  return unary_op(UnaryOp::neg, "NegBackward", a, false, false,
                  [](const Tensor& g, const Tensor&, const Tensor&) { return neg(g); });
}
Tensor abs(const Tensor& a) {
  return unary_op(UnaryOp::abs, "AbsBackward", a, true, false,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, sign(x)); });
}
Tensor exp(const Tensor& a) {
  return unary_op(UnaryOp::exp, "ExpBackward", autocast(a, AmpPolicy::fp32), false, true,
                  [](const Tensor& g, const Tensor&, const Tensor& y) { return mul(g, y); });
}
Tensor log(const Tensor& a) {
  return unary_op(UnaryOp::log, "LogBackward", autocast(a, AmpPolicy::fp32), true, false,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return div(g, x); });
}
Tensor log1p(const Tensor& a) {
  return unary_op(
      UnaryOp::log1p, "Log1pBackward", autocast(a, AmpPolicy::fp32), true, false,
      [](const Tensor& g, const Tensor& x, const Tensor&) { return div(g, add(x, 1)); });
}
Tensor expm1(const Tensor& a) {
  return unary_op(
      UnaryOp::expm1, "Expm1Backward", autocast(a, AmpPolicy::fp32), false, true,
      [](const Tensor& g, const Tensor&, const Tensor& y) { return mul(g, add(y, 1)); });
}
Tensor sqrt(const Tensor& a) {
  return unary_op(UnaryOp::sqrt, "SqrtBackward", a, false, true,
                  [](const Tensor& g, const Tensor&, const Tensor& y) {
                    return div(g, mul(y, 2));
                  });
}
Tensor rsqrt(const Tensor& a) {
  return unary_op(
      UnaryOp::rsqrt, "RsqrtBackward", autocast(a, AmpPolicy::fp32), false, true,
      [](const Tensor& g, const Tensor&, const Tensor& y) { return mul(g, mul(pow(y, 3), -0.5)); });
}
Tensor square(const Tensor& a) {
  return unary_op(UnaryOp::square, "SquareBackward", a, true, false,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, mul(x, 2)); });
}
Tensor reciprocal(const Tensor& a) {
  return unary_op(
      UnaryOp::reciprocal, "ReciprocalBackward", autocast(a, AmpPolicy::fp32), false, true,
      [](const Tensor& g, const Tensor&, const Tensor& y) { return neg(mul(g, mul(y, y))); });
}
Tensor tanh(const Tensor& a) {
  return unary_op(UnaryOp::tanh, "TanhBackward", a, false, true,
                  [](const Tensor& g, const Tensor&, const Tensor& y) {
                    if (GradMode::is_enabled()) return mul(g, rsub(mul(y, y), 1));  // 1 - y^2
                    return ops::binary(BinaryOp::tanh_backward, g, y);
                  });
}
Tensor sigmoid(const Tensor& a) {
  return unary_op(UnaryOp::sigmoid, "SigmoidBackward", a, false, true,
                  [](const Tensor& g, const Tensor&, const Tensor& y) {
                    if (GradMode::is_enabled()) return mul(g, mul(y, rsub(y, 1)));  // y (1 - y)
                    return ops::binary(BinaryOp::sigmoid_backward, g, y);
                  });
}
Tensor relu(const Tensor& a) {
  return unary_op(UnaryOp::relu, "ReluBackward", a, false, true,
                  [](const Tensor& g, const Tensor&, const Tensor& y) {
                    if (GradMode::is_enabled()) return where(gt(y, 0), g, zeros_like(g));
                    return ops::binary(BinaryOp::relu_backward, g, y);
                  });
}
Tensor gelu(const Tensor& a, const std::string& approximate) {
  SL_CHECK(approximate == "none" || approximate == "tanh",
           "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  bool t = approximate == "tanh";
  return unary_op(t ? UnaryOp::gelu_tanh : UnaryOp::gelu, "GeluBackward", a, true, false,
                  [t](const Tensor& g, const Tensor& x, const Tensor&) {
                    if (GradMode::is_enabled()) return mul(g, detail::gelu_derivative(x, t));
                    return ops::binary(t ? BinaryOp::gelu_tanh_backward : BinaryOp::gelu_backward,
                                       g, x);
                  });
}
Tensor silu(const Tensor& a) {
  return unary_op(UnaryOp::silu, "SiluBackward", a, true, false,
                  [](const Tensor& g, const Tensor& x, const Tensor&) {
                    if (GradMode::is_enabled()) {
                      Tensor sg = sigmoid(x);  // silu' = s (1 + x (1 - s))
                      return mul(g, mul(sg, add(mul(x, rsub(sg, 1)), 1)));
                    }
                    return ops::binary(BinaryOp::silu_backward, g, x);
                  });
}
Tensor sin(const Tensor& a) {
  return unary_op(UnaryOp::sin, "SinBackward", a, true, false,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, cos(x)); });
}
Tensor cos(const Tensor& a) {
  return unary_op(UnaryOp::cos, "CosBackward", a, true, false,
                  [](const Tensor& g, const Tensor& x, const Tensor&) {
                    return neg(mul(g, sin(x)));
                  });
}
Tensor erf(const Tensor& a) {
  return unary_op(UnaryOp::erf, "ErfBackward", a, true, false,
                  [](const Tensor& g, const Tensor& x, const Tensor&) {
                    // 2/sqrt(pi) * exp(-x^2)
                    return mul(g, mul(exp(neg(mul(x, x))), 1.12837916709551257390));
                  });
}

Tensor sign(const Tensor& a) { return no_grad_result(ops::unary(UnaryOp::sign, a)); }
Tensor floor(const Tensor& a) { return no_grad_result(ops::unary(UnaryOp::floor, a)); }
Tensor ceil(const Tensor& a) { return no_grad_result(ops::unary(UnaryOp::ceil, a)); }
Tensor round(const Tensor& a) { return no_grad_result(ops::unary(UnaryOp::round, a)); }

Tensor clamp(const Tensor& a, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  Tensor out = ops::clamp(a, lo, hi);
  if (needs_grad(a)) {
    SavedTensor va(a);
    record(
        "ClampBackward", {a}, {&out},
        [va, lo, hi](const BackwardCtx& c) -> variable_list {
          Tensor x = va.unpack("ClampBackward");
          Tensor pass = ones_like(x).to(DType::b8);
          if (lo) pass = logical_and(pass, ge(x, *lo));
          if (hi) pass = logical_and(pass, le(x, *hi));
          return {where(pass, c.grad(), zeros_like(c.grad()))};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor hardtanh(const Tensor& a, double min_val, double max_val) {
  ops::check_defined("hardtanh", a);
  // as PyTorch 1.13 ("Bool inputs not supported for hardtanh"), not clamp's message
  SL_CHECK_DTYPE(!is_bool(a.dtype()), "hardtanh: not supported for bool tensors");
  SL_CHECK(min_val <= max_val, "hardtanh: min_val (", min_val, ") must not exceed max_val (",
           max_val, ")");
  Tensor out;
  if (is_integral(a.dtype())) {
    // PyTorch 1.13 clamps an integer tensor into a result of its own dtype, so the bounds act
    // truncated toward zero (hardtanh(int64 [-2, 0, 3], -0.5, 2.5) = [0, 0, 2]: for an integer x,
    // trunc(clamp(x, lo, hi)) == clamp(x, trunc(lo), trunc(hi))); bounds beyond the dtype's range
    // are its limits.
    SL_CHECK(!std::isnan(min_val) && !std::isnan(max_val), "hardtanh: min_val (", min_val,
             ") and max_val (", max_val, ") must not be NaN for an integer input");
    const double lo_lim = a.dtype() == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
    const double hi_lim = a.dtype() == DType::i32 ? 2147483647.0 : 9223372036854775807.0;
    auto int_bound = [&](double v) {
      // clamped as doubles: 2^63 - 1 rounds to 2^63 there, so the top is taken from int64 itself
      double t = std::trunc(v);
      if (t <= lo_lim) return static_cast<int64_t>(lo_lim);
      if (t >= hi_lim) {
        return a.dtype() == DType::i32 ? int64_t{2147483647} : std::numeric_limits<int64_t>::max();
      }
      return static_cast<int64_t>(t);
    };
    out = ops::clamp(a, Scalar(int_bound(min_val)), Scalar(int_bound(max_val)));
  } else {
    out = ops::clamp(a, Scalar(min_val), Scalar(max_val));
  }
  if (needs_grad(a)) {
    // Unlike clamp's, the gradient is 0 AT the bounds, as PyTorch's hardtanh_backward (x <= min
    // or x >= max stops it); ReLU6-style activations depend on it. A NaN x is neither, so its
    // gradient passes, as in PyTorch.
    SavedTensor va(a);
    record(
        "HardtanhBackward", {a}, {&out},
        [va, min_val, max_val](const BackwardCtx& c) -> variable_list {
          Tensor x = va.unpack("HardtanhBackward");
          Tensor stop = logical_or(le(x, min_val), ge(x, max_val));
          return {where(stop, zeros_like(c.grad()), c.grad())};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor leaky_relu(const Tensor& a, double slope) {
  ops::check_defined("leaky_relu", a);
  // PyTorch 1.13 refuses bool ("leaky_relu_cpu" not implemented for 'Bool'); b * slope would
  // otherwise give a float32 result
  SL_CHECK_DTYPE(!is_bool(a.dtype()), "leaky_relu: not supported for bool tensors");
  // nor integers ("leaky_relu_cpu" not implemented for 'Long'); x * slope would promote
  SL_CHECK_DTYPE(!is_integral(a.dtype()), "leaky_relu: not implemented for ", dtype_name(a.dtype()),
                 " tensors (a floating-point input is needed)");
  Tensor pos = ops::binary(BinaryOp::gt, a, 0);
  Tensor out = ops::where(pos, a, ops::binary(BinaryOp::mul, a, slope));
  if (needs_grad(a)) {
    SavedTensor vp(pos);
    record(
        "LeakyReluBackward", {a}, {&out},
        [vp, slope](const BackwardCtx& c) -> variable_list {
          return {where(vp.unpack("LeakyReluBackward"), c.grad(), mul(c.grad(), slope))};
        },
        DoubleBackward::supported);
  }
  return out;
}

// ---- comparisons and logic (no gradient) ------------------------------------------------------

#define SL_COMPARE(fn, OP)                                                                   \
  Tensor fn(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::OP, a, b); } \
  Tensor fn(const Tensor& a, Scalar b) { return ops::binary(BinaryOp::OP, a, b); }
SL_COMPARE(eq, eq)
SL_COMPARE(ne, ne)
SL_COMPARE(lt, lt)
SL_COMPARE(le, le)
SL_COMPARE(gt, gt)
SL_COMPARE(ge, ge)
#undef SL_COMPARE

Tensor logical_not(const Tensor& a) { return ops::unary(UnaryOp::logical_not, a); }
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return ops::binary(BinaryOp::logical_and, a, b);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return ops::binary(BinaryOp::logical_or, a, b);
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  return ops::binary(BinaryOp::logical_xor, a, b);
}
Tensor isnan(const Tensor& a) { return ops::unary(UnaryOp::isnan, a); }
Tensor isinf(const Tensor& a) { return ops::unary(UnaryOp::isinf, a); }
Tensor isfinite(const Tensor& a) { return ops::unary(UnaryOp::isfinite, a); }

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  NoGradGuard ng;
  Tensor x = ops::cast(a, DType::f64), y = ops::cast(b, DType::f64);
  Tensor diff = ops::unary(UnaryOp::abs, ops::binary(BinaryOp::sub, x, y));
  Tensor tol = ops::binary(BinaryOp::add, ops::binary(BinaryOp::mul, ops::unary(UnaryOp::abs, y), rtol), atol);
  Tensor ok = ops::binary(BinaryOp::le, diff, tol);
  // equal infinities compare equal; NaN only when asked
  ok = ops::binary(BinaryOp::logical_or, ok, ops::binary(BinaryOp::eq, x, y));
  if (equal_nan) {
    Tensor both_nan = ops::binary(BinaryOp::logical_and, ops::unary(UnaryOp::isnan, x),
                                  ops::unary(UnaryOp::isnan, y));
    ok = ops::binary(BinaryOp::logical_or, ok, both_nan);
  }
  return ops::reduce(ReduceOp::all, ok, {}, false).item<bool>();
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  if (a.numel() == 0) return true;
  return ops::reduce(ReduceOp::all, ops::binary(BinaryOp::eq, a, b), {}, false).item<bool>();
}

// ---- selection -------------------------------------------------------------------------------

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Tensor out = ops::where(cond, a, b);
  if (needs_grad(a, b)) {
    Shape sa = a.sizes(), sb = b.sizes();
    SavedTensor vc(cond);
    record(
        "WhereBackward", {a, b}, {&out},
        [sa = std::move(sa), sb = std::move(sb), vc](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor m = vc.unpack("WhereBackward");
          Tensor zero = zeros_like(g);
          Tensor ga, gb;
          if (c.needs(0)) ga = sum_to(where(m, g, zero), sa);
          if (c.needs(1)) gb = sum_to(where(m, zero, g), sb);
          return {ga, gb};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  ops::check_defined("where", a);
  return where(cond, a, ops::scalar_tensor(b, ops::result_type(a, b), a.device(), "where"));
}

Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  ops::check_defined("where", b);
  return where(cond, ops::scalar_tensor(a, ops::result_type(b, a), b.device(), "where"), b);
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, Scalar value) {
  Tensor out = ops::masked_fill(a, mask, value);
  if (needs_grad(a)) {
    SavedTensor vm(mask);
    Shape sa = a.sizes();
    // out may be larger than a (mask with more dims): a's gradient sums back to its shape
    record(
        "MaskedFillBackward", {a}, {&out},
        [vm, sa](const BackwardCtx& c) -> variable_list {
          return {sum_to(masked_fill(c.grad(), vm.unpack("MaskedFillBackward"), 0), sa)};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor to_dtype(const Tensor& a, DType dtype, bool copy) {
  Tensor out = ops::cast(a, dtype, copy);
  if (out.is_same(a)) return out;
  if (needs_grad(a) && is_floating(dtype)) {
    DType src = a.dtype();
    record(
        "ToCopyBackward", {a}, {&out},
        [src](const BackwardCtx& c) -> variable_list { return {to_dtype(c.grad(), src, false)}; },
        DoubleBackward::supported);
  }
  return out;
}

Tensor to_device(const Tensor& a, Device device, bool copy) {
  Tensor out = ops::to_device(a, device, copy);
  if (out.is_same(a)) return out;
  if (needs_grad(a)) {
    Device src = a.device();
    record(
        "ToCopyBackward", {a}, {&out},
        [src](const BackwardCtx& c) -> variable_list { return {to_device(c.grad(), src, false)}; },
        DoubleBackward::supported);
  }
  return out;
}

namespace detail {

Tensor gelu_derivative(const Tensor& x, bool tanh_form) {
  if (!tanh_form) {
    Tensor cdf = mul(add(erf(mul(x, 0.70710678118654752440)), 1), 0.5);
    Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), 0.39894228040143267794);
    return add(cdf, mul(x, pdf));
  }
  const double k = 0.79788456080286535588, c = 0.044715;
  Tensor x2 = mul(x, x);
  Tensor th = tanh(mul(mul(x, add(mul(x2, c), 1)), k));
  Tensor du = mul(add(mul(x2, 3 * c), 1), k);
  return add(mul(add(th, 1), 0.5), mul(mul(mul(x, rsub(mul(th, th), 1)), du), 0.5));
}


}  // namespace detail

}  // namespace sl
