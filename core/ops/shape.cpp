#include "core/ops/shape.h"

#include <algorithm>

#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/index.h"
#include "core/ops/view.h"

namespace sl {

DimSplit split_at_dim(const Shape& sizes, int64_t dim) {
  DimSplit s;
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto d = static_cast<int64_t>(i);
    if (d < dim)
      s.outer *= sizes[i];
    else if (d == dim)
      s.n = sizes[i];
    else
      s.inner *= sizes[i];
  }
  return s;
}

namespace ops {

namespace {
/// PyTorch's legacy rule: a 1-d tensor of size 0 may be concatenated with anything.
bool is_legacy_empty(const Tensor& t) {
  return t.dim() == 1 && t.size(0) == 0;
}
}  // namespace

Tensor cat(const TensorList& ts, int64_t dim) {
  SL_CHECK(!ts.empty(), "cat: expected a non-empty list of tensors");
  const Tensor* ref = nullptr;
  DType dt = DType::b8;
  for (size_t i = 0; i < ts.size(); ++i) {
    check_defined("cat", ts[i], "tensor in the list");
    SL_CHECK_SHAPE(ts[i].dim() > 0, "cat: zero-dimensional tensor (at position ", i,
                   ") cannot be concatenated");
    SL_CHECK_DEVICE(ts[i].device() == ts[0].device(),
                    "cat: expected all tensors on the same device, got ", ts[0].device(),
                    " (tensor 0) and ", ts[i].device(), " (tensor ", i, ")");
    dt = i == 0 ? ts[i].dtype() : promote_types(dt, ts[i].dtype());
    if (!ref && !is_legacy_empty(ts[i])) ref = &ts[i];
  }
  if (!ref) return empty({0}, dt, ts[0].device());
  int64_t d = wrap_dim(dim, ref->dim(), "cat");
  Shape out_shape = ref->sizes();
  int64_t total = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    if (is_legacy_empty(t)) continue;
    bool ok = t.dim() == ref->dim();
    for (int64_t k = 0; ok && k < t.dim(); ++k) {
      ok = k == d || t.size(k) == ref->size(k);
    }
    SL_CHECK_SHAPE(ok, "cat: sizes of tensors must match except in dim ", dim, "; tensor ", i,
                   " has shape ", shape_str(t.sizes()), " but tensor ", ref - ts.data(),
                   " has shape ", shape_str(ref->sizes()));
    total += t.size(d);
  }
  out_shape[static_cast<size_t>(d)] = total;
  Tensor out = empty(out_shape, dt, ref->device());
  int64_t off = 0;
  for (const Tensor& t : ts) {
    if (is_legacy_empty(t)) continue;
    int64_t n = t.size(d);
    if (n > 0) copy_(narrow(out, d, off, n), t);
    off += n;
  }
  return out;
}

Tensor stack(const TensorList& ts, int64_t dim) {
  SL_CHECK(!ts.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < ts.size(); ++i) {
    check_defined("stack", ts[i], "tensor in the list");
    SL_CHECK_SHAPE(
        ts[i].sizes() == ts[0].sizes(), "stack: expects each tensor to be equal size, but got ",
        shape_str(ts[0].sizes()), " at entry 0 and ", shape_str(ts[i].sizes()), " at entry ", i);
  }
  int64_t d = wrap_dim(dim, ts[0].dim() + 1, "stack");
  TensorList parts;
  parts.reserve(ts.size());
  for (const Tensor& t : ts) parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}

std::vector<Tensor> split_with_sizes(const Tensor& t, const std::vector<int64_t>& sizes,
                                     int64_t dim) {
  check_defined("split", t);
  SL_CHECK_SHAPE(t.dim() > 0, "split: expects a tensor with at least 1 dim, got a 0-d tensor");
  int64_t d = wrap_dim(dim, t.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    SL_CHECK_SHAPE(s >= 0, "split: split sizes must be non-negative, got ", shape_str(sizes));
    total += s;
  }
  SL_CHECK_SHAPE(total == t.size(d), "split: split sizes ", shape_str(sizes), " add up to ", total,
                 " but dim ", dim, " of the input (shape ", shape_str(t.sizes()), ") has size ",
                 t.size(d));
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t off = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(t, d, off, s));
    off += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim) {
  check_defined("split", t);
  SL_CHECK_SHAPE(t.dim() > 0, "split: expects a tensor with at least 1 dim, got a 0-d tensor");
  int64_t n = t.size(dim);
  SL_CHECK(split_size > 0 || (split_size == 0 && n == 0),
           "split: split_size must be positive, got ", split_size, " for a dim of size ", n);
  std::vector<int64_t> sizes;
  if (n == 0) sizes.push_back(0);
  for (int64_t off = 0; off < n; off += split_size) sizes.push_back(std::min(split_size, n - off));
  return split_with_sizes(t, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim) {
  check_defined("chunk", t);
  SL_CHECK(chunks > 0, "chunk: number of chunks must be positive, got ", chunks);
  SL_CHECK_SHAPE(t.dim() > 0, "chunk: expects a tensor with at least 1 dim, got a 0-d tensor");
  int64_t n = t.size(dim);
  if (n == 0) return split_with_sizes(t, std::vector<int64_t>(static_cast<size_t>(chunks), 0), dim);
  return split(t, (n + chunks - 1) / chunks, dim);
}

namespace {
void check_pad_args(const Tensor& t, const std::vector<int64_t>& pads, const std::string& mode) {
  check_defined("pad", t);
  SL_CHECK(pads.size() % 2 == 0, "pad: the pad list must have an even length, got ", pads.size());
  SL_CHECK(static_cast<int64_t>(pads.size()) <= 2 * t.dim(), "pad: ", pads.size() / 2,
           " (left, right) pairs given for a ", t.dim(), "-d tensor");
  SL_CHECK(mode == "constant" || mode == "reflect" || mode == "replicate",
           "pad: mode must be 'constant', 'reflect' or 'replicate', got '", mode, "'");
}

/// Pair p of the pad list pads dim (ndim - 1 - p).
int64_t pad_dim(const Tensor& t, size_t p) {
  return t.dim() - 1 - static_cast<int64_t>(p);
}

/// Source position along a dim of length n for output position j in [-left, n + right).
int64_t pad_source_index(int64_t j, int64_t n, bool reflect) {
  if (reflect) {
    if (j < 0) return -j;
    if (j >= n) return 2 * (n - 1) - j;
    return j;
  }
  return std::clamp<int64_t>(j, 0, n - 1);
}
}  // namespace

std::vector<std::pair<int64_t, Tensor>> pad_index_maps(const Tensor& t,
                                                       const std::vector<int64_t>& pads,
                                                       const std::string& mode) {
  check_pad_args(t, pads, mode);
  SL_CHECK(mode != "constant", "pad: index maps exist only for reflect and replicate");
  bool reflect = mode == "reflect";
  std::vector<std::pair<int64_t, Tensor>> maps;
  for (size_t p = 0; p < pads.size() / 2; ++p) {
    int64_t d = pad_dim(t, p), l = pads[2 * p], r = pads[2 * p + 1], n = t.size(d);
    if (reflect) {
      SL_CHECK(l < n && r < n, "pad: reflect padding (", l, ", ", r,
               ") must be less than the size ", n, " of dim ", d);
    } else {
      SL_CHECK(n > 0 || (l == 0 && r == 0), "pad: replicate padding of a zero-size dim ", d);
    }
    if (l == 0 && r == 0) continue;
    // Note [Negative reflect/replicate pads]: a negative pad crops, as PyTorch's reflection_pad
    // and replication_pad do (F.pad(x, (-1, 1), mode="reflect") of [1, 2, 3] is [2, 3, 2]); the
    // map below already reads source positions [-l, n + r) and needs no other change. PyTorch
    // requires at least one output element.
    SL_CHECK(n + l + r >= 1, "pad: ", mode, " padding (", l, ", ", r, ") of dim ", d, " (size ", n,
             ") leaves ", n + l + r, " elements (expected at least 1)");
    Tensor idx = empty({n + l + r}, DType::i64, kCPU);
    auto* pi = idx.data_ptr<int64_t>();
    for (int64_t j = -l; j < n + r; ++j) pi[j + l] = pad_source_index(j, n, reflect);
    maps.emplace_back(d, to_device(idx, t.device()));
  }
  return maps;
}

Tensor pad(const Tensor& t, const std::vector<int64_t>& pads, const std::string& mode,
           Scalar value) {
  check_pad_args(t, pads, mode);
  if (mode != "constant") {
    Tensor out = t;
    for (const auto& [d, idx] : pad_index_maps(t, pads, mode)) out = index_select(out, d, idx);
    return out.is_same(t) ? contiguous(t, /*force_copy=*/true) : out;
  }
  const size_t npairs = pads.size() / 2;
  Shape out_shape = t.sizes();
  Tensor src = t;
  std::vector<std::pair<int64_t, int64_t>> dst_ranges;
  bool any_empty = false;  // some dim keeps no input element: the output is all `value`
  for (size_t p = 0; p < npairs; ++p) {
    int64_t d = pad_dim(t, p), l = pads[2 * p], r = pads[2 * p + 1], n = t.size(d);
    SL_CHECK(n + l + r >= 0, "pad: padding (", l, ", ", r, ") of dim ", d, " (size ", n,
             ") gives a negative size");
    out_shape[static_cast<size_t>(d)] = n + l + r;
    // Output position j holds input position j - l where 0 <= j - l < n: the outputs
    // [max(l, 0), min(n + l, n + l + r)). Note [Pad beyond the input]: that range may be empty
    // with its start past the output's end (n = 2 padded by (5, -4): 3 fill values), so an
    // empty range is not narrowed at all; the backward of pad(x, (-5, 4)) pads by (5, -4).
    int64_t dst_start = std::max<int64_t>(l, 0);
    int64_t keep = std::max<int64_t>(n + l + std::min<int64_t>(r, 0) - dst_start, 0);
    if (keep == 0) any_empty = true;
    src = keep == 0 ? src : narrow(src, d, dst_start - l, keep);
    dst_ranges.emplace_back(dst_start, keep);
  }
  Tensor out = empty(out_shape, t.dtype(), t.device());
  fill_(out, value);
  if (any_empty) return out;
  Tensor dst = out;
  for (size_t p = 0; p < npairs; ++p) {
    dst = narrow(dst, pad_dim(t, p), dst_ranges[p].first, dst_ranges[p].second);
  }
  if (dst.numel() > 0) copy_(dst, src);
  return out;
}

namespace {
Tensor triangle(const char* name, bool lower, const Tensor& t, int64_t diagonal) {
  check_defined(name, t);
  SL_CHECK_SHAPE(t.dim() >= 2, name, ": expects a tensor with at least 2 dims, got shape ",
                 shape_str(t.sizes()));
  int64_t rows = t.size(-2), cols = t.size(-1);
  TensorOptions o{.dtype = DType::i64, .device = t.device()};
  Tensor r = view(arange(Scalar(int64_t{0}), Scalar(rows), Scalar(int64_t{1}), o), {rows, 1});
  Tensor c = view(arange(Scalar(int64_t{0}), Scalar(cols), Scalar(int64_t{1}), o), {1, cols});
  Tensor offset = binary(BinaryOp::sub, c, r);  // col - row
  Tensor keep = binary(lower ? BinaryOp::le : BinaryOp::ge, offset, Scalar(diagonal));
  return where(keep, t, scalar_tensor(0, t.dtype(), t.device()));
}
}  // namespace

Tensor tril(const Tensor& t, int64_t diagonal) {
  return triangle("tril", true, t, diagonal);
}
Tensor triu(const Tensor& t, int64_t diagonal) {
  return triangle("triu", false, t, diagonal);
}

Tensor flip(const Tensor& t, const std::vector<int64_t>& dims) {
  check_defined("flip", t);
  std::vector<bool> mask(static_cast<size_t>(t.dim()), false);
  if (!dims.empty()) {
    for (int64_t d : wrap_dims(dims, t.dim(), "flip")) mask[static_cast<size_t>(d)] = true;
  }
  Tensor out = ops::empty_like(t);
  if (out.numel() == 0) return out;
  if (std::find(mask.begin(), mask.end(), true) == mask.end()) {
    copy_(out, t);
    return out;
  }
  // A view with the flipped dims' strides negated, copied by the device's strided copy kernel
  // (which takes signed byte strides on every device); the view never leaves this function.
  Shape strides = t.strides();
  int64_t offset = t.storage_offset();
  for (size_t d = 0; d < strides.size(); ++d) {
    if (!mask[d] || t.sizes()[d] <= 1) continue;
    offset += (t.sizes()[d] - 1) * strides[d];
    strides[d] = -strides[d];
  }
  Tensor reversed(std::make_shared<TensorImpl>(t.storage(), t.sizes(), strides, offset, t.dtype()));
  copy_kernel(t.device().kind, out, reversed);
  return out;
}

Tensor repeat(const Tensor& t, const Shape& repeats) {
  check_defined("repeat", t);
  SL_CHECK_SHAPE(static_cast<int64_t>(repeats.size()) >= t.dim(), "repeat: number of repeat dims (",
                 repeats.size(), ") can not be smaller than the number of dims of the tensor (",
                 t.dim(), ")");
  for (int64_t r : repeats) {
    SL_CHECK(r >= 0, "repeat: repeats must be non-negative, got ", shape_str(repeats));
  }
  size_t m = repeats.size(), lead = m - static_cast<size_t>(t.dim());
  Shape ones_shape, expanded, final_shape;
  for (size_t i = 0; i < m; ++i) {
    int64_t s = i < lead ? 1 : t.sizes()[i - lead];
    ones_shape.insert(ones_shape.end(), {1, s});
    expanded.insert(expanded.end(), {repeats[i], s});
    final_shape.push_back(repeats[i] * s);
  }
  Tensor e = expand(reshape(t, ones_shape), expanded);
  return reshape(contiguous(e, /*force_copy=*/true), final_shape);  // always a copy, as torch
}

}  // namespace ops
}  // namespace sl
