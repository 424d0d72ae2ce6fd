// Shared machinery of the op-case table: tolerances (with their reasons), input generation,
// conversions, and the lists of ops that must be covered.
#include "core/op_cases.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace sl::testing {

const std::vector<DType> kFloatDTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};
const std::vector<DType> kNumericDTypes = {DType::f32,  DType::f64, DType::f16,
                                           DType::bf16, DType::i64, DType::i32};
const std::vector<DType> kAllDTypes = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                       DType::i64, DType::i32, DType::b8};

Tolerance default_tolerance(DType dt) {
  switch (dt) {
    case DType::f64:
      // Kernels compute in double like the reference; only the order of operations (blocked
      // sums, BLAS) and libm's last-ulp differences separate them: ~1e-15 relative per op,
      // far below 1e-10 for the few dozen operations of a case.
      return {1e-10, 1e-12};
    case DType::f32:
      // One rounding of the result to float (6e-8 relative) plus a few ulps from float libm
      // calls (exp, tanh, erf, pow) done in single precision: 1e-5 relative is ~80 ulps.
      // atol covers results near zero that come from sums of products (e.g. matmul with K <= 8
      // of values |x| <= 2.5: 8 * 6.25 * 6e-8 = 3e-6 of absolute rounding in float).
      return {1e-5, 5e-6};
    case DType::f16:
      // Inputs are exact halves (the reference reads them back); kernels compute in float and
      // round the result once to half (2^-11 = 4.9e-4 relative). A few ops round twice (a
      // composite of two kernels such as std = sqrt(var)), so 2e-3 relative. atol: half's
      // spacing near 1 is 9.8e-4; results near zero built from O(1) terms may be off by that.
      return {2e-3, 1e-3};
    case DType::bf16:
      // As f16 with bfloat16's 8-bit mantissa: 2^-8 = 3.9e-3 relative per rounding; two
      // roundings -> 1.6e-2; spacing near 1 is 7.8e-3.
      return {1.6e-2, 8e-3};
    default:
      // Integer and bool results must match exactly.
      return {0, 0};
  }
}

namespace {

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t seed_of(const std::string& s, size_t input) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h ^ (input * 0x9E3779B97F4A7C15ull);
}

double uniform(uint64_t& s) {
  return static_cast<double>(splitmix(s) >> 11) * 0x1.0p-53;
}

double draw(Domain dom, bool integral, int64_t bound, uint64_t& s, int64_t i) {
  auto int_in = [&](int64_t lo, int64_t hi) {
    return static_cast<double>(
        lo + static_cast<int64_t>(splitmix(s) % static_cast<uint64_t>(hi - lo + 1)));
  };
  switch (dom) {
    case Domain::any:
      return integral ? int_in(-5, 5) : -2.0 + 4.0 * uniform(s);
    case Domain::positive:
      return integral ? int_in(1, 5) : 0.5 + 2.0 * uniform(s);
    case Domain::unit:
      return integral ? int_in(-1, 1) : -0.9 + 1.8 * uniform(s);
    case Domain::grid:
      return integral ? int_in(-3, 3) : 0.5 * int_in(-4, 4);
    case Domain::wide:
      return integral ? int_in(-50, 50) : -60.0 + 120.0 * uniform(s);
    case Domain::special: {
      static const double kSpecial[] = {std::numeric_limits<double>::quiet_NaN(),
                                        std::numeric_limits<double>::infinity(),
                                        -std::numeric_limits<double>::infinity(),
                                        0.0,
                                        -0.0,
                                        1.5,
                                        -2.0};
      return integral ? int_in(-3, 3) : kSpecial[(static_cast<uint64_t>(i) + (s & 3)) % 7];
    }
    case Domain::boolean:
      return static_cast<double>(splitmix(s) & 1);
    case Domain::index:
      return int_in(0, bound - 1);
  }
  return 0;
}

Tensor host_tensor(const std::vector<double>& vals, const Shape& shape) {
  return from_vector(vals, {static_cast<int64_t>(vals.size())}).reshape(shape);
}

}  // namespace

std::function<Tensor(const TensorList&)> joined_float_outputs(const OpCase& c) {
  return [&c](const TensorList& x) {
    TensorList flat;
    for (const Tensor& o : c.run(x)) {
      if (o.is_floating_point()) flat.push_back(o.reshape({-1}));
    }
    return flat.size() == 1 ? flat[0] : cat(flat, 0);
  };
}

bool any_requires_grad(const TensorList& inputs) {
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

TensorList make_inputs(const OpCase& c, DType dtype, Device device, bool requires_grad) {
  TensorList out;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const InputSpec& spec = c.inputs[k];
    DType dt = spec.dtype                       ? *spec.dtype
               : spec.domain == Domain::boolean ? DType::b8
               : spec.domain == Domain::index   ? DType::i64
                                                : dtype;
    Shape mem = spec.shape;
    switch (spec.layout) {
      case Layout::contiguous:
        break;
      case Layout::transposed:
        if (mem.size() < 2) throw std::logic_error(c.name + ": transposed layout needs 2 dims");
        std::swap(mem[mem.size() - 1], mem[mem.size() - 2]);
        break;
      case Layout::strided:
        if (mem.empty()) throw std::logic_error(c.name + ": strided layout needs a dim");
        mem.back() *= 2;
        break;
      case Layout::expanded:
        if (mem.empty()) throw std::logic_error(c.name + ": expanded layout needs a dim");
        mem[0] = 1;
        break;
    }
    uint64_t s = seed_of(c.name, k);
    std::vector<double> vals(static_cast<size_t>(Ref::count(mem)));
    bool integral = !is_floating(dt);
    for (size_t i = 0; i < vals.size(); ++i) {
      vals[i] = draw(dt == DType::b8 ? Domain::boolean : spec.domain, integral, spec.bound, s,
                     static_cast<int64_t>(i));
    }
    Tensor t = host_tensor(vals, mem).to(dt).to(device);
    switch (spec.layout) {
      case Layout::contiguous:
        break;
      case Layout::transposed:
        t = t.transpose(-1, -2);
        break;
      case Layout::strided:
        t = t.slice(-1, 0, INT64_MAX, 2);
        break;
      case Layout::expanded:
        t = t.expand(spec.shape);
        break;
    }
    if (requires_grad && spec.differentiable && is_floating(dt)) t.requires_grad_(true);
    out.push_back(t);
  }
  return out;
}

Ref to_ref(const Tensor& t) {
  return Ref(t.sizes(), t.detach().to_vector<double>());
}

Tensor from_ref(const Ref& r) {
  return host_tensor(r.v, r.shape);
}

const std::vector<OpCase>& all_op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> all;
    for (auto part : {elementwise_cases, reduce_cases, matmul_cases, view_cases,
                      softmax_index_cases, shape_sort_cases, inplace_cases, conv_cases}) {
      std::vector<OpCase> p = part();
      all.insert(all.end(), p.begin(), p.end());
    }
    return all;
  }();
  return cases;
}

const std::vector<std::string>& required_ops() {
  static const std::vector<std::string> ops = {
      // elementwise
      "neg", "abs", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "square", "reciprocal", "tanh",
      "sigmoid", "relu", "gelu", "gelu_tanh", "silu", "sin", "cos", "erf", "sign", "floor", "ceil",
      "round", "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le",
      "gt", "ge", "logical_not", "logical_and", "logical_or", "logical_xor", "isnan", "isinf",
      "isfinite", "where", "masked_fill", "clamp", "hardtanh", "leaky_relu", "to_dtype",
      // reductions
      "sum", "mean", "prod", "max", "min", "amax", "amin", "max_dim", "min_dim", "argmax", "argmin",
      "var", "std", "logsumexp", "norm", "all", "any", "cumsum",
      // matmul
      "mm", "bmm", "matmul", "addmm", "linear", "linear_act", "outer", "dot",
      // views
      "view", "reshape", "permute", "transpose", "t", "narrow", "slice", "select", "expand",
      "squeeze", "unsqueeze", "flatten", "unflatten", "movedim", "clone", "contiguous",
      // softmax, index
      "softmax", "log_softmax", "index_select", "index_add", "gather", "scatter", "scatter_value",
      "scatter_add", "embedding", "one_hot", "masked_select",
      // shape, sort
      "cat", "stack", "split", "split_with_sizes", "chunk", "pad", "tril", "triu", "flip", "repeat",
      "sort", "argsort", "topk",
      // convolutions
      "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d",
      // in-place forms
      "neg_", "abs_", "exp_", "log_", "log1p_", "expm1_", "sqrt_", "rsqrt_", "square_",
      "reciprocal_", "tanh_", "sigmoid_", "sin_", "cos_", "floor_", "ceil_", "round_", "sign_",
      "relu_", "add_", "sub_", "mul_", "div_", "pow_", "clamp_", "masked_fill_", "copy_", "fill_",
      "zero_"};
  return ops;
}

const std::vector<std::string>& required_grad_ops() {
  static const std::vector<std::string> ops = {"neg",
                                               "abs",
                                               "exp",
                                               "log",
                                               "log1p",
                                               "expm1",
                                               "sqrt",
                                               "rsqrt",
                                               "square",
                                               "reciprocal",
                                               "tanh",
                                               "sigmoid",
                                               "relu",
                                               "gelu",
                                               "gelu_tanh",
                                               "silu",
                                               "sin",
                                               "cos",
                                               "erf",
                                               "add",
                                               "sub",
                                               "mul",
                                               "div",
                                               "pow",
                                               "maximum",
                                               "minimum",
                                               "where",
                                               "masked_fill",
                                               "clamp",
                                               "hardtanh",
                                               "leaky_relu",
                                               "to_dtype",
                                               "sum",
                                               "mean",
                                               "prod",
                                               "max",
                                               "min",
                                               "amax",
                                               "amin",
                                               "max_dim",
                                               "min_dim",
                                               "var",
                                               "std",
                                               "logsumexp",
                                               "norm",
                                               "cumsum",
                                               "mm",
                                               "bmm",
                                               "matmul",
                                               "addmm",
                                               "linear",
                                               "linear_act",
                                               "outer",
                                               "dot",
                                               "view",
                                               "reshape",
                                               "permute",
                                               "transpose",
                                               "t",
                                               "narrow",
                                               "slice",
                                               "select",
                                               "expand",
                                               "squeeze",
                                               "unsqueeze",
                                               "flatten",
                                               "unflatten",
                                               "movedim",
                                               "clone",
                                               "contiguous",
                                               "softmax",
                                               "log_softmax",
                                               "index_select",
                                               "index_add",
                                               "gather",
                                               "scatter",
                                               "scatter_value",
                                               "scatter_add",
                                               "embedding",
                                               "masked_select",
                                               "cat",
                                               "stack",
                                               "split",
                                               "split_with_sizes",
                                               "chunk",
                                               "pad",
                                               "tril",
                                               "triu",
                                               "flip",
                                               "repeat",
                                               "sort",
                                               "topk",
                                               "conv1d",
                                               "conv2d",
                                               "conv_transpose1d",
                                               "conv_transpose2d",
                                               "neg_",
                                               "abs_",
                                               "exp_",
                                               "log_",
                                               "log1p_",
                                               "expm1_",
                                               "sqrt_",
                                               "rsqrt_",
                                               "square_",
                                               "reciprocal_",
                                               "tanh_",
                                               "sigmoid_",
                                               "sin_",
                                               "cos_",
                                               "relu_",
                                               "add_",
                                               "sub_",
                                               "mul_",
                                               "div_",
                                               "pow_",
                                               "clamp_",
                                               "masked_fill_",
                                               "copy_"};
  return ops;
}

}  // namespace sl::testing
