// Op cases of the elementwise family: unary maps, binary arithmetic with broadcasting,
// comparisons, logical ops, where, masked_fill, clamp and dtype conversion.
#include <cmath>

#include "core/op_cases.h"

namespace sl::testing {

namespace {

using UnaryFn = std::function<Tensor(const Tensor&)>;
using RefFn1 = std::function<double(double)>;
using RefFn2 = std::function<double(double, double)>;

double sigmoid_ref(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
double gelu_tanh_ref(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double sign_ref(double x) {
  return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
}

/// Two cases per unary op: a non-contiguous [3, 4] input and a 0-d one; plus a zero-size input
/// for a few representative ops (zero_size = true).
void add_unary(std::vector<OpCase>& v, const std::string& op, UnaryFn f, RefFn1 r, Domain dom,
               std::vector<DType> dtypes, bool grad, bool zero_size = false) {
  auto run = [f](const TensorList& x) -> TensorList { return {f(x[0])}; };
  auto ref = [r](const std::vector<Ref>& x) { return std::vector<Ref>{map1(x[0], r)}; };
  v.push_back(
      {op, op + " [3,4] strided", {in({3, 4}, dom, Layout::strided)}, dtypes, run, ref, grad});
  v.push_back({op, op + " 0-d", {in({}, dom)}, dtypes, run, ref, grad});
  if (zero_size) v.push_back({op, op + " [0,3]", {in({0, 3}, dom)}, dtypes, run, ref, false});
}

/// Binary op cases: broadcasting [2,1,4] with [3,1] (strided), a 0-d operand with a transposed
/// [3,4], an expanded (stride-0) operand, and optionally a zero-size broadcast.
void add_binary(std::vector<OpCase>& v, const std::string& op,
                std::function<Tensor(const Tensor&, const Tensor&)> f, RefFn2 r, Domain da,
                Domain db, std::vector<DType> dtypes, bool grad, bool predicate = false,
                bool zero_size = false) {
  auto run = [f](const TensorList& x) -> TensorList { return {f(x[0], x[1])}; };
  auto ref = [r, predicate](const std::vector<Ref>& x) {
    Ref out = map2(x[0], x[1], r);
    if (predicate) out.as(DType::b8);
    return std::vector<Ref>{out};
  };
  v.push_back({op,
               op + " [2,1,4] x [3,1] broadcast",
               {in({2, 1, 4}, da), in({3, 1}, db, Layout::strided)},
               dtypes,
               run,
               ref,
               grad});
  v.push_back({op,
               op + " 0-d x [3,4] transposed",
               {in({}, da), in({3, 4}, db, Layout::transposed)},
               dtypes,
               run,
               ref,
               grad});
  v.push_back({op,
               op + " [3,4] expanded x [4]",
               {in({3, 4}, da, Layout::expanded), in({4}, db)},
               dtypes,
               run,
               ref,
               grad});
  if (zero_size) {
    v.push_back({op, op + " [0,3] x [3]", {in({0, 3}, da), in({3}, db)}, dtypes, run, ref, false});
  }
}

}  // namespace

std::vector<OpCase> elementwise_cases() {
  std::vector<OpCase> v;
  const auto F = kFloatDTypes;
  const auto N = kNumericDTypes;
  // ---- unary ---------------------------------------------------------------------------------
  add_unary(
      v, "neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, Domain::any, N,
      true, true);
  add_unary(
      v, "abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); },
      Domain::any, N, true);
  add_unary(
      v, "exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); },
      Domain::any, F, true, true);
  add_unary(
      v, "log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); },
      Domain::positive, F, true);
  add_unary(
      v, "log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); },
      Domain::positive, F, true);
  add_unary(
      v, "expm1", [](const Tensor& x) { return expm1(x); }, [](double x) { return std::expm1(x); },
      Domain::any, F, true);
  add_unary(
      v, "sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); },
      Domain::positive, F, true);
  add_unary(
      v, "rsqrt", [](const Tensor& x) { return rsqrt(x); },
      [](double x) { return 1.0 / std::sqrt(x); }, Domain::positive, F, true);
  add_unary(
      v, "square", [](const Tensor& x) { return square(x); }, [](double x) { return x * x; },
      Domain::any, N, true);
  add_unary(
      v, "reciprocal", [](const Tensor& x) { return reciprocal(x); },
      [](double x) { return 1.0 / x; }, Domain::positive, F, true);
  add_unary(
      v, "tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); },
      Domain::any, F, true);
  add_unary(
      v, "sigmoid", [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref, Domain::any, F, true,
      true);
  add_unary(
      v, "relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0.0; },
      Domain::any, N, true);
  add_unary(
      v, "gelu", [](const Tensor& x) { return gelu(x); }, gelu_ref, Domain::any, F, true);
  add_unary(
      v, "gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, gelu_tanh_ref, Domain::any,
      F, true);
  add_unary(
      v, "silu", [](const Tensor& x) { return silu(x); },
      [](double x) { return x * sigmoid_ref(x); }, Domain::any, F, true);
  add_unary(
      v, "sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); },
      Domain::any, F, true);
  add_unary(
      v, "cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); },
      Domain::any, F, true);
  add_unary(
      v, "erf", [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); },
      Domain::any, F, true);
  add_unary(
      v, "sign", [](const Tensor& x) { return sign(x); }, sign_ref, Domain::grid, N, false);
  add_unary(
      v, "floor", [](const Tensor& x) { return floor(x); }, [](double x) { return std::floor(x); },
      Domain::any, N, false);
  add_unary(
      v, "ceil", [](const Tensor& x) { return ceil(x); }, [](double x) { return std::ceil(x); },
      Domain::any, N, false);
  // grid values include halves: round() must round half to even, as torch.round
  add_unary(
      v, "round", [](const Tensor& x) { return round(x); },
      [](double x) { return std::nearbyint(x); }, Domain::grid, N, false);
  add_unary(
      v, "isnan", [](const Tensor& x) { return isnan(x); },
      [](double x) { return std::isnan(x) ? 1.0 : 0.0; }, Domain::special, F, false);
  add_unary(
      v, "isinf", [](const Tensor& x) { return isinf(x); },
      [](double x) { return std::isinf(x) ? 1.0 : 0.0; }, Domain::special, F, false);
  add_unary(
      v, "isfinite", [](const Tensor& x) { return isfinite(x); },
      [](double x) { return std::isfinite(x) ? 1.0 : 0.0; }, Domain::special, F, false);
  for (auto& c : v) {  // predicates give bool
    if (c.op == "isnan" || c.op == "isinf" || c.op == "isfinite") {
      auto r = c.ref;
      c.ref = [r](const std::vector<Ref>& x) {
        auto out = r(x);
        out[0].as(DType::b8);
        return out;
      };
    }
  }
  add_unary(
      v, "logical_not", [](const Tensor& x) { return logical_not(x); },
      [](double x) { return x == 0 ? 1.0 : 0.0; }, Domain::grid, kAllDTypes, false);
  v.back().ref = [](const std::vector<Ref>& x) {
    return std::vector<Ref>{map1(x[0], [](double a) { return a == 0 ? 1.0 : 0.0; }).as(DType::b8)};
  };
  v[v.size() - 2].ref = v.back().ref;
  // integer inputs of float-only unary ops are promoted to float32
  v.push_back({"exp",
               "exp int -> float32",
               {in({2, 3})},
               {DType::i64, DType::i32},
               [](const TensorList& x) -> TensorList { return {exp(x[0])}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{
                     map1(x[0], [](double a) { return std::exp(a); }).as(DType::f32)};
               },
               false});

  // ---- binary arithmetic -----------------------------------------------------------------------
  add_binary(
      v, "add", [](const Tensor& a, const Tensor& b) { return add(a, b); },
      [](double a, double b) { return a + b; }, Domain::any, Domain::any, N, true, false, true);
  add_binary(
      v, "add", [](const Tensor& a, const Tensor& b) { return add(a, b, 2); },
      [](double a, double b) { return a + 2 * b; }, Domain::any, Domain::any, N, true);
  for (size_t i = v.size() - 3; i < v.size(); ++i) v[i].name += " alpha=2";
  add_binary(
      v, "sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
      [](double a, double b) { return a - b; }, Domain::any, Domain::any, N, true);
  add_binary(
      v, "mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
      [](double a, double b) { return a * b; }, Domain::any, Domain::any, N, true, false, true);
  add_binary(
      v, "div", [](const Tensor& a, const Tensor& b) { return div(a, b); },
      [](double a, double b) { return a / b; }, Domain::any, Domain::positive, F, true);
  add_binary(
      v, "pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
      [](double a, double b) { return std::pow(a, b); }, Domain::positive, Domain::any, F, true);
  add_binary(
      v, "maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
      [](double a, double b) { return std::max(a, b); }, Domain::any, Domain::any, N, true);
  add_binary(
      v, "minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
      [](double a, double b) { return std::min(a, b); }, Domain::any, Domain::any, N, true);
  // integer division is true division into float32; integer pow stays integral
  v.push_back({"div",
               "div int / int -> float32",
               {in({2, 3}), in({3}, Domain::positive)},
               {DType::i64, DType::i32},
               [](const TensorList& x) -> TensorList { return {div(x[0], x[1])}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{
                     map2(x[0], x[1], [](double a, double b) { return a / b; }).as(DType::f32)};
               },
               false});
  v.push_back({"pow",
               "pow int ^ int",
               {in({2, 3}, Domain::any), in({3}, Domain::positive)},
               {DType::i64, DType::i32},
               [](const TensorList& x) -> TensorList { return {pow(x[0], x[1])}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{
                     map2(x[0], x[1], [](double a, double b) { return std::pow(a, b); })};
               },
               false});
  // ties on a grid: maximum/minimum must pick the tied value (forward only)
  add_binary(
      v, "maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
      [](double a, double b) { return std::max(a, b); }, Domain::grid, Domain::grid, N, false);
  for (size_t i = v.size() - 3; i < v.size(); ++i) v[i].name += " ties";
  // tensor-scalar forms (the scalar keeps the tensor's dtype)
  v.push_back({"add",
               "add scalar",
               {in({2, 3}, Domain::any, Layout::transposed)},
               F,
               [](const TensorList& x) -> TensorList { return {add(x[0], 1.5)}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{map1(x[0], [](double a) { return a + 1.5; })};
               }});
  v.push_back({"sub",
               "rsub scalar - tensor",
               {in({4})},
               F,
               [](const TensorList& x) -> TensorList { return {3.0 - x[0]}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{map1(x[0], [](double a) { return 3.0 - a; })};
               }});
  v.push_back({"mul",
               "mul scalar",
               {in({2, 3})},
               N,
               [](const TensorList& x) -> TensorList { return {mul(x[0], 3)}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{map1(x[0], [](double a) { return 3 * a; })};
               }});
  v.push_back({"div",
               "scalar / tensor",
               {in({2, 3}, Domain::positive)},
               F,
               [](const TensorList& x) -> TensorList { return {div(2.0, x[0])}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{map1(x[0], [](double a) { return 2.0 / a; })};
               }});
  v.push_back({"pow",
               "pow tensor ^ 3",
               {in({2, 3})},
               F,
               [](const TensorList& x) -> TensorList { return {pow(x[0], 3)}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{map1(x[0], [](double a) { return a * a * a; })};
               }});
  v.push_back({"pow",
               "pow 2 ^ tensor",
               {in({2, 3})},
               F,
               [](const TensorList& x) -> TensorList { return {pow(2.0, x[0])}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{map1(x[0], [](double a) { return std::pow(2.0, a); })};
               }});

  // ---- comparisons and logic
  // ----------------------------------------------------------------------
  struct Cmp {
    const char* op;
    std::function<Tensor(const Tensor&, const Tensor&)> f;
    RefFn2 r;
  };
  const Cmp cmps[] = {
      {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); },
       [](double a, double b) { return double(a == b); }},
      {"ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); },
       [](double a, double b) { return double(a != b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); },
       [](double a, double b) { return double(a < b); }},
      {"le", [](const Tensor& a, const Tensor& b) { return le(a, b); },
       [](double a, double b) { return double(a <= b); }},
      {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); },
       [](double a, double b) { return double(a > b); }},
      {"ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); },
       [](double a, double b) { return double(a >= b); }},
      {"logical_and", [](const Tensor& a, const Tensor& b) { return logical_and(a, b); },
       [](double a, double b) { return double(a != 0 && b != 0); }},
      {"logical_or", [](const Tensor& a, const Tensor& b) { return logical_or(a, b); },
       [](double a, double b) { return double(a != 0 || b != 0); }},
      {"logical_xor", [](const Tensor& a, const Tensor& b) { return logical_xor(a, b); },
       [](double a, double b) { return double((a != 0) != (b != 0)); }},
  };
  for (const Cmp& c : cmps) {
    add_binary(v, c.op, c.f, c.r, Domain::grid, Domain::grid, kAllDTypes, false, true);
  }
  v.push_back({"eq",
               "eq tensor == scalar",
               {in({3, 4}, Domain::grid)},
               N,
               [](const TensorList& x) -> TensorList { return {eq(x[0], 1)}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{
                     map1(x[0], [](double a) { return double(a == 1); }).as(DType::b8)};
               },
               false});

  // ---- where, masked_fill, clamp
  // ------------------------------------------------------------------
  v.push_back({"where",
               "where [2,1,4] ? [3,4] : 0-d",
               {bool_in({2, 1, 4}), in({3, 4}, Domain::any, Layout::transposed), in({})},
               kAllDTypes,
               [](const TensorList& x) -> TensorList { return {where(x[0], x[1], x[2])}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{map3(x[0], x[1], x[2], [](double c, double a, double b) {
                   return c != 0 ? a : b;
                 })};
               }});
  v.push_back({"where",
               "where zero-size",
               {bool_in({0, 4}), in({4}), in({0, 1})},
               N,
               [](const TensorList& x) -> TensorList { return {where(x[0], x[1], x[2])}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{map3(x[0], x[1], x[2], [](double c, double a, double b) {
                   return c != 0 ? a : b;
                 })};
               },
               false});
  v.push_back({"masked_fill",
               "masked_fill [2,3,4] mask [3,1]",
               {in({2, 3, 4}, Domain::any, Layout::strided), bool_in({3, 1})},
               N,
               [](const TensorList& x) -> TensorList { return {masked_fill(x[0], x[1], -3)}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{
                     map2(x[0], x[1], [](double a, double m) { return m != 0 ? -3.0 : a; })};
               }});
  v.push_back({"clamp",
               "clamp [-0.5, 1]",
               {in({3, 4}, Domain::any, Layout::transposed)},
               F,
               [](const TensorList& x) -> TensorList { return {clamp(x[0], -0.5, 1.0)}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{
                     map1(x[0], [](double a) { return std::min(std::max(a, -0.5), 1.0); })};
               }});
  v.push_back({"clamp",
               "clamp min only, ints",
               {in({2, 5})},
               N,
               [](const TensorList& x) -> TensorList { return {clamp(x[0], 1, std::nullopt)}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{map1(x[0], [](double a) { return std::max(a, 1.0); })};
               },
               false});
  v.push_back({"clamp",
               "clamp max only 0-d",
               {in({})},
               F,
               [](const TensorList& x) -> TensorList { return {clamp(x[0], std::nullopt, 0.25)}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{map1(x[0], [](double a) { return std::min(a, 0.25); })};
               }});
  v.push_back({"hardtanh",
               "hardtanh",
               {in({3, 4})},
               F,
               [](const TensorList& x) -> TensorList { return {hardtanh(x[0])}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{
                     map1(x[0], [](double a) { return std::min(std::max(a, -1.0), 1.0); })};
               }});
  v.push_back({"leaky_relu",
               "leaky_relu 0.1",
               {in({3, 4}, Domain::any, Layout::strided)},
               F,
               [](const TensorList& x) -> TensorList { return {leaky_relu(x[0], 0.1)}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{map1(x[0], [](double a) { return a > 0 ? a : 0.1 * a; })};
               }});

  // ---- conversions
  // ---------------------------------------------------------------------------------
  v.push_back(
      {"to_dtype",
       "to float64",
       {in({2, 3}, Domain::any, Layout::transposed)},
       kAllDTypes,
       [](const TensorList& x) -> TensorList { return {x[0].to(DType::f64)}; },
       [](const std::vector<Ref>& x) { return std::vector<Ref>{Ref(x[0]).as(DType::f64)}; }});
  v.push_back({"to_dtype",
               "float to int32 truncates",
               {in({2, 3})},
               F,
               [](const TensorList& x) -> TensorList { return {x[0].to(DType::i32)}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{
                     map1(x[0], [](double a) { return std::trunc(a); }).as(DType::i32)};
               },
               false});
  v.push_back({"to_dtype",
               "to bool",
               {in({2, 3}, Domain::grid)},
               N,
               [](const TensorList& x) -> TensorList { return {x[0].to(DType::b8)}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{
                     map1(x[0], [](double a) { return double(a != 0); }).as(DType::b8)};
               },
               false});
  return v;
}

}  // namespace sl::testing
