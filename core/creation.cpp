#include "core/creation.h"

#include <cmath>
#include <cstring>

#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/random.h"
#include "core/ops/reduce.h"

namespace sl {

namespace {
Tensor finish(Tensor t, const TensorOptions& opts) {
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}
}  // namespace

Tensor empty(const Shape& sizes, TensorOptions opts) {
  return finish(ops::empty(sizes, opts.dtype, opts.device), opts);
}

Tensor full(const Shape& sizes, Scalar value, TensorOptions opts) {
  ops::check_scalar_fits("full", value, opts.dtype);
  Tensor t = ops::empty(sizes, opts.dtype, opts.device);
  ops::fill_(t, value);
  return finish(t, opts);
}

Tensor zeros(const Shape& sizes, TensorOptions opts) { return full(sizes, 0, opts); }
Tensor ones(const Shape& sizes, TensorOptions opts) { return full(sizes, 1, opts); }

Tensor scalar_tensor(Scalar value, TensorOptions opts) { return full({}, value, opts); }

Tensor arange(Scalar end) { return arange(Scalar(int64_t{0}), end, Scalar(int64_t{1})); }

Tensor arange(Scalar start, Scalar end, Scalar step) {
  bool all_int = !start.is_floating() && !end.is_floating() && !step.is_floating();
  return arange(start, end, step, TensorOptions{.dtype = all_int ? DType::i64 : kDefaultFloat});
}

namespace {
/// arange of integer bounds into an integer dtype, computed in int64 as PyTorch's (through double
/// the values above 2^53 would round). The count is ceil((e - s) / st) in 128 bits; each value
/// s + i * st lies in [s, e), so it is formed modulo 2^64 without overflow.
Tensor arange_int64(int64_t s, int64_t e, int64_t st, TensorOptions opts) {
  SL_CHECK(st != 0, "arange: step must be nonzero");
  SL_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
           "arange: upper bound and larger bound are inconsistent with step sign (start ", s,
           ", end ", e, ", step ", st, ")");
  const __int128 span = static_cast<__int128>(e) - s;
  const __int128 count = (span + st - (st > 0 ? 1 : -1)) / st;
  SL_CHECK(count <= INT64_MAX, "arange: [", s, ", ", e, ") in steps of ", st,
           " has more elements than int64 can count");
  const auto n = static_cast<int64_t>(count);
  Tensor host = ops::empty({n}, DType::i64, kCPU);
  auto* p = static_cast<int64_t*>(host.data_ptr());
  for (int64_t i = 0; i < n; ++i) {
    p[i] = static_cast<int64_t>(static_cast<uint64_t>(s) +
                                static_cast<uint64_t>(i) * static_cast<uint64_t>(st));
  }
  return finish(ops::to_device(ops::cast(host, opts.dtype), opts.device), opts);
}
}  // namespace

Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions opts) {
  if (start.is_integral() && end.is_integral() && step.is_integral() && is_integral(opts.dtype)) {
    return arange_int64(start.to_int(), end.to_int(), step.to_int(), opts);
  }
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  SL_CHECK(st != 0.0, "arange: step must be nonzero");
  SL_CHECK(std::isfinite(s) && std::isfinite(e), "arange: start and end must be finite, got ", s,
           " and ", e);
  SL_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), "arange: upper bound and larger bound are "
           "inconsistent with step sign (start ", s, ", end ", e, ", step ", st, ")");
  auto n = static_cast<int64_t>(std::ceil((e - s) / st));
  Tensor host = ops::empty({n}, DType::f64, kCPU);
  double* p = static_cast<double*>(host.data_ptr());
  for (int64_t i = 0; i < n; ++i) p[i] = s + static_cast<double>(i) * st;
  return finish(ops::to_device(ops::cast(host, opts.dtype), opts.device), opts);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions opts) {
  SL_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  // Stricter than PyTorch, which fills the points between infinite ends with nan and overflows
  // an integer dtype silently: the ends must be finite (from two steps on) and fit the dtype.
  SL_CHECK(steps < 2 || (std::isfinite(start) && std::isfinite(end)),
           "linspace: start and end must be finite for ", steps, " steps, got ", start, " and ",
           end, " (the points between would be nan)");
  ops::check_scalar_fits("linspace", start, opts.dtype);
  ops::check_scalar_fits("linspace", end, opts.dtype);
  Tensor host = ops::empty({steps}, DType::f64, kCPU);
  double* p = static_cast<double*>(host.data_ptr());
  const double gaps = static_cast<double>(steps - 1);
  double step = steps > 1 ? (end - start) / gaps : 0.0;
  // ends more than the largest double apart: the same step without the overflowing difference
  if (!std::isfinite(step)) step = end / gaps - start / gaps;
  // symmetric formula as PyTorch: first half from start, second half from end; one step is
  // start (PyTorch fills it), not the formula's end
  int64_t half = steps / 2;
  for (int64_t i = 0; i < steps; ++i) {
    p[i] = i < half ? start + step * static_cast<double>(i)
                    : end - step * static_cast<double>(steps - 1 - i);
  }
  // the ends exactly (the formula gives them too, unless the step overflowed: 2 steps 1e308
  // apart); a single step is start
  if (steps >= 1) p[0] = start;
  if (steps >= 2) p[steps - 1] = end;
  return finish(ops::to_device(ops::cast(host, opts.dtype), opts.device), opts);
}

Tensor eye(int64_t n, int64_t m, TensorOptions opts) {
  if (m < 0) m = n;
  SL_CHECK(n >= 0, "eye: n must be non-negative, got ", n);
  Tensor host = ops::empty({n, m}, opts.dtype, kCPU);
  ops::fill_(host, 0);
  Tensor diag = ops::empty({std::min(n, m)}, opts.dtype, kCPU);
  ops::fill_(diag, 1);
  if (std::min(n, m) > 0) {
    Tensor d = Tensor(std::make_shared<TensorImpl>(host.storage(), Shape{std::min(n, m)},
                                                   Shape{m + 1}, 0, opts.dtype));
    ops::copy_(d, diag);
  }
  return finish(ops::to_device(host, opts.device), opts);
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes,
                   std::optional<TensorOptions> opts) {
  Shape s = sizes.empty() && !values.empty() ? Shape{static_cast<int64_t>(values.size())} : sizes;
  if (sizes.empty() && values.empty()) s = Shape{0};
  SL_CHECK_SHAPE(shape_numel(s) == static_cast<int64_t>(values.size()), "from_vector: ",
                 values.size(), " values do not fill shape ", shape_str(s));
  Tensor host = ops::empty(s, dtype_v<T>, kCPU);
  T* p = static_cast<T*>(host.data_ptr());
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  TensorOptions o = opts.value_or(TensorOptions{.dtype = dtype_v<T>});
  return finish(ops::to_device(ops::cast(host, o.dtype), o.device), o);
}

template Tensor from_vector<float>(const std::vector<float>&, const Shape&,
                                   std::optional<TensorOptions>);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&,
                                    std::optional<TensorOptions>);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&,
                                     std::optional<TensorOptions>);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&,
                                     std::optional<TensorOptions>);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&,
                                  std::optional<TensorOptions>);
template Tensor from_vector<Half>(const std::vector<Half>&, const Shape&,
                                  std::optional<TensorOptions>);
template Tensor from_vector<BFloat16>(const std::vector<BFloat16>&, const Shape&,
                                      std::optional<TensorOptions>);

Tensor tensor(std::initializer_list<float> values, TensorOptions opts) {
  return from_vector(std::vector<float>(values), {}, opts);
}
Tensor tensor(std::initializer_list<double> values, TensorOptions opts) {
  return from_vector(std::vector<double>(values), {}, opts);
}
Tensor tensor(std::initializer_list<int64_t> values, TensorOptions opts) {
  return from_vector(std::vector<int64_t>(values), {}, opts);
}

Tensor from_blob(void* data, const Shape& sizes, TensorOptions opts,
                 std::function<void(void*)> deleter, const Shape& strides) {
  SL_CHECK(data != nullptr || shape_numel(sizes) == 0, "from_blob: null data pointer");
  Shape st = strides.empty() ? contiguous_strides(sizes) : strides;
  SL_CHECK_SHAPE(st.size() == sizes.size(), "from_blob: ", sizes.size(), " sizes but ",
                 st.size(), " strides");
  int64_t extent = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    SL_CHECK_SHAPE(st[i] >= 0, "from_blob: negative stride ", st[i]);
    if (sizes[i] == 0) {
      extent = -1;
      break;
    }
    extent += (sizes[i] - 1) * st[i];
  }
  size_t nbytes = static_cast<size_t>(extent + 1) * dtype_size(opts.dtype);
  auto storage = std::make_shared<Storage>(data, nbytes, opts.device, std::move(deleter));
  return finish(Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, st, 0, opts.dtype)),
                opts);
}

Tensor rand(const Shape& sizes, TensorOptions opts, Generator* gen) {
  SL_CHECK_DTYPE(is_floating(opts.dtype), "rand: expected a floating dtype, got ",
                 dtype_name(opts.dtype));
  Tensor t = ops::empty(sizes, opts.dtype, opts.device);
  ops::random_fill_(t, RandomDist::uniform, 0.0, 1.0, gen);
  return finish(t, opts);
}

Tensor randn(const Shape& sizes, TensorOptions opts, Generator* gen) {
  SL_CHECK_DTYPE(is_floating(opts.dtype), "randn: expected a floating dtype, got ",
                 dtype_name(opts.dtype));
  Tensor t = ops::empty(sizes, opts.dtype, opts.device);
  ops::random_fill_(t, RandomDist::normal, 0.0, 1.0, gen);
  return finish(t, opts);
}

Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions opts, Generator* gen) {
  SL_CHECK(low < high, "randint: expected low < high, got low=", low, " high=", high);
  Tensor t = ops::empty(sizes, opts.dtype, opts.device);
  ops::random_fill_(t, RandomDist::randint, static_cast<double>(low), static_cast<double>(high),
                    gen);
  return finish(t, opts);
}

Tensor bernoulli(const Tensor& p, Generator* gen) {
  ops::check_defined("bernoulli", p);
  SL_CHECK_DTYPE(is_floating(p.dtype()), "bernoulli: probabilities must be floating, got ",
                 dtype_name(p.dtype()));
  Tensor u = ops::empty(p.sizes(), DType::f32, p.device());
  ops::random_fill_(u, RandomDist::uniform, 0.0, 1.0, gen);
  return ops::cast(ops::binary(BinaryOp::lt, u, p), p.dtype());
}

Tensor randperm(int64_t n, TensorOptions opts, Generator* gen) {
  SL_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  // Fisher-Yates driven by one 64-bit uniform per position, drawn from the Philox stream.
  Tensor u = ops::empty({n}, DType::f64, kCPU);
  ops::random_fill_(u, RandomDist::uniform, 0.0, 1.0, gen);
  const double* r = static_cast<const double*>(u.data_ptr());
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    auto j = static_cast<int64_t>(r[i] * static_cast<double>(i + 1));
    if (j > i) j = i;
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return from_vector(perm, {n}, opts);
}

Tensor empty_like(const Tensor& t) { return ops::empty_like(t); }
Tensor zeros_like(const Tensor& t) {
  return full(t.sizes(), 0, {.dtype = t.dtype(), .device = t.device()});
}
Tensor ones_like(const Tensor& t) {
  return full(t.sizes(), 1, {.dtype = t.dtype(), .device = t.device()});
}
Tensor full_like(const Tensor& t, Scalar value) {
  return full(t.sizes(), value, {.dtype = t.dtype(), .device = t.device()});
}
Tensor rand_like(const Tensor& t, Generator* gen) {
  return rand(t.sizes(), {.dtype = t.dtype(), .device = t.device()}, gen);
}
Tensor randn_like(const Tensor& t, Generator* gen) {
  return randn(t.sizes(), {.dtype = t.dtype(), .device = t.device()}, gen);
}

}  // namespace sl
