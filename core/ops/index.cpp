#include "core/ops/index.h"

#include "core/cuda/cuda_api.h"
#include "core/ops/copy.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/ops/view.h"

namespace sl {

SL_DEFINE_KERNEL(index_select_kernel,
                 void(const Tensor& out, const Tensor& in, const Tensor& index, const char* op));
SL_DEFINE_KERNEL(index_add_kernel, void(const Tensor& out, const Tensor& index, const Tensor& src,
                                        Scalar alpha, int64_t skip, const char* op));
SL_DEFINE_KERNEL(gather_kernel, void(const Tensor& out, const Tensor& in, int64_t dim,
                                     const Tensor& index, const char* op));
SL_DEFINE_KERNEL(scatter_kernel, void(const Tensor& out, int64_t dim, const Tensor& index,
                                      const Tensor& src, bool accumulate, const char* op));
SL_DEFINE_KERNEL(nonzero_flat_kernel, Tensor(const Tensor& mask));

namespace ops {

namespace {

std::string dim_desc(int64_t dim, int64_t size) {
  return detail::str_cat("dim ", dim, " of size ", size);
}

/// Size of dim d of t, treating a 0-d tensor as [1].
int64_t size_or_one(const Tensor& t, int64_t d) {
  return t.dim() == 0 ? 1 : t.size(d);
}

/// index_select on a contiguous 1-d int64 index that went through check_index (or is valid by
/// construction); `op` names the caller in a kernel's error record.
Tensor index_select_checked(const char* op, const Tensor& in, int64_t d, const Tensor& idx) {
  DimSplit s = split_at_dim(in.sizes(), d);
  int64_t k = idx.numel();
  Tensor out = empty({s.outer, k, s.inner}, in.dtype(), in.device());
  if (out.numel() > 0) {
    index_select_kernel(in.device().kind, out, view(contiguous(in), {s.outer, s.n, s.inner}), idx,
                        op);
  }
  Shape out_shape = in.sizes();
  if (in.dim() > 0) out_shape[static_cast<size_t>(d)] = k;
  return view(out, out_shape);
}

/// Note [Gather shapes as PyTorch]: gather and scatter check shapes as PyTorch 1.13 does:
///   - a 0-d operand counts as 1-d of size 1 (ATen's ensure_nonempty_dim / _size), so
///     gather(0-d x, 0, index [2]) gives [x, x] and gather(1-d x, 0, 0-d index) a 0-d result;
///   - an empty index skips the shape checks (only its dtype is checked): gather gives an empty
///     result of the index's shape, scatter a copy of self.
/// Both used to throw ShapeError ("index must have the same number of dims as the input").
/// The kernels see the 1-d views.
Tensor as_1d_if_0d(const Tensor& t) {
  return t.dim() == 0 ? view(t, {1}) : t;
}

/// Checks shared by gather and scatter: index has t's number of dims and fits inside t (and
/// inside src, when given) in every dim but `d`. Operands are already 1-d where they were 0-d.
void check_gather_shapes(const char* op, const Tensor& t, int64_t d, const Tensor& index,
                         const Tensor* src) {
  SL_CHECK_SHAPE(index.dim() == t.dim(), op, ": index must have the same number of dims as the ",
                 "input (", t.dim(), "), got index of shape ", shape_str(index.sizes()));
  for (int64_t k = 0; k < t.dim(); ++k) {
    SL_CHECK_SHAPE(k == d || index.size(k) <= t.size(k), op, ": index of shape ",
                   shape_str(index.sizes()), " is larger than the input of shape ",
                   shape_str(t.sizes()), " in dim ", k);
  }
  if (src) {
    SL_CHECK_SHAPE(src->dim() == index.dim(), op, ": src must have the same number of dims as ",
                   "index (", index.dim(), "), got src of shape ", shape_str(src->sizes()));
    for (int64_t k = 0; k < index.dim(); ++k) {
      SL_CHECK_SHAPE(index.size(k) <= src->size(k), op, ": index of shape ",
                     shape_str(index.sizes()), " is larger than src of shape ",
                     shape_str(src->sizes()), " in dim ", k);
    }
  }
}

Tensor scatter_impl(const char* op, const Tensor& self, int64_t dim, const Tensor& index,
                    const Tensor* src_tensor, Scalar value, bool accumulate) {
  check_defined(op, self);
  check_defined(op, index, "index");
  check_same_device(op, {&self, &index});
  if (src_tensor) {
    check_defined(op, *src_tensor, "src");
    check_same_device(op, {&self, src_tensor});
  }
  int64_t d = wrap_dim(dim, self.dim(), op);
  if (src_tensor) {
    SL_CHECK_DTYPE(src_tensor->dtype() == self.dtype(), op, ": self (", dtype_name(self.dtype()),
                   ") and src (", dtype_name(src_tensor->dtype()), ") must have the same dtype");
  }
  Tensor out = contiguous(self, /*force_copy=*/true);
  if (index.numel() == 0) {  // Note [Gather shapes as PyTorch]
    check_index(op, index, 0, "");
    return out;
  }
  const Tensor self1 = as_1d_if_0d(self), index1 = as_1d_if_0d(index);
  Tensor src1 = src_tensor ? as_1d_if_0d(*src_tensor) : Tensor();
  check_gather_shapes(op, self1, d, index1, src_tensor ? &src1 : nullptr);
  Tensor idx = contiguous(check_index(op, index1, self1.size(d), dim_desc(dim, self1.size(d))));
  Tensor src;
  if (src_tensor) {
    src = src1;
    for (int64_t k = 0; k < idx.dim(); ++k) src = narrow(src, k, 0, idx.size(k));
  } else {
    src = expand(scalar_tensor(value, self.dtype(), self.device(), op), idx.sizes());
  }
  scatter_kernel(self.device().kind, view(out, self1.sizes()), d, idx, src, accumulate, op);
  return out;
}

}  // namespace

bool index_checks_on_host(Device d) {
  return d.kind != DeviceKind::cuda || cuda::checked_indexing();
}

Tensor check_index(const char* op, const Tensor& index, int64_t size, const std::string& what) {
  check_defined(op, index, "index");
  SL_CHECK_DTYPE(index.dtype() == DType::i64 || index.dtype() == DType::i32, op,
                 ": index must be int64 or int32, got ", dtype_name(index.dtype()));
  Tensor idx = cast(index, DType::i64);
  if (idx.numel() == 0 || !index_checks_on_host(idx.device())) return idx;
  int64_t lo = reduce(ReduceOp::min, idx, {}, false).item<int64_t>();
  int64_t hi = reduce(ReduceOp::max, idx, {}, false).item<int64_t>();
  int64_t bad = lo < 0 ? lo : hi;
  SL_CHECK_INDEX(lo >= 0 && hi < size, op, ": index ", bad, " is out of range for ", what,
                 " (expected 0 <= index < ", size, ")");
  return idx;
}

Tensor index_select(const Tensor& in, int64_t dim, const Tensor& index) {
  check_defined("index_select", in);
  check_defined("index_select", index, "index");
  check_same_device("index_select", {&in, &index});
  SL_CHECK_SHAPE(index.dim() <= 1, "index_select: index must be 1-d or 0-d, got shape ",
                 shape_str(index.sizes()));
  int64_t d = wrap_dim(dim, in.dim(), "index_select");
  int64_t n = size_or_one(in, d);
  Tensor idx = check_index("index_select", index, n, dim_desc(dim, n));
  SL_CHECK_SHAPE(in.dim() > 0 || idx.numel() == 1,
                 "index_select: a 0-d input takes exactly one index, got ", idx.numel());
  return index_select_checked("index_select", in, d, contiguous(reshape(idx, {-1})));
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                 Scalar alpha, int64_t skip) {
  check_defined("index_add", self);
  check_defined("index_add", index, "index");
  check_defined("index_add", src, "source");
  check_same_device("index_add", {&self, &index, &src});
  SL_CHECK_DTYPE(self.dtype() == src.dtype(), "index_add: self (", dtype_name(self.dtype()),
                 ") and source (", dtype_name(src.dtype()), ") must have the same dtype");
  SL_CHECK_DTYPE(!is_bool(self.dtype()), "index_add: not supported for bool tensors");
  SL_CHECK_SHAPE(index.dim() <= 1, "index_add: index must be 1-d or 0-d, got shape ",
                 shape_str(index.sizes()));
  int64_t d = wrap_dim(dim, self.dim(), "index_add");
  int64_t n = size_or_one(self, d);
  Tensor idx = contiguous(reshape(check_index("index_add", index, n, dim_desc(dim, n)), {-1}));
  Shape want = self.sizes();
  if (self.dim() > 0) want[static_cast<size_t>(d)] = idx.numel();
  // a 0-d source counts as [1], as in PyTorch (zeros(3).index_add(0, tensor(1), tensor(2.)))
  const Shape src_shape = src.dim() == 0 ? Shape{1} : src.sizes();
  SL_CHECK_SHAPE(src_shape == want || (self.dim() == 0 && src.numel() == idx.numel()),
                 "index_add: source of shape ", shape_str(src.sizes()), " does not match ",
                 shape_str(want), " (self's shape with dim ", dim, " of size ", idx.numel(), ")");
  Tensor out = contiguous(self, /*force_copy=*/true);
  if (out.numel() == 0 || idx.numel() == 0) return out;
  DimSplit s = split_at_dim(self.sizes(), d);
  index_add_kernel(self.device().kind, view(out, {s.outer, s.n, s.inner}), idx,
                   reshape(contiguous(src), {s.outer, idx.numel(), s.inner}), alpha, skip,
                   "index_add");
  return out;
}

Tensor gather(const Tensor& in, int64_t dim, const Tensor& index) {
  check_defined("gather", in);
  check_defined("gather", index, "index");
  check_same_device("gather", {&in, &index});
  int64_t d = wrap_dim(dim, in.dim(), "gather");
  Tensor out = empty(index.sizes(), in.dtype(), in.device());
  if (index.numel() == 0) {  // Note [Gather shapes as PyTorch]
    check_index("gather", index, 0, "");
    return out;
  }
  // kernels see 0-d operands as [1] (so an unchecked CUDA index is still guarded)
  const Tensor in1 = as_1d_if_0d(in), index1 = as_1d_if_0d(index);
  check_gather_shapes("gather", in1, d, index1, nullptr);
  int64_t n = in1.size(d);
  Tensor idx = contiguous(check_index("gather", index1, n, dim_desc(dim, n)));
  gather_kernel(in.device().kind, view(out, idx.sizes()), in1, d, idx, "gather");
  return out;
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_impl("scatter", self, dim, index, &src, Scalar(), false);
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, Scalar value) {
  return scatter_impl("scatter", self, dim, index, nullptr, value, false);
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  SL_CHECK_DTYPE(!self.defined() || !is_bool(self.dtype()),
                 "scatter_add: not supported for bool tensors");
  return scatter_impl("scatter_add", self, dim, index, &src, Scalar(), true);
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  check_defined("embedding", weight, "weight");
  check_defined("embedding", indices, "indices");
  check_same_device("embedding", {&weight, &indices});
  SL_CHECK_SHAPE(weight.dim() == 2,
                 "embedding: weight must be 2-d [num_embeddings, embedding_dim], got shape ",
                 shape_str(weight.sizes()));
  Tensor idx = check_index("embedding", indices, weight.size(0),
                           detail::str_cat("a weight with ", weight.size(0), " rows"));
  Tensor rows = index_select_checked("embedding", weight, 0, contiguous(reshape(idx, {-1})));
  Shape out_shape = indices.sizes();
  out_shape.push_back(weight.size(1));
  return view(rows, out_shape);
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  check_defined("one_hot", indices, "indices");
  SL_CHECK_DTYPE(indices.dtype() == DType::i64 || indices.dtype() == DType::i32,
                 "one_hot: indices must be int64 or int32, got ", dtype_name(indices.dtype()));
  SL_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 or >= 0, got ", num_classes);
  if (num_classes == -1) {
    SL_CHECK(indices.numel() > 0,
             "one_hot: cannot infer the number of classes from an empty tensor");
    num_classes = reduce(ReduceOp::max, indices, {}, false).item<int64_t>() + 1;
  }
  Tensor idx = contiguous(
      check_index("one_hot", indices, num_classes, detail::str_cat("num_classes ", num_classes)));
  Shape out_shape = indices.sizes();
  out_shape.push_back(num_classes);
  Tensor out = empty(out_shape, DType::i64, indices.device());
  fill_(out, 0);
  if (out.numel() == 0) return out;
  Tensor pos = unsqueeze(idx, -1);
  Tensor one = expand(scalar_tensor(1, DType::i64, indices.device()), pos.sizes());
  scatter_kernel(indices.device().kind, out, out.dim() - 1, pos, one, false, "one_hot");
  return out;
}

Tensor nonzero_flat(const Tensor& mask) {
  check_defined("nonzero", mask, "mask");
  SL_CHECK_DTYPE(is_bool(mask.dtype()), "nonzero: mask must be bool, got ",
                 dtype_name(mask.dtype()));
  if (mask.numel() == 0) return empty({0}, DType::i64, mask.device());
  return nonzero_flat_kernel(mask.device().kind, contiguous(mask));
}

Tensor masked_select(const Tensor& in, const Tensor& mask) {
  check_defined("masked_select", in);
  check_defined("masked_select", mask, "mask");
  check_same_device("masked_select", {&in, &mask});
  SL_CHECK_DTYPE(is_bool(mask.dtype()), "masked_select: mask must be bool, got ",
                 dtype_name(mask.dtype()));
  Shape shape = broadcast_shapes(in.sizes(), mask.sizes(), "masked_select");
  Tensor pos = nonzero_flat(expand(mask, shape));
  return index_select_checked("masked_select", reshape(expand(in, shape), {-1}), 0, pos);
}

}  // namespace ops
}  // namespace sl
