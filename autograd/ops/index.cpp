// Differentiable indexing ops with their backward beside them.
#include "autograd/ops/index.h"

#include "autograd/function.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/index.h"
#include "core/ops/view.h"

namespace sl {

namespace {
Tensor zeros_of(const Shape& s, DType dt, Device dev) {
  Tensor z = ops::empty(s, dt, dev);
  ops::fill_(z, 0);
  return z;
}

/// gather(g, dim, index) placed in the leading index.sizes() block of zeros of src's shape.
Tensor gather_into(const Tensor& g, int64_t dim, const Tensor& index, const Shape& src_shape) {
  Tensor part = ops::gather(g, dim, index);
  if (part.sizes() == src_shape) return part;
  Tensor full = zeros_of(src_shape, g.dtype(), g.device());
  // a 0-d src is [1] to an index of one element (Note [Gather shapes as PyTorch])
  Tensor dst = src_shape.empty() ? ops::view(full, {1}) : full;
  for (int64_t k = 0; k < part.dim(); ++k) dst = ops::narrow(dst, k, 0, part.size(k));
  ops::copy_(dst, part);
  return full;
}

/// rows [k, D] of an embedding's gradient, entry j divided by how often idx[j] occurs in idx.
Tensor scale_rows_by_freq(const Tensor& rows, const Tensor& idx, int64_t num_rows) {
  // PyTorch's embedding_dense_backward: scale = 1.0 / count in double, applied in rows' dtype
  Tensor ones = ops::empty({idx.numel()}, DType::f64, rows.device());
  ops::fill_(ones, 1.0);
  Tensor counts = ops::index_add(zeros_of({num_rows}, DType::f64, rows.device()), 0, idx, ones);
  Tensor inv = ops::binary(BinaryOp::div, Scalar(1.0), ops::index_select(counts, 0, idx));
  return ops::binary(BinaryOp::mul, rows, ops::unsqueeze(ops::cast(inv, rows.dtype()), 1));
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = ops::index_select(x, dim, index);
  if (needs_grad(x)) {
    Shape s = x.sizes();
    SavedTensor si(index);
    record("IndexSelectBackward", {x}, {&out}, [s, si, dim](const BackwardCtx& c) -> variable_list {
      const Tensor& g = c.grad();
      return {ops::index_add(zeros_of(s, g.dtype(), g.device()), dim,
                             si.unpack("IndexSelectBackward"), g)};
    });
  }
  return out;
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                 Scalar alpha) {
  Tensor out = ops::index_add(self, dim, index, src, alpha);
  if (needs_grad(self, src)) {
    SavedTensor si(index);
    Shape src_shape = src.sizes();
    record("IndexAddBackward", {self, src}, {&out},
           [si, dim, alpha, src_shape](const BackwardCtx& c) -> variable_list {
             const Tensor& g = c.grad();
             Tensor gsrc;
             if (c.needs(1)) {
               gsrc = ops::index_select(g, dim, si.unpack("IndexAddBackward"));
               // a 0-d source (or self) took the selected elements' place one for one
               if (gsrc.sizes() != src_shape) gsrc = ops::reshape(gsrc, src_shape);
               if (alpha.to_double() != 1.0) gsrc = ops::binary(BinaryOp::mul, gsrc, alpha);
             }
             return {c.needs(0) ? g : Tensor(), gsrc};
           });
  }
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = ops::gather(x, dim, index);
  if (needs_grad(x)) {
    Shape s = x.sizes();
    SavedTensor si(index);
    record("GatherBackward", {x}, {&out}, [s, si, dim](const BackwardCtx& c) -> variable_list {
      const Tensor& g = c.grad();
      return {ops::scatter_add(zeros_of(s, g.dtype(), g.device()), dim, si.unpack("GatherBackward"),
                               g)};
    });
  }
  return out;
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = ops::scatter_add(self, dim, index, src);
  if (needs_grad(self, src)) {
    SavedTensor si(index);
    Shape ss = src.sizes();
    record("ScatterAddBackward", {self, src}, {&out},
           [si, ss, dim](const BackwardCtx& c) -> variable_list {
             const Tensor& g = c.grad();
             Tensor gsrc;
             if (c.needs(1)) gsrc = gather_into(g, dim, si.unpack("ScatterAddBackward"), ss);
             return {c.needs(0) ? g : Tensor(), gsrc};
           });
  }
  return out;
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = ops::scatter(self, dim, index, src);
  if (needs_grad(self, src)) {
    SavedTensor si(index);
    Shape ss = src.sizes();
    record("ScatterBackward", {self, src}, {&out},
           [si, ss, dim](const BackwardCtx& c) -> variable_list {
             const Tensor& g = c.grad();
             Tensor idx = si.unpack("ScatterBackward");
             Tensor gself, gsrc;
             if (c.needs(0)) gself = ops::scatter(g, dim, idx, Scalar(0));
             if (c.needs(1)) gsrc = gather_into(g, dim, idx, ss);
             return {gself, gsrc};
           });
  }
  return out;
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, Scalar value) {
  Tensor out = ops::scatter(self, dim, index, value);
  if (needs_grad(self)) {
    SavedTensor si(index);
    record("ScatterBackward", {self}, {&out}, [si, dim](const BackwardCtx& c) -> variable_list {
      return {ops::scatter(c.grad(), dim, si.unpack("ScatterBackward"), Scalar(0))};
    });
  }
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx,
                 bool scale_grad_by_freq) {
  Tensor out = ops::embedding(weight, indices);
  int64_t skip = -1;
  if (padding_idx) {
    int64_t n = weight.size(0);
    SL_CHECK_INDEX(*padding_idx >= -n && *padding_idx < n, "embedding: padding_idx ", *padding_idx,
                   " is out of range for a weight with ", n, " rows");
    skip = *padding_idx < 0 ? *padding_idx + n : *padding_idx;
  }
  if (needs_grad(weight)) {
    Shape ws = weight.sizes();
    SavedTensor si(indices);
    record("EmbeddingBackward", {weight}, {&out},
           [ws, si, skip, scale_grad_by_freq](const BackwardCtx& c) -> variable_list {
             const Tensor& g = c.grad();
             Tensor idx = ops::contiguous(ops::reshape(si.unpack("EmbeddingBackward"), {-1}));
             if (idx.dtype() != DType::i64) idx = ops::cast(idx, DType::i64);
             Tensor rows = ops::reshape(g, {idx.numel(), ws[1]});
             if (scale_grad_by_freq) rows = scale_rows_by_freq(rows, idx, ws[0]);
             return {ops::index_add(zeros_of(ws, g.dtype(), g.device()), 0, idx, rows, 1, skip)};
           });
  }
  return out;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  return ops::one_hot(indices, num_classes);
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  Tensor out = ops::masked_select(x, mask);
  if (needs_grad(x)) {
    Shape s = x.sizes();
    SavedTensor sm(mask);
    record("MaskedSelectBackward", {x}, {&out}, [s, sm](const BackwardCtx& c) -> variable_list {
      const Tensor& g = c.grad();
      Tensor m = sm.unpack("MaskedSelectBackward");
      Shape shape = broadcast_shapes(s, m.sizes(), "masked_select");
      Tensor pos = ops::nonzero_flat(ops::expand(m, shape));
      Tensor flat =
          ops::index_add(zeros_of({shape_numel(shape)}, g.dtype(), g.device()), 0, pos, g);
      return {sum_to(ops::view(flat, shape), s)};
    });
  }
  return out;
}

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return sl::index_select(*this, dim, index);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return sl::gather(*this, dim, index);
}
Tensor Tensor::masked_select(const Tensor& mask) const {
  return sl::masked_select(*this, mask);
}

}  // namespace sl
