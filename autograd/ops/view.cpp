// Differentiable views and copies: the Tensor methods view, reshape, permute, ... declared in
// core/tensor.h. Every floating view is tracked with its base (Note [In-place on views]).
#include "core/ops/view.h"

#include <algorithm>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/index.h"
#include "autograd/ops/shape.h"
#include "autograd/view_tracking.h"
#include "core/creation.h"
#include "core/ops/copy.h"

namespace sl {

namespace {

/// Records a view op `out` of `a` whose gradient is fn(grad); `db` says whether fn uses
/// differentiable ops when grad mode is on.
template <class F>
Tensor view_result(const char* name, const Tensor& a, Tensor out, F fn,
                   DoubleBackward db = DoubleBackward::supported) {
  if (needs_grad(a)) {
    record(
        name, {a}, {&out}, [fn](const BackwardCtx& c) -> variable_list { return {fn(c.grad())}; },
        db);
  }
  detail::mark_view(out, a);
  return out;
}

Tensor reshape_back(const Tensor& a, Tensor out, const char* name) {
  Shape s = a.sizes();
  return view_result(name, a, std::move(out), [s](const Tensor& g) { return grad_reshape(g, s); });
}

/// Gradient of a slice-like view: zeros of the input's shape with g written into the view that
/// `make_view` selects. Under create_graph, a view of the contiguous block [start, start + n) of
/// dim d (narrow, a slice with step 1; select with g unsqueezed) has the differentiable form g
/// with zeros cat on both sides.
template <class MakeView>
Tensor scatter_back(const char* name, const Tensor& a, Tensor out, MakeView make_view, int64_t d,
                    int64_t start, bool unsqueeze = false) {
  Shape s = a.sizes();
  DType dt = a.dtype();
  Device dev = a.device();
  return view_result(
      name, a, std::move(out), [s, dt, dev, make_view, d, start, unsqueeze](const Tensor& g) {
        if (GradMode::is_enabled()) {
          Tensor gd = unsqueeze ? g.unsqueeze(d) : g;
          const int64_t n = gd.size(d), after = s[static_cast<size_t>(d)] - start - n;
          TensorList parts;
          auto zero_block = [&](int64_t len) {
            Shape z = gd.sizes();
            z[static_cast<size_t>(d)] = len;
            return zeros(z, {.dtype = dt, .device = dev});
          };
          if (start > 0) parts.push_back(zero_block(start));
          parts.push_back(gd);
          if (after > 0) parts.push_back(zero_block(after));
          return parts.size() == 1 ? gd : cat(parts, d);
        }
        Tensor gi = zeros(s, {.dtype = dt, .device = dev});
        ops::copy_(make_view(gi), g);
        return gi;
      });
}

}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  return reshape_back(*this, ops::view(*this, shape), "ViewBackward");
}

Tensor Tensor::reshape(const Shape& shape) const {
  Tensor out = ops::reshape(*this, shape);
  if (!out.is_same_storage(*this)) {
    // a copy was needed: not a view
    if (needs_grad(*this)) {
      Shape s = sizes();
      record(
          "ReshapeBackward", {*this}, {&out},
          [s](const BackwardCtx& c) -> variable_list { return {grad_reshape(c.grad(), s)}; },
          DoubleBackward::supported);
    }
    return out;
  }
  return reshape_back(*this, out, "ViewBackward");
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  Tensor out = ops::permute(*this, dims);
  std::vector<int64_t> inv = ops::inverse_permutation(wrap_dims(dims, dim(), "permute"));
  return view_result("PermuteBackward", *this, out, [inv](const Tensor& g) {
    return GradMode::is_enabled() ? g.permute(inv) : ops::permute(g, inv);
  });
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  return view_result(
      "TransposeBackward", *this, ops::transpose(*this, d0, d1), [d0, d1](const Tensor& g) {
        return GradMode::is_enabled() ? g.transpose(d0, d1) : ops::transpose(g, d0, d1);
      });
}

Tensor Tensor::t() const {
  SL_CHECK_SHAPE(dim() <= 2, "t: expects a tensor with <= 2 dims, got ", dim());
  return dim() < 2 ? view(sizes()) : transpose(0, 1);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  Tensor out = ops::narrow(*this, d, start, length);
  int64_t s0 = start < 0 ? start + size(d) : start;
  return scatter_back(
      "NarrowBackward", *this, out,
      [d, s0, length](const Tensor& gi) { return ops::narrow(gi, d, s0, length); },
      wrap_dim(d, dim(), "narrow"), s0);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  Tensor out = ops::slice(*this, d, start, end, step);  // checks d, step
  const int64_t wd = wrap_dim(d, dim(), "slice"), size = this->size(wd);
  // start and end normalised as ops::slice does
  const int64_t s0 = std::clamp<int64_t>(start < 0 ? start + size : start, 0, size);
  const int64_t e0 = std::clamp<int64_t>(end < 0 ? end + size : end, s0, size);
  auto make_view = [wd, s0, e0, step](const Tensor& gi) {
    return ops::slice(gi, wd, s0, e0, step);
  };
  if (step == 1) return scatter_back("SliceBackward", *this, out, make_view, wd, s0);
  // Under create_graph a stepped slice's gradient is index_add of g at s0, s0 + step, ...
  const Shape s = sizes();
  const int64_t n = out.size(wd);
  return view_result(
      "SliceBackward", *this, std::move(out), [s, wd, s0, n, step, make_view](const Tensor& g) {
        if (GradMode::is_enabled()) {
          Tensor idx = arange(s0, s0 + n * step, step, {.dtype = DType::i64, .device = g.device()});
          return index_add(zeros(s, {.dtype = g.dtype(), .device = g.device()}), wd, idx, g);
        }
        Tensor gi = zeros(s, {.dtype = g.dtype(), .device = g.device()});
        ops::copy_(make_view(gi), g);
        return gi;
      });
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  Tensor out = ops::select(*this, d, index);
  const int64_t wd = wrap_dim(d, dim(), "select");
  return scatter_back(
      "SelectBackward", *this, out,
      [d, index](const Tensor& gi) { return ops::select(gi, d, index); }, wd,
      index < 0 ? index + size(wd) : index, /*unsqueeze=*/true);
}

Tensor Tensor::expand(const Shape& shape) const {
  Shape s = sizes();
  return view_result("ExpandBackward", *this, ops::expand(*this, shape),
                     [s](const Tensor& g) { return sum_to(g, s); });
}

Tensor Tensor::squeeze() const {
  return reshape_back(*this, ops::squeeze(*this), "SqueezeBackward");
}
Tensor Tensor::squeeze(int64_t d) const {
  return reshape_back(*this, ops::squeeze(*this, d), "SqueezeBackward");
}
Tensor Tensor::unsqueeze(int64_t d) const {
  return reshape_back(*this, ops::unsqueeze(*this, d), "UnsqueezeBackward");
}
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  Tensor out = ops::flatten(*this, start_dim, end_dim);
  if (!out.is_same_storage(*this)) {
    return reshape(out.sizes());  // needed a copy: record as a reshape
  }
  return reshape_back(*this, out, "FlattenBackward");
}
Tensor Tensor::unflatten(int64_t d, const Shape& s) const {
  return reshape_back(*this, ops::unflatten(*this, d, s), "UnflattenBackward");
}
Tensor Tensor::movedim(int64_t src, int64_t dst) const {
  Tensor out = ops::movedim(*this, src, dst);
  int64_t n = dim();
  int64_t s = wrap_dim(src, n, "movedim"), d = wrap_dim(dst, n, "movedim");
  return view_result("MovedimBackward", *this, out, [s, d](const Tensor& g) {
    return GradMode::is_enabled() ? g.movedim(d, s) : ops::movedim(g, d, s);
  });
}

Tensor Tensor::as_strided(const Shape& sz, const Shape& st, int64_t offset) const {
  SL_CHECK_AUTOGRAD(!needs_grad(*this),
                    "as_strided: not differentiable; call it on a detached "
                    "tensor or under NoGradGuard");
  Tensor out = ops::as_strided(*this, sz, st, offset);
  detail::mark_view(out, *this);  // an alias of a buffer that a recorded copy_ may then fill
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = ops::contiguous(*this, /*force_copy=*/true);
  if (needs_grad(*this)) {
    record(
        "CloneBackward", {*this}, {&out},
        [](const BackwardCtx& c) -> variable_list { return {c.grad()}; },
        DoubleBackward::supported);
  }
  return out;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

}  // namespace sl
