#include "core/ops/view.h"

#include <algorithm>

#include "core/ops/copy.h"

namespace sl::ops {

namespace {
Tensor make_view(const Tensor& t, Shape sizes, Shape strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(t.storage(), std::move(sizes), std::move(strides),
                                             offset, t.dtype()));
}
}  // namespace

Tensor as_strided(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset) {
  check_defined("as_strided", t);
  SL_CHECK_SHAPE(sizes.size() == strides.size(), "as_strided: ", sizes.size(), " sizes but ",
                 strides.size(), " strides");
  SL_CHECK_INDEX(offset >= 0, "as_strided: negative storage offset ", offset);
  int64_t max_index = offset;
  bool empty = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    SL_CHECK_SHAPE(sizes[i] >= 0, "as_strided: negative size ", sizes[i]);
    SL_CHECK_SHAPE(strides[i] >= 0, "as_strided: negative stride ", strides[i]);
    if (sizes[i] == 0) empty = true;
    else max_index += (sizes[i] - 1) * strides[i];
  }
  auto capacity = static_cast<int64_t>(t.storage()->nbytes() / t.element_size());
  SL_CHECK_INDEX(empty || max_index < capacity, "as_strided: view of sizes ", shape_str(sizes),
                 ", strides ", shape_str(strides), " and offset ", offset, " reaches element ",
                 max_index, " but the storage holds ", capacity);
  return make_view(t, sizes, strides, offset);
}

Tensor view(const Tensor& t, const Shape& shape) {
  check_defined("view", t);
  Shape s = infer_size(shape, t.numel(), "view");
  Shape st;
  SL_CHECK_SHAPE(compute_view_strides(t.sizes(), t.strides(), s, st), "view: size ",
                 shape_str(s), " is not compatible with the input's sizes ", shape_str(t.sizes()),
                 " and strides ", shape_str(t.strides()),
                 " (at least one dim spans two contiguous subspaces); use reshape instead");
  return make_view(t, s, st, t.storage_offset());
}

Tensor reshape(const Tensor& t, const Shape& shape) {
  check_defined("reshape", t);
  Shape s = infer_size(shape, t.numel(), "reshape");
  Shape st;
  if (compute_view_strides(t.sizes(), t.strides(), s, st)) {
    return make_view(t, s, st, t.storage_offset());
  }
  return view(contiguous(t, true), s);
}

Tensor permute(const Tensor& t, const std::vector<int64_t>& dims) {
  check_defined("permute", t);
  int64_t n = t.dim();
  SL_CHECK_SHAPE(static_cast<int64_t>(dims.size()) == n, "permute: got ", dims.size(),
                 " dims for a ", n, "-d tensor");
  std::vector<int64_t> w = wrap_dims(dims, n, "permute");
  Shape sizes(static_cast<size_t>(n)), strides(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    sizes[static_cast<size_t>(i)] = t.sizes()[static_cast<size_t>(w[static_cast<size_t>(i)])];
    strides[static_cast<size_t>(i)] = t.strides()[static_cast<size_t>(w[static_cast<size_t>(i)])];
  }
  return make_view(t, sizes, strides, t.storage_offset());
}

Tensor transpose(const Tensor& t, int64_t d0, int64_t d1) {
  check_defined("transpose", t);
  int64_t n = t.dim();
  if (n == 0) {
    wrap_dim(d0, n, "transpose");
    wrap_dim(d1, n, "transpose");
    return make_view(t, t.sizes(), t.strides(), t.storage_offset());
  }
  int64_t a = wrap_dim(d0, n, "transpose"), b = wrap_dim(d1, n, "transpose");
  Shape sizes = t.sizes(), strides = t.strides();
  std::swap(sizes[static_cast<size_t>(a)], sizes[static_cast<size_t>(b)]);
  std::swap(strides[static_cast<size_t>(a)], strides[static_cast<size_t>(b)]);
  return make_view(t, sizes, strides, t.storage_offset());
}

Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  check_defined("narrow", t);
  SL_CHECK_INDEX(t.dim() > 0, "narrow: cannot narrow a 0-d tensor");
  int64_t d = wrap_dim(dim, t.dim(), "narrow");
  int64_t size = t.sizes()[static_cast<size_t>(d)];
  if (start < 0 && start >= -size) start += size;
  SL_CHECK_INDEX(start >= 0 && length >= 0 && start <= size - length, "narrow: start ", start,
                 " and length ", length, " out of range for dim ", dim, " of size ", size);
  Shape sizes = t.sizes();
  sizes[static_cast<size_t>(d)] = length;
  return make_view(t, sizes, t.strides(),
                   t.storage_offset() + start * t.strides()[static_cast<size_t>(d)]);
}

Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step) {
  check_defined("slice", t);
  SL_CHECK_INDEX(t.dim() > 0, "slice: cannot slice a 0-d tensor");
  SL_CHECK(step > 0, "slice: step must be positive, got ", step);
  int64_t d = wrap_dim(dim, t.dim(), "slice");
  int64_t size = t.sizes()[static_cast<size_t>(d)];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape sizes = t.sizes(), strides = t.strides();
  sizes[static_cast<size_t>(d)] = (end - start + step - 1) / step;
  int64_t off = t.storage_offset() + start * strides[static_cast<size_t>(d)];
  strides[static_cast<size_t>(d)] *= step;
  return make_view(t, sizes, strides, off);
}

Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  check_defined("select", t);
  SL_CHECK_INDEX(t.dim() > 0, "select: cannot select from a 0-d tensor");
  int64_t d = wrap_dim(dim, t.dim(), "select");
  int64_t size = t.sizes()[static_cast<size_t>(d)];
  SL_CHECK_INDEX(index >= -size && index < size, "select: index ", index,
                 " out of range for dim ", dim, " of size ", size);
  if (index < 0) index += size;
  Shape sizes = t.sizes(), strides = t.strides();
  int64_t off = t.storage_offset() + index * strides[static_cast<size_t>(d)];
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return make_view(t, sizes, strides, off);
}

Tensor expand(const Tensor& t, const Shape& shape) {
  check_defined("expand", t);
  SL_CHECK_SHAPE(shape.size() >= t.sizes().size(), "expand: the number of sizes (",
                 shape.size(), ") must be at least the tensor's dims (", t.dim(), "), got ",
                 shape_str(shape), " for ", shape_str(t.sizes()));
  size_t lead = shape.size() - t.sizes().size();
  Shape sizes(shape.size()), strides(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      SL_CHECK_SHAPE(shape[i] >= 0, "expand: a new leading dim needs a size >= 0 (-1 is not ",
                     "allowed there), got ", shape_str(shape));
      sizes[i] = shape[i];
      strides[i] = 0;
      continue;
    }
    int64_t cur = t.sizes()[i - lead];
    int64_t want = shape[i] == -1 ? cur : shape[i];
    SL_CHECK_SHAPE(want >= 0, "expand: invalid size ", shape[i], " at dim ", i, "; target ",
                   shape_str(shape), ", tensor ", shape_str(t.sizes()));
    if (cur == want) {
      sizes[i] = cur;
      strides[i] = t.strides()[i - lead];
    } else {
      SL_CHECK_SHAPE(cur == 1, "expand: the expanded size (", want, ") must match the existing "
                     "size (", cur, ") at non-singleton dim ", i, "; target ", shape_str(shape),
                     ", tensor ", shape_str(t.sizes()));
      sizes[i] = want;
      strides[i] = 0;
    }
  }
  return make_view(t, sizes, strides, t.storage_offset());
}

Tensor squeeze(const Tensor& t) {
  check_defined("squeeze", t);
  Shape sizes, strides;
  for (size_t i = 0; i < t.sizes().size(); ++i) {
    if (t.sizes()[i] != 1) {
      sizes.push_back(t.sizes()[i]);
      strides.push_back(t.strides()[i]);
    }
  }
  return make_view(t, sizes, strides, t.storage_offset());
}

Tensor squeeze(const Tensor& t, int64_t dim) {
  check_defined("squeeze", t);
  if (t.dim() == 0) {
    wrap_dim(dim, 0, "squeeze");
    return make_view(t, t.sizes(), t.strides(), t.storage_offset());
  }
  int64_t d = wrap_dim(dim, t.dim(), "squeeze");
  if (t.sizes()[static_cast<size_t>(d)] != 1) {
    return make_view(t, t.sizes(), t.strides(), t.storage_offset());
  }
  Shape sizes = t.sizes(), strides = t.strides();
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return make_view(t, sizes, strides, t.storage_offset());
}

Tensor unsqueeze(const Tensor& t, int64_t dim) {
  check_defined("unsqueeze", t);
  int64_t d = wrap_dim(dim, t.dim() + 1, "unsqueeze");
  Shape sizes = t.sizes(), strides = t.strides();
  int64_t st = d < t.dim() ? sizes[static_cast<size_t>(d)] * strides[static_cast<size_t>(d)] : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, st);
  return make_view(t, sizes, strides, t.storage_offset());
}

Tensor flatten(const Tensor& t, int64_t start_dim, int64_t end_dim) {
  check_defined("flatten", t);
  if (t.dim() == 0) return reshape(t, {1});
  int64_t s = wrap_dim(start_dim, t.dim(), "flatten"), e = wrap_dim(end_dim, t.dim(), "flatten");
  SL_CHECK_INDEX(s <= e, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape sizes;
  for (int64_t i = 0; i < s; ++i) sizes.push_back(t.sizes()[static_cast<size_t>(i)]);
  int64_t prod = 1;
  for (int64_t i = s; i <= e; ++i) prod *= t.sizes()[static_cast<size_t>(i)];
  sizes.push_back(prod);
  for (int64_t i = e + 1; i < t.dim(); ++i) sizes.push_back(t.sizes()[static_cast<size_t>(i)]);
  return reshape(t, sizes);
}

Tensor unflatten(const Tensor& t, int64_t dim, const Shape& sizes) {
  check_defined("unflatten", t);
  int64_t d = wrap_dim(dim, t.dim(), "unflatten");
  SL_CHECK_SHAPE(!sizes.empty(), "unflatten: sizes must not be empty");
  Shape inner = infer_size(sizes, t.sizes()[static_cast<size_t>(d)], "unflatten");
  Shape out(t.sizes().begin(), t.sizes().begin() + d);
  out.insert(out.end(), inner.begin(), inner.end());
  out.insert(out.end(), t.sizes().begin() + d + 1, t.sizes().end());
  return view(t, out);
}

Tensor movedim(const Tensor& t, int64_t src, int64_t dst) {
  check_defined("movedim", t);
  int64_t n = t.dim();
  int64_t s = wrap_dim(src, n, "movedim"), d = wrap_dim(dst, n, "movedim");
  std::vector<int64_t> order;
  for (int64_t i = 0; i < n; ++i) {
    if (i != s) order.push_back(i);
  }
  if (n > 0) order.insert(order.begin() + d, s);
  return permute(t, order);
}

std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& dims) {
  std::vector<int64_t> inv(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inv[static_cast<size_t>(dims[i])] = static_cast<int64_t>(i);
  return inv;
}

}  // namespace sl::ops
