// Differentiable reductions with their backward beside them.
#include "autograd/ops/reduce.h"

#include <cmath>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/shape.h"
#include "core/amp.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/view.h"

namespace sl {

namespace {

/// g (the reduced shape) broadcast back over the input's shape.
Tensor expand_back(const Tensor& g, const Shape& in_shape, const std::vector<int64_t>& wdims,
                   bool keepdim) {
  Tensor r = g;
  if (!keepdim && !in_shape.empty()) {
    Shape ks = in_shape;
    for (int64_t d : wdims) ks[static_cast<size_t>(d)] = 1;
    r = grad_reshape(r, ks);
  }
  return grad_expand(r, in_shape);
}

int64_t reduced_count(const Shape& s, const std::vector<int64_t>& wdims) {
  int64_t n = 1;
  for (int64_t d : wdims) n *= s[static_cast<size_t>(d)];
  return n;
}

/// Records out, a reduction of a over dims, whose input gradient is fn(g_expanded, x,
/// y_expanded, n) with n the count of elements reduced into each output. fn must be built from
/// differentiable ops (sl::mul, not ops::binary) so that a backward with create_graph records it
/// (Note [Double backward] in autograd/engine.cpp); x and y come attached to their history.
template <class F>
Tensor record_reduction(const char* name, const Tensor& a, Tensor out,
                        const std::vector<int64_t>& dims, bool keepdim, bool save_x, bool save_y,
                        F fn) {
  if (needs_grad(a)) {
    std::vector<int64_t> wdims = wrap_dims(dims, a.dim(), name);
    Shape in_shape = a.sizes();
    SavedTensor sx = save_x ? SavedTensor(a) : SavedTensor();
    SavedTensor sy = save_y ? SavedTensor::output(out) : SavedTensor();
    record(
        name, {a}, {&out},
        [=](const BackwardCtx& c) -> variable_list {
          Tensor g = expand_back(c.grad(), in_shape, wdims, keepdim);
          Tensor y = save_y ? expand_back(sy.unpack(name), in_shape, wdims, keepdim) : Tensor();
          return {fn(g, sx.unpack(name), y, reduced_count(in_shape, wdims))};
        },
        DoubleBackward::supported);
  }
  return out;
}

/// Records a reduction whose input gradient is fn(g_expanded, x, y_expanded, n).
template <class F>
Tensor reduction(ReduceOp op, const char* name, const Tensor& a, const std::vector<int64_t>& dims,
                 bool keepdim, const ReduceParams& params, bool save_x, bool save_y, F fn) {
  return record_reduction(name, a, ops::reduce(op, a, dims, keepdim, params), dims, keepdim, save_x,
                          save_y, std::move(fn));
}

/// The exclusive running products of x along d: out[i] = x[0] * ... * x[i - 1] (1 at i = 0),
/// as a log-depth scan of differentiable ops (so it runs on any device and has a gradient).
/// Each step multiplies in the block that ends `s` before, in the same order as a left-to-right
/// cumprod for lengths up to 3; longer ones may round differently by an ulp.
Tensor exclusive_cumprod(const Tensor& x, int64_t d) {
  const int64_t n = x.size(d);
  Shape block = x.sizes();
  block[static_cast<size_t>(d)] = 1;
  Tensor p =
      cat({ones(block, {.dtype = x.dtype(), .device = x.device()}), x.narrow(d, 0, n - 1)}, d);
  for (int64_t s = 1; s < n; s *= 2) {
    block[static_cast<size_t>(d)] = s;
    p = mul(p, cat({ones(block, {.dtype = x.dtype(), .device = x.device()}), p.narrow(d, 0, n - s)},
                   d));
  }
  return p;
}

/// At each element of x, the product of the other elements along d, as PyTorch 1.13's
/// prod_safe_zeros_backward: the exclusive cumprod from the front times the one from the back.
Tensor prod_of_others(const Tensor& x, int64_t d) {
  if (x.size(d) == 1) return ones_like(x);
  return mul(exclusive_cumprod(x, d), flip(exclusive_cumprod(flip(x, {d}), d), {d}));
}

}  // namespace

// sum and norm opt in to autocast's `fp32` policy (Note [Autocast] in core/amp.h).
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return reduction(ReduceOp::sum, "SumBackward", autocast(a, AmpPolicy::fp32), dims, keepdim, {},
                   false, false, [](const Tensor& g, const Tensor&, const Tensor&, int64_t) {
                     return GradMode::is_enabled() ? g.contiguous() : ops::contiguous(g);
                   });
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return reduction(ReduceOp::mean, "MeanBackward", a, dims, keepdim, {}, false, false,
                   [](const Tensor& g, const Tensor&, const Tensor&, int64_t n) {
                     return div(g, static_cast<double>(n));
                   });
}

// Note [prod backward at zeros]: PyTorch 1.13's prod_backward gives each element the product
// of the others. It takes that as y / x when the input holds no zero at all, and otherwise
// multiplies exclusive cumprods (prod_safe_zeros_backward) in every slice, also those without a
// zero: there an element beside a NaN or an inf gets the product of the others (3 in [1, nan, 3],
// where y / x gives NaN), and an element beside a zero gets 0 * (the rest), NaN where the rest
// holds a NaN or an inf. Over all elements with two or more zeros it returns zeros_like, as
// PyTorch 1.13 does (later PyTorch versions build the product-of-others graph instead when
// create_graph asks for second derivatives, and so does this formula, built from differentiable
// ops: under create_graph it skips that shortcut). A 0-d or empty input
// passes the gradient through. The choice is made on the device (where), without a sync: both
// forms are computed. The cumprods are a log-depth scan (exclusive_cumprod), so the rounding of
// long slices may differ from PyTorch's by an ulp, and a float32 partial product that overflows
// gives inf (then NaN beside a zero) where PyTorch's CPU cumprod, which accumulates in double,
// may not.
Tensor prod(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  std::vector<int64_t> dims;
  if (dim) dims.push_back(*dim);
  const bool all = !dim.has_value();
  return reduction(
      ReduceOp::prod, "ProdBackward", autocast(a, AmpPolicy::fp32), dims, keepdim, {}, true, true,
      [dims, all](const Tensor& g, const Tensor& x, const Tensor& y, int64_t) {
        if (x.dim() == 0 || x.numel() == 0)
          return GradMode::is_enabled() ? g.contiguous() : ops::contiguous(g);
        Tensor is_zero = eq(x, 0);
        Tensor zeros = sum(is_zero.to(DType::i64));  // over the whole input, as PyTorch
        Tensor others = all ? prod_of_others(x.reshape({-1}), 0).reshape(x.sizes())
                            : prod_of_others(x, wrap_dims(dims, x.dim(), "prod")[0]);
        // (under create_graph the others' product, 0 there too, keeps its second derivative)
        if (all && !GradMode::is_enabled()) others = where(gt(zeros, 1), zeros_like(x), others);
        // y / x with the zeros' division kept out of the graph (its gradient would be NaN)
        Tensor quotient = div(y, where(is_zero, ones_like(x), x));
        return mul(g, where(eq(zeros, 0), quotient, others));
      });
}

namespace {

/// max() / min() over every element. The backward is PyTorch 1.13's evenly_distribute_backward:
/// the elements equal to the result share the gradient, and a NaN result gives it to the NaNs
/// (amax's rule, x == y, would match nothing there and spread 0 / 0 = NaN over every element).
Tensor max_min_all(bool is_max, const Tensor& a) {
  return reduction(is_max ? ReduceOp::max : ReduceOp::min, is_max ? "MaxBackward" : "MinBackward",
                   a, {}, false, {}, true, true,
                   [](const Tensor& g, const Tensor& x, const Tensor& y, int64_t) {
                     Tensor hit = logical_or(eq(x, y), logical_and(isnan(x), isnan(y)));
                     Tensor h = hit.to(g.dtype());
                     return div(mul(g, h), sum(h));
                   });
}

}  // namespace

Tensor max(const Tensor& a) {
  return max_min_all(true, a);
}
Tensor min(const Tensor& a) {
  return max_min_all(false, a);
}

namespace {
Tensor amax_amin(bool is_max, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return reduction(is_max ? ReduceOp::max : ReduceOp::min, is_max ? "AmaxBackward" : "AminBackward",
                   a, dims, keepdim, {}, true, true,
                   [dims](const Tensor& g, const Tensor& x, const Tensor& y, int64_t) {
                     Tensor hit = eq(x, y).to(g.dtype());
                     Tensor count = sum(hit, dims, true);
                     return div(mul(g, hit), count);
                   });
}

std::pair<Tensor, Tensor> max_min_dim(bool is_max, const Tensor& a, int64_t dim, bool keepdim) {
  auto [values, indices] = ops::arg_reduce(is_max, a, dim, keepdim);
  if (needs_grad(a)) {
    int64_t d = wrap_dim(dim, a.dim(), is_max ? "max" : "min");
    Shape in_shape = a.sizes();
    SavedTensor si(indices);
    const char* name = is_max ? "MaxBackward" : "MinBackward";
    record(
        name, {a}, {&values},
        [=](const BackwardCtx& c) -> variable_list {
          Tensor idx = si.unpack(name);
          Tensor g = c.grad();
          if (in_shape.empty()) return {g};
          if (!keepdim) {
            g = GradMode::is_enabled() ? g.unsqueeze(d) : ops::unsqueeze(g, d);
            idx = ops::unsqueeze(idx, d);
          }
          // one-hot of the index along d, built by comparing with a broadcast arange
          Shape ar_shape(in_shape.size(), 1);
          ar_shape[static_cast<size_t>(d)] = in_shape[static_cast<size_t>(d)];
          Tensor ar =
              ops::view(arange(in_shape[static_cast<size_t>(d)]).to(idx.device()), ar_shape);
          Tensor hit = ops::binary(BinaryOp::eq, ar, idx);
          return {where(hit, g.expand(in_shape),
                        zeros({}, {.dtype = g.dtype(), .device = g.device()}))};
        },
        DoubleBackward::supported);
  }
  return {values, indices};
}
}  // namespace

Tensor amax(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return amax_amin(true, a, dims, keepdim);
}
Tensor amin(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return amax_amin(false, a, dims, keepdim);
}
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  return max_min_dim(true, a, dim, keepdim);
}
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  return max_min_dim(false, a, dim, keepdim);
}

Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) return ops::arg_reduce(true, ops::reshape(a, {-1}), 0, false).second;
  return ops::arg_reduce(true, a, *dim, keepdim).second;
}
Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) return ops::arg_reduce(false, ops::reshape(a, {-1}), 0, false).second;
  return ops::arg_reduce(false, a, *dim, keepdim).second;
}

Tensor var(const Tensor& a, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  ReduceParams p;
  p.correction = correction;
  return reduction(ReduceOp::var, "VarBackward", a, dims, keepdim, p, true, false,
                   [dims, correction](const Tensor& g, const Tensor& x, const Tensor&, int64_t n) {
                     Tensor centered = sub(x, mean(x, dims, true));
                     return mul(g, mul(centered, 2.0 / static_cast<double>(n - correction)));
                   });
}

Tensor std(const Tensor& a, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  ReduceParams p;
  p.correction = correction;
  Tensor out = ops::unary(UnaryOp::sqrt, ops::reduce(ReduceOp::var, a, dims, keepdim, p));
  // d std = d var / (2 std), and 0 where std is 0 (a constant slice), as PyTorch's std_backward
  // (masked_fill(std == 0, 0)): sqrt's derivative alone would give 0 * inf = NaN there.
  return record_reduction(
      "StdBackward", a, std::move(out), dims, keepdim, true, true,
      [dims, correction](const Tensor& g, const Tensor& x, const Tensor& y, int64_t n) {
        Tensor g_over_y = where(eq(y, 0), zeros_like(g), div(g, y));
        Tensor centered = sub(x, mean(x, dims, true));
        return mul(g_over_y, mul(centered, 1.0 / static_cast<double>(n - correction)));
      });
}

Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return reduction(ReduceOp::logsumexp, "LogsumexpBackward", autocast(a, AmpPolicy::fp32), dims,
                   keepdim, {}, true, true,
                   [](const Tensor& g, const Tensor& x, const Tensor& y, int64_t) {
                     return mul(g, exp(sub(x, y)));
                   });
}

Tensor norm(const Tensor& a, double p, const std::vector<int64_t>& dims, bool keepdim) {
  ReduceParams params;
  params.p = p;
  return reduction(
      ReduceOp::norm, "NormBackward", autocast(a, AmpPolicy::fp32), dims, keepdim, params, true,
      true, [p, dims](const Tensor& g, const Tensor& x, const Tensor& y, int64_t) {
        Tensor zero = zeros_like(x);
        if (std::isinf(p)) {
          // +-inf: the gradient shared by the elements whose |x| is the max / min.
          // Note [Inf-norm NaN]: a NaN result counts the NaNs as the hits, as
          // PyTorch 1.13's norm_backward (mask = |x| == norm or isnan(|x|)); times
          // sign(NaN) = 0 that gives 0 everywhere (torch: norm([2, nan, 1], inf)
          // has gradient [0, 0, 0]). Matching nothing, |x| == y alone divided by a
          // zero count and made every element's gradient NaN.
          Tensor hit = logical_or(eq(abs(x), y), isnan(x)).to(g.dtype());
          Tensor count = sum(hit, dims, true);
          return mul(div(mul(g, hit), count), sign(x));
        }
        if (p == 0.0) return zero;  // a count: constant almost everywhere
        if (p == 1.0) return mul(g, sign(x));
        Tensor safe_y = where(eq(y, 0), ones_like(y), y);
        Tensor d;
        if (p == 2.0) {
          d = div(x, safe_y);
        } else if (p < 1.0) {
          // sgn(x) |x|^(p-1) / y^(p-1), 0 where x is 0 (|x|^(p-1) is inf there) and,
          // below, where y is 0 (p < 0 and some x is 0: y is 0 whatever the others
          // are). Written with sgn(x) rather than x |x|^(p-2) so that an infinite x
          // gets 0 (inf^(p-1) = 0), not inf * 0. PyTorch 1.13 gives the same.
          Tensor safe_x = where(eq(x, 0), ones_like(x), x);
          d = where(eq(x, 0), zero,
                    div(mul(sign(safe_x), pow(abs(safe_x), p - 1.0)), pow(safe_y, p - 1.0)));
        } else {
          // 0 where x is 0, as PyTorch's norm_backward (sgn(x) |x|^(p-1), masked
          // at x == 0 for p < 1): x |x|^(p-2) is 0 * inf = NaN there for p < 2
          Tensor safe_x = where(eq(x, 0), ones_like(x), x);
          d = where(eq(x, 0), zero,
                    div(mul(safe_x, pow(abs(safe_x), p - 2.0)), pow(safe_y, p - 1.0)));
        }
        return mul(g, where(eq(y, 0), zero, d));
      });
}

Tensor all(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return ops::reduce(ReduceOp::all, a, dims, keepdim);
}
Tensor any(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return ops::reduce(ReduceOp::any, a, dims, keepdim);
}

Tensor cumsum(const Tensor& a_in, int64_t dim) {
  const Tensor a = autocast(a_in, AmpPolicy::fp32);
  Tensor out = ops::cumsum(a, dim);
  if (needs_grad(a)) {
    record(
        "CumsumBackward", {a}, {&out},
        [dim](const BackwardCtx& c) -> variable_list {
          // d/dx_i sum_{j >= i} g_j = total - inclusive cumsum + g
          const Tensor& g = c.grad();
          if (g.dim() == 0) return {g};
          Tensor total = sum(g, {dim}, true);
          return {add(sub(total, cumsum(g, dim)), g)};
        },
        DoubleBackward::supported);
  }
  return out;
}

// ---- Tensor methods ---------------------------------------------------------------------------

Tensor Tensor::sum() const {
  return sl::sum(*this);
}
Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const {
  return sl::sum(*this, dims, keepdim);
}
Tensor Tensor::mean() const {
  return sl::mean(*this);
}
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const {
  return sl::mean(*this, dims, keepdim);
}
Tensor Tensor::prod() const {
  return sl::prod(*this);
}
Tensor Tensor::prod(int64_t dim, bool keepdim) const {
  return sl::prod(*this, dim, keepdim);
}
Tensor Tensor::max() const {
  return sl::max(*this);
}
std::pair<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return sl::max(*this, dim, keepdim);
}
Tensor Tensor::min() const {
  return sl::min(*this);
}
std::pair<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return sl::min(*this, dim, keepdim);
}
Tensor Tensor::amax(const std::vector<int64_t>& dims, bool keepdim) const {
  return sl::amax(*this, dims, keepdim);
}
Tensor Tensor::amin(const std::vector<int64_t>& dims, bool keepdim) const {
  return sl::amin(*this, dims, keepdim);
}
Tensor Tensor::argmax() const {
  return sl::argmax(*this);
}
Tensor Tensor::argmax(int64_t dim, bool keepdim) const {
  return sl::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin() const {
  return sl::argmin(*this);
}
Tensor Tensor::argmin(int64_t dim, bool keepdim) const {
  return sl::argmin(*this, dim, keepdim);
}
Tensor Tensor::var(const std::vector<int64_t>& dims, int64_t correction, bool keepdim) const {
  return sl::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(const std::vector<int64_t>& dims, int64_t correction, bool keepdim) const {
  return sl::std(*this, dims, correction, keepdim);
}
Tensor Tensor::logsumexp(const std::vector<int64_t>& dims, bool keepdim) const {
  return sl::logsumexp(*this, dims, keepdim);
}
Tensor Tensor::norm(double p, const std::vector<int64_t>& dims, bool keepdim) const {
  return sl::norm(*this, p, dims, keepdim);
}
Tensor Tensor::all() const {
  return sl::all(*this);
}
Tensor Tensor::any() const {
  return sl::any(*this);
}
Tensor Tensor::cumsum(int64_t dim) const {
  return sl::cumsum(*this, dim);
}

}  // namespace sl
