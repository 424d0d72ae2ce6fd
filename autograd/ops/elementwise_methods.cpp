// Tensor methods and operators of the elementwise family (declared in core/tensor.h), including
// the in-place forms with their autograd bookkeeping.
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/random.h"

namespace sl {

Tensor Tensor::to(DType dt, bool copy) const { return to_dtype(*this, dt, copy); }
Tensor Tensor::to(Device dev, bool copy) const { return to_device(*this, dev, copy); }
Tensor Tensor::to(Device dev, DType dt, bool copy) const {
  Tensor r = to_device(*this, dev, copy);
  return to_dtype(r, dt, copy && r.is_same(*this));
}

Tensor Tensor::add(const Tensor& o, Scalar alpha) const { return sl::add(*this, o, alpha); }
Tensor Tensor::add(Scalar o) const { return sl::add(*this, o); }
Tensor Tensor::sub(const Tensor& o, Scalar alpha) const { return sl::sub(*this, o, alpha); }
Tensor Tensor::sub(Scalar o) const { return sl::sub(*this, o); }
Tensor Tensor::mul(const Tensor& o) const { return sl::mul(*this, o); }
Tensor Tensor::mul(Scalar o) const { return sl::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return sl::div(*this, o); }
Tensor Tensor::div(Scalar o) const { return sl::div(*this, o); }
Tensor Tensor::pow(const Tensor& e) const { return sl::pow(*this, e); }
Tensor Tensor::pow(Scalar e) const { return sl::pow(*this, e); }
Tensor Tensor::neg() const { return sl::neg(*this); }
Tensor Tensor::abs() const { return sl::abs(*this); }
Tensor Tensor::exp() const { return sl::exp(*this); }
Tensor Tensor::log() const { return sl::log(*this); }
Tensor Tensor::log1p() const { return sl::log1p(*this); }
Tensor Tensor::sqrt() const { return sl::sqrt(*this); }
Tensor Tensor::rsqrt() const { return sl::rsqrt(*this); }
Tensor Tensor::square() const { return sl::square(*this); }
Tensor Tensor::reciprocal() const { return sl::reciprocal(*this); }
Tensor Tensor::tanh() const { return sl::tanh(*this); }
Tensor Tensor::sigmoid() const { return sl::sigmoid(*this); }
Tensor Tensor::relu() const { return sl::relu(*this); }
Tensor Tensor::gelu(const std::string& approximate) const { return sl::gelu(*this, approximate); }
Tensor Tensor::silu() const { return sl::silu(*this); }
Tensor Tensor::sin() const { return sl::sin(*this); }
Tensor Tensor::cos() const { return sl::cos(*this); }
Tensor Tensor::sign() const { return sl::sign(*this); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const {
  return sl::clamp(*this, lo, hi);
}
Tensor Tensor::maximum(const Tensor& o) const { return sl::maximum(*this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return sl::minimum(*this, o); }
Tensor Tensor::eq(const Tensor& o) const { return sl::eq(*this, o); }
Tensor Tensor::eq(Scalar o) const { return sl::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return sl::ne(*this, o); }
Tensor Tensor::ne(Scalar o) const { return sl::ne(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return sl::lt(*this, o); }
Tensor Tensor::lt(Scalar o) const { return sl::lt(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return sl::le(*this, o); }
Tensor Tensor::le(Scalar o) const { return sl::le(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return sl::gt(*this, o); }
Tensor Tensor::gt(Scalar o) const { return sl::gt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return sl::ge(*this, o); }
Tensor Tensor::ge(Scalar o) const { return sl::ge(*this, o); }
Tensor Tensor::logical_not() const { return sl::logical_not(*this); }
Tensor Tensor::logical_and(const Tensor& o) const { return sl::logical_and(*this, o); }
Tensor Tensor::logical_or(const Tensor& o) const { return sl::logical_or(*this, o); }
Tensor Tensor::logical_xor(const Tensor& o) const { return sl::logical_xor(*this, o); }
Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const {
  return sl::masked_fill(*this, mask, value);
}
Tensor Tensor::isnan() const { return sl::isnan(*this); }
Tensor Tensor::isinf() const { return sl::isinf(*this); }
Tensor Tensor::isfinite() const { return sl::isfinite(*this); }

// ---- in-place ----------------------------------------------------------------------------------
// Note [In-place double backward]: an in-place op whose formula is made of differentiable ops and
// reads no saved value (add_, sub_, mul_ / div_ by a scalar, neg_, masked_fill_) is recorded as
// supporting double backward (Note [Double backward] in autograd/engine.cpp). The others save a
// copy of self from before the write, or self after it, with no history to attach a second
// derivative to, and refuse; so does any in-place op on a view (its CopySlices node).

namespace {
/// record_inplace of a formula made of differentiable ops that reads no saved value.
template <class F>
void record_inplace_twice_differentiable(const char* name, Tensor& self,
                                         std::initializer_list<Tensor> others, F&& fn) {
  detail::attach_node_inplace(
      detail::make_lambda_node(name, std::forward<F>(fn), DoubleBackward::supported), self, others);
}
}  // namespace

Tensor& Tensor::add_(const Tensor& o, Scalar alpha) {
  check_inplace(*this, "add_", {o});
  bool rec = needs_grad(*this, o);
  Shape so = o.defined() ? o.sizes() : Shape{};
  ops::binary_(BinaryOp::add, *this, o, alpha);
  if (rec) {
    record_inplace_twice_differentiable(
        "AddBackward", *this, {o}, [so, alpha](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor go;
          if (c.needs(1)) go = sum_to(alpha.to_double() == 1.0 ? g : sl::mul(g, alpha), so);
          return {g, go};
        });
  }
  return *this;
}

Tensor& Tensor::add_(Scalar o) {
  check_inplace(*this, "add_");
  ops::binary_(BinaryOp::add, *this, o);
  // d(self + c)/dself = 1: the existing history stays valid, nothing to record
  return *this;
}

Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) {
  ops::check_defined("sub_", o, "second operand");
  SL_CHECK_DTYPE(!(is_bool(dtype()) && is_bool(o.dtype())),
                 "sub_: subtraction of bool tensors is not supported; use logical_xor");
  check_inplace(*this, "sub_", {o});
  bool rec = needs_grad(*this, o);
  Shape so = o.sizes();
  ops::binary_(BinaryOp::sub, *this, o, alpha);
  if (rec) {
    record_inplace_twice_differentiable("SubBackward", *this, {o},
                                        [so, alpha](const BackwardCtx& c) -> variable_list {
                                          const Tensor& g = c.grad();
                                          Tensor go;
                                          if (c.needs(1))
                                            go = sum_to(sl::mul(g, Scalar(-alpha.to_double())), so);
                                          return {g, go};
                                        });
  }
  return *this;
}
Tensor& Tensor::sub_(Scalar o) {
  return add_(o.is_floating() ? Scalar(-o.to_double()) : Scalar(-o.to_int()));
}

Tensor& Tensor::mul_(const Tensor& o) {
  check_inplace(*this, "mul_", {o});
  bool rec = needs_grad(*this, o);
  SavedTensor self_before = rec && o.requires_grad() ? SavedTensor(ops::contiguous(*this, true))
                                                     : SavedTensor();
  SavedTensor other = rec ? SavedTensor(o) : SavedTensor();
  Shape so = o.defined() ? o.sizes() : Shape{};
  ops::binary_(BinaryOp::mul, *this, o);
  if (rec) {
    record_inplace("MulBackward", *this, {o},
                   [self_before, other, so](const BackwardCtx& c) -> variable_list {
                     const Tensor& g = c.grad();
                     Tensor gs, go;
                     if (c.needs(0)) gs = sl::mul(g, other.unpack("MulBackward"));
                     if (c.needs(1)) go = sum_to(sl::mul(g, self_before.unpack("MulBackward")), so);
                     return {gs, go};
                   });
  }
  return *this;
}

Tensor& Tensor::mul_(Scalar o) {
  check_inplace(*this, "mul_");
  bool rec = needs_grad(*this);
  ops::binary_(BinaryOp::mul, *this, o);
  if (rec) {
    record_inplace_twice_differentiable(
        "MulBackward", *this, {},
        [o](const BackwardCtx& c) -> variable_list { return {sl::mul(c.grad(), o)}; });
  }
  return *this;
}

Tensor& Tensor::div_(const Tensor& o) {
  check_inplace(*this, "div_", {o});
  bool rec = needs_grad(*this, o);
  SavedTensor other = rec ? SavedTensor(o) : SavedTensor();
  Shape so = o.defined() ? o.sizes() : Shape{};
  ops::binary_(BinaryOp::div, *this, o);
  SavedTensor result = rec && o.requires_grad() ? SavedTensor(ops::contiguous(*this, true))
                                                : SavedTensor();
  if (rec) {
    record_inplace("DivBackward", *this, {o},
                   [other, result, so](const BackwardCtx& c) -> variable_list {
                     const Tensor& g = c.grad();
                     Tensor b = other.unpack("DivBackward");
                     Tensor gs, go;
                     if (c.needs(0)) gs = sl::div(g, b);
                     if (c.needs(1)) {
                       go = sum_to(sl::neg(sl::div(sl::mul(g, result.unpack("DivBackward")), b)), so);
                     }
                     return {gs, go};
                   });
  }
  return *this;
}

// A true division (the kernel of x / s), not a multiplication by 1/s: that is not correctly
// rounded (1 ulp off for about a third of float32 values divided by 3) and overflows for a
// divisor below 1/DBL_MAX.
Tensor& Tensor::div_(Scalar o) {
  check_inplace(*this, "div_");
  bool rec = needs_grad(*this);
  ops::binary_(BinaryOp::div, *this, o);
  if (rec) {
    record_inplace_twice_differentiable(
        "DivBackward", *this, {},
        [o](const BackwardCtx& c) -> variable_list { return {sl::div(c.grad(), o)}; });
  }
  return *this;
}

Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  check_inplace(*this, "clamp_");
  bool rec = needs_grad(*this);
  SavedTensor before = rec ? SavedTensor(ops::contiguous(*this, true)) : SavedTensor();
  ops::clamp_(*this, lo, hi);
  if (rec) {
    record_inplace("ClampBackward", *this, {}, [before, lo, hi](const BackwardCtx& c) -> variable_list {
      Tensor x = before.unpack("ClampBackward");
      Tensor pass = ones_like(x).to(DType::b8);
      if (lo) pass = sl::logical_and(pass, sl::ge(x, *lo));
      if (hi) pass = sl::logical_and(pass, sl::le(x, *hi));
      return {sl::where(pass, c.grad(), zeros_like(c.grad()))};
    });
  }
  return *this;
}

Tensor& Tensor::relu_() {
  check_inplace(*this, "relu_");
  bool rec = needs_grad(*this);
  ops::unary_(UnaryOp::relu, *this);
  if (rec) {
    SavedTensor y(*this);  // saved after the write: its version is current
    record_inplace("ReluBackward", *this, {}, [y](const BackwardCtx& c) -> variable_list {
      return {ops::binary(BinaryOp::relu_backward, c.grad(), y.unpack("ReluBackward"))};
    });
  }
  return *this;
}

Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) {
  check_inplace(*this, "masked_fill_");
  bool rec = needs_grad(*this);
  ops::masked_fill_(*this, mask, value);
  if (rec) {
    SavedTensor m(mask);
    record_inplace_twice_differentiable(
        "MaskedFillBackward", *this, {}, [m](const BackwardCtx& c) -> variable_list {
          const Tensor mask = m.unpack("MaskedFillBackward");
          return {GradMode::is_enabled() ? c.grad().masked_fill(mask, 0)
                                         : ops::masked_fill(c.grad(), mask, 0)};
        });
  }
  return *this;
}

namespace {

/// self = op(self), recorded with the gradient grad_fn(g, x, y) of the out-of-place op: x is a
/// copy of self before the write (made only when save_x), y is self after it (saved only when
/// save_y; a later in-place write to self is then caught by the version check).
template <class F>
Tensor& unary_inplace(Tensor& self, UnaryOp op, const char* name, const char* node, bool save_x,
                      bool save_y, F grad_fn) {
  check_inplace(self, name);
  bool rec = needs_grad(self);
  SavedTensor sx = rec && save_x ? SavedTensor(ops::contiguous(self, true)) : SavedTensor();
  ops::unary_(op, self);
  if (rec) {
    SavedTensor sy = save_y ? SavedTensor(self) : SavedTensor();
    auto fn = [sx, sy, node, grad_fn](const BackwardCtx& c) -> variable_list {
      return {grad_fn(c.grad(), sx.unpack(node), sy.unpack(node))};
    };
    if (save_x || save_y) {
      record_inplace(node, self, {}, std::move(fn));
    } else {
      record_inplace_twice_differentiable(node, self, {}, std::move(fn));  // neg_
    }
  }
  return self;
}

/// A piecewise-constant map (floor, ceil, round, sign): its gradient is zero, so self's history
/// gets none from now on.
Tensor& step_inplace(Tensor& self, UnaryOp op, const char* name, const char* node) {
  check_inplace(self, name);
  bool rec = needs_grad(self);
  ops::unary_(op, self);
  if (rec) {
    record_inplace(node, self, {}, [](const BackwardCtx&) -> variable_list { return {Tensor()}; });
  }
  return self;
}

using G = const Tensor&;

}  // namespace

Tensor& Tensor::neg_() {
  return unary_inplace(*this, UnaryOp::neg, "neg_", "NegBackward", false, false,
                       [](G g, G, G) { return sl::neg(g); });
}
Tensor& Tensor::abs_() {
  return unary_inplace(*this, UnaryOp::abs, "abs_", "AbsBackward", true, false,
                       [](G g, G x, G) { return sl::mul(g, sl::sign(x)); });
}
Tensor& Tensor::exp_() {
  return unary_inplace(*this, UnaryOp::exp, "exp_", "ExpBackward", false, true,
                       [](G g, G, G y) { return sl::mul(g, y); });
}
Tensor& Tensor::log_() {
  return unary_inplace(*this, UnaryOp::log, "log_", "LogBackward", true, false,
                       [](G g, G x, G) { return sl::div(g, x); });
}
Tensor& Tensor::log1p_() {
  return unary_inplace(*this, UnaryOp::log1p, "log1p_", "Log1pBackward", true, false,
                       [](G g, G x, G) { return sl::div(g, sl::add(x, 1)); });
}
Tensor& Tensor::expm1_() {
  return unary_inplace(*this, UnaryOp::expm1, "expm1_", "Expm1Backward", false, true,
                       [](G g, G, G y) { return sl::mul(g, sl::add(y, 1)); });
}
Tensor& Tensor::sqrt_() {
  return unary_inplace(*this, UnaryOp::sqrt, "sqrt_", "SqrtBackward", false, true,
                       [](G g, G, G y) { return sl::div(g, sl::mul(y, 2)); });
}
Tensor& Tensor::rsqrt_() {
  return unary_inplace(*this, UnaryOp::rsqrt, "rsqrt_", "RsqrtBackward", false, true,
                       [](G g, G, G y) { return sl::mul(g, sl::mul(sl::pow(y, 3), -0.5)); });
}
Tensor& Tensor::square_() {
  return unary_inplace(*this, UnaryOp::square, "square_", "SquareBackward", true, false,
                       [](G g, G x, G) { return sl::mul(g, sl::mul(x, 2)); });
}
Tensor& Tensor::reciprocal_() {
  return unary_inplace(*this, UnaryOp::reciprocal, "reciprocal_", "ReciprocalBackward", false,
                       true, [](G g, G, G y) { return sl::neg(sl::mul(g, sl::mul(y, y))); });
}
Tensor& Tensor::tanh_() {
  return unary_inplace(*this, UnaryOp::tanh, "tanh_", "TanhBackward", false, true,
                       [](G g, G, G y) { return ops::binary(BinaryOp::tanh_backward, g, y); });
}
Tensor& Tensor::sigmoid_() {
  return unary_inplace(*this, UnaryOp::sigmoid, "sigmoid_", "SigmoidBackward", false, true,
                       [](G g, G, G y) { return ops::binary(BinaryOp::sigmoid_backward, g, y); });
}
Tensor& Tensor::sin_() {
  return unary_inplace(*this, UnaryOp::sin, "sin_", "SinBackward", true, false,
                       [](G g, G x, G) { return sl::mul(g, sl::cos(x)); });
}
Tensor& Tensor::cos_() {
  return unary_inplace(*this, UnaryOp::cos, "cos_", "CosBackward", true, false,
                       [](G g, G x, G) { return sl::neg(sl::mul(g, sl::sin(x))); });
}
Tensor& Tensor::floor_() { return step_inplace(*this, UnaryOp::floor, "floor_", "FloorBackward"); }
Tensor& Tensor::ceil_() { return step_inplace(*this, UnaryOp::ceil, "ceil_", "CeilBackward"); }
Tensor& Tensor::round_() { return step_inplace(*this, UnaryOp::round, "round_", "RoundBackward"); }
Tensor& Tensor::sign_() { return step_inplace(*this, UnaryOp::sign, "sign_", "SignBackward"); }

Tensor& Tensor::pow_(Scalar e) {
  check_inplace(*this, "pow_");
  bool rec = needs_grad(*this);
  SavedTensor sx = rec ? SavedTensor(ops::contiguous(*this, true)) : SavedTensor();
  ops::binary_(BinaryOp::pow, *this, e);
  if (rec) {
    record_inplace("PowBackward", *this, {}, [sx, e](const BackwardCtx& c) -> variable_list {
      double ev = e.to_double();
      if (ev == 0.0) return {zeros_like(c.grad())};
      Tensor x = sx.unpack("PowBackward");
      return {sl::mul(c.grad(), sl::mul(sl::pow(x, Scalar(ev - 1.0)), Scalar(ev)))};
    });
  }
  return *this;
}

Tensor& Tensor::pow_(const Tensor& e) {
  check_inplace(*this, "pow_", {e});
  bool rec = needs_grad(*this, e);
  SavedTensor sx = rec ? SavedTensor(ops::contiguous(*this, true)) : SavedTensor();
  SavedTensor se = rec ? SavedTensor(e) : SavedTensor();
  Shape so = e.defined() ? e.sizes() : Shape{};
  ops::binary_(BinaryOp::pow, *this, e);
  if (rec) {
    SavedTensor sy = e.requires_grad() ? SavedTensor(*this) : SavedTensor();
    record_inplace(
        "PowBackward", *this, {e}, [sx, se, sy, so](const BackwardCtx& c) -> variable_list {
          // as pow(a, b) out of place: zero where the exponent is 0 (self) or where the base is
          // 0 with a non-negative exponent (e)
          const Tensor& g = c.grad();
          Tensor x = sx.unpack("PowBackward"), ex = se.unpack("PowBackward");
          Tensor gs, ge;
          if (c.needs(0)) {
            Tensor d = sl::mul(ex, sl::pow(x, sl::sub(ex, 1)));
            gs = sl::mul(g, sl::masked_fill(d, sl::eq(ex, 0), 0));
          }
          if (c.needs(1)) {
            Tensor d = sl::mul(sy.unpack("PowBackward"), sl::log(x));
            Tensor zero_mask = sl::logical_and(sl::eq(x, 0), sl::ge(ex, 0));
            ge = sum_to(sl::mul(g, sl::masked_fill(d, zero_mask, 0)), so);
          }
          return {gs, ge};
        });
  }
  return *this;
}

namespace {
/// After an in-place write that replaces every value of self (fill, random): when self is part
/// of a recorded graph, its previous history gets no gradient from now on.
void record_overwrite(const char* name, Tensor& self, bool rec) {
  if (!rec) return;
  record_inplace(name, self, {}, [](const BackwardCtx&) -> variable_list { return {Tensor()}; });
}
}  // namespace

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace(*this, "copy_", {src});
  bool rec = needs_grad(*this, src);
  ops::copy_(*this, src);
  if (rec) {
    // self's old values are gone: its history gets no gradient; src gets g (summed over the
    // dims it was broadcast along) in its own dtype and on its own device
    Shape ss = src.sizes();
    DType sd = src.dtype();
    Device sdev = src.device();
    record_inplace("CopyBackward", *this, {src},
                   [ss, sd, sdev](const BackwardCtx& c) -> variable_list {
                     Tensor gs;
                     if (c.needs(1)) {
                       gs = ops::to_device(ops::cast(sum_to(c.grad(), ss), sd), sdev);
                     }
                     return {Tensor(), gs};
                   });
  }
  return *this;
}

Tensor& Tensor::fill_(Scalar value) {
  check_inplace(*this, "fill_");
  bool rec = needs_grad(*this);
  ops::fill_(*this, value);
  record_overwrite("FillBackward", *this, rec);
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0); }

Tensor& Tensor::uniform_(double from, double to, Generator* gen) {
  SL_CHECK(from <= to, "uniform_: expected from <= to, got ", from, " > ", to);
  SL_CHECK_DTYPE(is_floating(dtype()), "uniform_: expected a floating tensor, got ",
                 dtype_name(dtype()));
  check_inplace(*this, "uniform_");
  bool rec = needs_grad(*this);
  ops::random_fill_(*this, RandomDist::uniform, from, to, gen);
  record_overwrite("UniformBackward", *this, rec);
  return *this;
}

Tensor& Tensor::normal_(double mean, double std, Generator* gen) {
  SL_CHECK(std >= 0, "normal_: expected std >= 0, got ", std);
  SL_CHECK_DTYPE(is_floating(dtype()), "normal_: expected a floating tensor, got ",
                 dtype_name(dtype()));
  check_inplace(*this, "normal_");
  bool rec = needs_grad(*this);
  ops::random_fill_(*this, RandomDist::normal, mean, std, gen);
  record_overwrite("NormalBackward", *this, rec);
  return *this;
}

Tensor& Tensor::bernoulli_(double p, Generator* gen) {
  SL_CHECK(p >= 0 && p <= 1, "bernoulli_: expected 0 <= p <= 1, got ", p);
  check_inplace(*this, "bernoulli_");
  bool rec = needs_grad(*this);
  ops::random_fill_(*this, RandomDist::bernoulli, p, 0, gen);
  record_overwrite("BernoulliBackward", *this, rec);
  return *this;
}

// ---- operators -------------------------------------------------------------------------------

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
Tensor operator-(Scalar a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
Tensor operator/(Scalar a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator+=(Tensor& a, Scalar b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, Scalar b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, Scalar b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, Scalar b) { return a.div_(b); }

}  // namespace sl
