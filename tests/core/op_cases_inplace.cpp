// Op cases of the in-place forms (add_ ... pow_, the unary maps, clamp_, relu_, masked_fill_,
// copy_, fill_, zero_). Each case writes into a NON-CONTIGUOUS copy of input 0 made in a fresh
// buffer (so the input itself stays untouched, as the table runner checks), checks that the
// method returned self without moving it, and compares self with the float64 reference of the
// out-of-place map. The gradcheck of the table then differentiates through the in-place write
// (the copy is a recorded non-leaf, the way in-place ops are used under autograd).
#include <cmath>
#include <stdexcept>

#include "core/op_cases.h"

namespace sl::testing {

namespace {

using InplaceFn = std::function<Tensor&(Tensor&, const TensorList&)>;
using RefFn1 = std::function<double(double)>;
using RefFn2 = std::function<double(double, double)>;

/// A copy of x on x's device in a fresh buffer that is not contiguous: the last two dims are
/// swapped in memory, or (1-d) every other element of a twice-longer buffer. 0-d stays 0-d.
/// The copy is recorded (copy_), so gradients reach x; it is a view of the buffer, so the op
/// under test is recorded on a view too (CopySlices, Note [In-place on views]).
Tensor noncontiguous_copy(const Tensor& x) {
  TensorOptions opts{.dtype = x.dtype(), .device = x.device()};
  Tensor buf;
  if (x.dim() >= 2) {
    Shape mem = x.sizes();
    std::swap(mem[mem.size() - 1], mem[mem.size() - 2]);
    buf = empty(mem, opts).transpose(-1, -2);
  } else if (x.dim() == 1) {
    buf = empty({2 * x.size(0)}, opts).slice(0, 0, INT64_MAX, 2);
  } else {
    buf = empty({}, opts);
  }
  buf.copy_(x);
  return buf;
}

/// A case calling `f` on a non-contiguous copy of input 0 (the other inputs as given).
OpCase inplace_case(const std::string& op, const std::string& what, std::vector<InputSpec> inputs,
                    std::vector<DType> dtypes, InplaceFn f,
                    std::function<std::vector<Ref>(const std::vector<Ref>&)> ref, bool grad) {
  auto run = [op, f](const TensorList& x) -> TensorList {
    Tensor self = noncontiguous_copy(x[0]);
    TensorImpl* before = self.impl();
    if (x[0].dim() >= 1 && x[0].numel() > 1 && self.is_contiguous()) {
      throw std::logic_error(op + ": the test's self copy is contiguous");
    }
    Tensor& r = f(self, x);
    if (&r != &self || self.impl() != before) {
      throw std::logic_error(op + ": did not return self");
    }
    return {self};
  };
  return {op, op + " " + what, std::move(inputs), std::move(dtypes), run, std::move(ref), grad};
}

std::function<std::vector<Ref>(const std::vector<Ref>&)> ref1(RefFn1 r) {
  return [r](const std::vector<Ref>& x) { return std::vector<Ref>{map1(x[0], r)}; };
}
/// Input 1 broadcast into input 0's shape; the result keeps input 0's shape.
std::function<std::vector<Ref>(const std::vector<Ref>&)> ref2(RefFn2 r) {
  return [r](const std::vector<Ref>& x) { return std::vector<Ref>{map2(x[0], x[1], r)}; };
}

/// Two cases per unary in-place op: a [3,4] self and a 0-d self.
void add_unary_(std::vector<OpCase>& v, const std::string& op, Tensor& (Tensor::*m)(), RefFn1 r,
                Domain dom, std::vector<DType> dtypes, bool grad) {
  InplaceFn f = [m](Tensor& s, const TensorList&) -> Tensor& { return (s.*m)(); };
  v.push_back(inplace_case(op, "[3,4]", {in({3, 4}, dom)}, dtypes, f, ref1(r), grad));
  v.push_back(inplace_case(op, "0-d", {in({}, dom)}, dtypes, f, ref1(r), grad));
}

double sigmoid_ref(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double sign_ref(double x) {
  return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
}

}  // namespace

std::vector<OpCase> inplace_cases() {
  std::vector<OpCase> v;
  const auto F = kFloatDTypes;
  const auto N = kNumericDTypes;
  // ---- unary ---------------------------------------------------------------------------------
  add_unary_(
      v, "neg_", &Tensor::neg_, [](double x) { return -x; }, Domain::any, N, true);
  add_unary_(
      v, "abs_", &Tensor::abs_, [](double x) { return std::fabs(x); }, Domain::any, N, true);
  add_unary_(
      v, "exp_", &Tensor::exp_, [](double x) { return std::exp(x); }, Domain::any, F, true);
  add_unary_(
      v, "log_", &Tensor::log_, [](double x) { return std::log(x); }, Domain::positive, F, true);
  add_unary_(
      v, "log1p_", &Tensor::log1p_, [](double x) { return std::log1p(x); }, Domain::positive, F,
      true);
  add_unary_(
      v, "expm1_", &Tensor::expm1_, [](double x) { return std::expm1(x); }, Domain::any, F, true);
  add_unary_(
      v, "sqrt_", &Tensor::sqrt_, [](double x) { return std::sqrt(x); }, Domain::positive, F, true);
  add_unary_(
      v, "rsqrt_", &Tensor::rsqrt_, [](double x) { return 1.0 / std::sqrt(x); }, Domain::positive,
      F, true);
  add_unary_(
      v, "square_", &Tensor::square_, [](double x) { return x * x; }, Domain::any, N, true);
  add_unary_(
      v, "reciprocal_", &Tensor::reciprocal_, [](double x) { return 1.0 / x; }, Domain::positive, F,
      true);
  add_unary_(
      v, "tanh_", &Tensor::tanh_, [](double x) { return std::tanh(x); }, Domain::any, F, true);
  add_unary_(v, "sigmoid_", &Tensor::sigmoid_, sigmoid_ref, Domain::any, F, true);
  add_unary_(
      v, "sin_", &Tensor::sin_, [](double x) { return std::sin(x); }, Domain::any, F, true);
  add_unary_(
      v, "cos_", &Tensor::cos_, [](double x) { return std::cos(x); }, Domain::any, F, true);
  // piecewise constant: forward only (their gradient is zero almost everywhere)
  add_unary_(
      v, "floor_", &Tensor::floor_, [](double x) { return std::floor(x); }, Domain::any, N, false);
  add_unary_(
      v, "ceil_", &Tensor::ceil_, [](double x) { return std::ceil(x); }, Domain::any, N, false);
  // round half to even, as PyTorch (the grid domain has exact halves)
  add_unary_(
      v, "round_", &Tensor::round_, [](double x) { return std::nearbyint(x); }, Domain::grid, N,
      false);
  add_unary_(v, "sign_", &Tensor::sign_, sign_ref, Domain::grid, N, false);
  add_unary_(
      v, "relu_", &Tensor::relu_, [](double x) { return x > 0 ? x : 0.0; }, Domain::any, N, true);

  // ---- binary: other broadcast into self ----------------------------------------------------
  auto add_binary_ = [&](const std::string& op, InplaceFn f, RefFn2 r, Domain da, Domain db,
                         std::vector<DType> dtypes) {
    v.push_back(inplace_case(op, "[2,3,4] with [3,1] strided",
                             {in({2, 3, 4}, da), in({3, 1}, db, Layout::strided)}, dtypes, f,
                             ref2(r), true));
    v.push_back(
        inplace_case(op, "[3,4] with 0-d", {in({3, 4}, da), in({}, db)}, dtypes, f, ref2(r), true));
    v.push_back(inplace_case(op, "[3,4] with [3,4] transposed",
                             {in({3, 4}, da), in({3, 4}, db, Layout::transposed)}, dtypes, f,
                             ref2(r), true));
  };
  add_binary_(
      "add_", [](Tensor& s, const TensorList& x) -> Tensor& { return s.add_(x[1]); },
      [](double a, double b) { return a + b; }, Domain::any, Domain::any, N);
  add_binary_(
      "add_", [](Tensor& s, const TensorList& x) -> Tensor& { return s.add_(x[1], 2); },
      [](double a, double b) { return a + 2 * b; }, Domain::any, Domain::any, N);
  for (size_t i = v.size() - 3; i < v.size(); ++i) v[i].name += " alpha=2";
  add_binary_(
      "sub_", [](Tensor& s, const TensorList& x) -> Tensor& { return s.sub_(x[1]); },
      [](double a, double b) { return a - b; }, Domain::any, Domain::any, N);
  add_binary_(
      "mul_", [](Tensor& s, const TensorList& x) -> Tensor& { return s.mul_(x[1]); },
      [](double a, double b) { return a * b; }, Domain::any, Domain::any, N);
  add_binary_(
      "div_", [](Tensor& s, const TensorList& x) -> Tensor& { return s.div_(x[1]); },
      [](double a, double b) { return a / b; }, Domain::any, Domain::positive, F);
  add_binary_(
      "pow_", [](Tensor& s, const TensorList& x) -> Tensor& { return s.pow_(x[1]); },
      [](double a, double b) { return std::pow(a, b); }, Domain::positive, Domain::any, F);
  // integer pow_ stays integral (non-negative exponents)
  v.push_back(inplace_case(
      "pow_", "int [2,3] ^ [3]", {in({2, 3}), in({3}, Domain::positive)}, {DType::i64, DType::i32},
      [](Tensor& s, const TensorList& x) -> Tensor& { return s.pow_(x[1]); },
      ref2([](double a, double b) { return std::pow(a, b); }), false));
  // a float64 operand written into a lower-precision self keeps self's dtype (PyTorch's in-place
  // type rule). The kernel rounds the operand to self's dtype before adding (see binary_ in
  // core/ops/elementwise.cpp): one rounding more than PyTorch, inside the default tolerance.
  InputSpec other64 = in({4});
  other64.dtype = DType::f64;
  v.push_back(inplace_case(
      "add_", "[3,4] self with a float64 [4]", {in({3, 4}), other64},
      {DType::f32, DType::f16, DType::bf16},
      [](Tensor& s, const TensorList& x) -> Tensor& { return s.add_(x[1]); },
      ref2([](double a, double b) { return a + b; }), true));
  // an integer operand into a float self
  InputSpec other_int = in({3, 1});
  other_int.dtype = DType::i64;
  other_int.differentiable = false;
  v.push_back(inplace_case(
      "mul_", "[3,4] float self with an int64 [3,1]", {in({3, 4}), other_int}, F,
      [](Tensor& s, const TensorList& x) -> Tensor& { return s.mul_(x[1]); },
      ref2([](double a, double b) { return a * b; }), true));

  // ---- scalar forms ----------------------------------------------------------------------------
  auto scalar_case = [&](const std::string& op, const std::string& what, Domain d,
                         std::vector<DType> dtypes, InplaceFn f, RefFn1 r) {
    v.push_back(inplace_case(op, what, {in({3, 4}, d)}, dtypes, f, ref1(r), true));
  };
  scalar_case(
      "add_", "scalar 1.5", Domain::any, F,
      [](Tensor& s, const TensorList&) -> Tensor& { return s.add_(1.5); },
      [](double a) { return a + 1.5; });
  scalar_case(
      "sub_", "scalar 3 (int)", Domain::any, N,
      [](Tensor& s, const TensorList&) -> Tensor& { return s.sub_(3); },
      [](double a) { return a - 3; });
  scalar_case(
      "mul_", "scalar -2 (int)", Domain::any, N,
      [](Tensor& s, const TensorList&) -> Tensor& { return s.mul_(-2); },
      [](double a) { return -2 * a; });
  scalar_case(
      "div_", "scalar 4", Domain::any, F,
      [](Tensor& s, const TensorList&) -> Tensor& { return s.div_(4); },
      [](double a) { return a / 4; });
  scalar_case(
      "pow_", "scalar 3", Domain::any, F,
      [](Tensor& s, const TensorList&) -> Tensor& { return s.pow_(3); },
      [](double a) { return a * a * a; });
  scalar_case(
      "pow_", "scalar 0.5", Domain::positive, F,
      [](Tensor& s, const TensorList&) -> Tensor& { return s.pow_(0.5); },
      [](double a) { return std::sqrt(a); });
  scalar_case(
      "clamp_", "[-0.5, 0.7]", Domain::any, F,
      [](Tensor& s, const TensorList&) -> Tensor& { return s.clamp_(-0.5, 0.7); },
      [](double a) { return std::min(std::max(a, -0.5), 0.7); });
  scalar_case(
      "clamp_", "min only (int)", Domain::any, N,
      [](Tensor& s, const TensorList&) -> Tensor& { return s.clamp_(-1); },
      [](double a) { return std::max(a, -1.0); });
  scalar_case(
      "clamp_", "max only", Domain::any, N,
      [](Tensor& s, const TensorList&) -> Tensor& { return s.clamp_(std::nullopt, 1); },
      [](double a) { return std::min(a, 1.0); });

  // ---- masked_fill_, copy_, fill_, zero_ ---------------------------------------------------
  v.push_back(inplace_case(
      "masked_fill_", "[2,3,4] mask [3,1]", {in({2, 3, 4}), bool_in({3, 1})}, kAllDTypes,
      [](Tensor& s, const TensorList& x) -> Tensor& { return s.masked_fill_(x[1], 1); },
      [](const std::vector<Ref>& x) {
        return std::vector<Ref>{map2(x[0], x[1], [](double a, double m) { return m ? 1.0 : a; })};
      },
      true));
  v.push_back(inplace_case(
      "copy_", "[3,4] from a broadcast [4]", {in({3, 4}), in({4}, Domain::any, Layout::strided)},
      kAllDTypes, [](Tensor& s, const TensorList& x) -> Tensor& { return s.copy_(x[1]); },
      ref2([](double, double b) { return b; }), true));
  InputSpec src64 = in({3, 4}, Domain::any, Layout::transposed);
  src64.dtype = DType::f64;
  v.push_back(inplace_case(
      "copy_", "[3,4] from float64 (rounds into self)", {in({3, 4}), src64}, F,
      [](Tensor& s, const TensorList& x) -> Tensor& { return s.copy_(x[1]); },
      ref2([](double, double b) { return b; }), true));
  v.push_back(inplace_case(
      "fill_", "[3,4] with 2", {in({3, 4})}, N,
      [](Tensor& s, const TensorList&) -> Tensor& { return s.fill_(2); },
      ref1([](double) { return 2.0; }), false));
  v.push_back(inplace_case(
      "zero_", "[2,3,4]", {in({2, 3, 4})}, kAllDTypes,
      [](Tensor& s, const TensorList&) -> Tensor& { return s.zero_(); },
      ref1([](double) { return 0.0; }), false));
  return v;
}

}  // namespace sl::testing
