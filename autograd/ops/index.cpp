// Differentiable indexing ops with their backward beside them.
#include "autograd/ops/index.h"

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/shape.h"
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

// The backward formulas below call the recorded ops (sl::gather, ...) while a backward records a
// graph (create_graph, Note [Double backward] in autograd/engine.cpp) and their kernels otherwise:
// the same values either way. Every one of these ops is linear in its floating inputs, so its
// gradient is again one of them (gather <-> scatter_add, index_select <-> index_add).
bool graph() {
  return GradMode::is_enabled();
}

/// index_add(zeros(s), dim, index, g).
Tensor index_add_into_zeros(const Shape& s, int64_t dim, const Tensor& index, const Tensor& g) {
  Tensor z = zeros_of(s, g.dtype(), g.device());
  return graph() ? sl::index_add(z, dim, index, g) : ops::index_add(z, dim, index, g);
}

/// scatter(g, dim, index, 0): g with the overwritten positions zeroed.
Tensor zero_scattered(const Tensor& g, int64_t dim, const Tensor& index) {
  return graph() ? sl::scatter(g, dim, index, Scalar(0)) : ops::scatter(g, dim, index, Scalar(0));
}

/// gather(g, dim, index) placed in the leading index.sizes() block of zeros of src's shape.
Tensor gather_into(const Tensor& g, int64_t dim, const Tensor& index, const Shape& src_shape) {
  if (graph()) {
    Tensor part = sl::gather(g, dim, index);
    if (part.sizes() == src_shape) return part;
    if (src_shape.empty()) return part.reshape(src_shape);  // a 0-d src took one element
    for (int64_t k = 0; k < part.dim(); ++k) {  // zeros after the block, one dim at a time
      Shape rest = part.sizes();
      rest[static_cast<size_t>(k)] = src_shape[static_cast<size_t>(k)] - part.size(k);
      if (rest[static_cast<size_t>(k)] > 0) {
        part = sl::cat({part, zeros_of(rest, g.dtype(), g.device())}, k);
      }
    }
    return part;
  }
  Tensor part = ops::gather(g, dim, index);
  if (part.sizes() == src_shape) return part;
  Tensor full = zeros_of(src_shape, g.dtype(), g.device());
  // a 0-d src is [1] to an index of one element (Note [Gather shapes as PyTorch])
  Tensor dst = src_shape.empty() ? ops::view(full, {1}) : full;
  for (int64_t k = 0; k < part.dim(); ++k) dst = ops::narrow(dst, k, 0, part.size(k));
  ops::copy_(dst, part);
  return full;
}

/// 1 / (how often idx[j] occurs in idx) for each j, in dtype dt: [idx.numel(), 1].
Tensor inverse_frequency(const Tensor& idx, int64_t num_rows, DType dt) {
  // PyTorch's embedding_dense_backward: scale = 1.0 / count in double, applied in rows' dtype
  Tensor ones = ops::empty({idx.numel()}, DType::f64, idx.device());
  ops::fill_(ones, 1.0);
  Tensor counts = ops::index_add(zeros_of({num_rows}, DType::f64, idx.device()), 0, idx, ones);
  Tensor inv = ops::binary(BinaryOp::div, Scalar(1.0), ops::index_select(counts, 0, idx));
  return ops::unsqueeze(ops::cast(inv, dt), 1);
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = ops::index_select(x, dim, index);
  if (needs_grad(x)) {
    Shape s = x.sizes();
    SavedTensor si(index);
    record(
        "IndexSelectBackward", {x}, {&out},
        [s, si, dim](const BackwardCtx& c) -> variable_list {
          return {index_add_into_zeros(s, dim, si.unpack("IndexSelectBackward"), c.grad())};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                 Scalar alpha) {
  Tensor out = ops::index_add(self, dim, index, src, alpha);
  if (needs_grad(self, src)) {
    SavedTensor si(index);
    Shape src_shape = src.sizes();
    record(
        "IndexAddBackward", {self, src}, {&out},
        [si, dim, alpha, src_shape](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor gsrc;
          if (c.needs(1)) {
            Tensor idx = si.unpack("IndexAddBackward");
            gsrc = graph() ? sl::index_select(g, dim, idx) : ops::index_select(g, dim, idx);
            // a 0-d source (or self) took the selected elements' place one for one
            if (gsrc.sizes() != src_shape) gsrc = grad_reshape(gsrc, src_shape);
            if (alpha.to_double() != 1.0) {
              gsrc = graph() ? gsrc * alpha : ops::binary(BinaryOp::mul, gsrc, alpha);
            }
          }
          return {c.needs(0) ? g : Tensor(), gsrc};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = ops::gather(x, dim, index);
  if (needs_grad(x)) {
    Shape s = x.sizes();
    SavedTensor si(index);
    record(
        "GatherBackward", {x}, {&out},
        [s, si, dim](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor z = zeros_of(s, g.dtype(), g.device()), idx = si.unpack("GatherBackward");
          return {graph() ? sl::scatter_add(z, dim, idx, g) : ops::scatter_add(z, dim, idx, g)};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = ops::scatter_add(self, dim, index, src);
  if (needs_grad(self, src)) {
    SavedTensor si(index);
    Shape ss = src.sizes();
    record(
        "ScatterAddBackward", {self, src}, {&out},
        [si, ss, dim](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor gsrc;
          if (c.needs(1)) gsrc = gather_into(g, dim, si.unpack("ScatterAddBackward"), ss);
          return {c.needs(0) ? g : Tensor(), gsrc};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = ops::scatter(self, dim, index, src);
  if (needs_grad(self, src)) {
    SavedTensor si(index);
    Shape ss = src.sizes();
    record(
        "ScatterBackward", {self, src}, {&out},
        [si, ss, dim](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor idx = si.unpack("ScatterBackward");
          Tensor gself, gsrc;
          if (c.needs(0)) gself = zero_scattered(g, dim, idx);
          if (c.needs(1)) gsrc = gather_into(g, dim, idx, ss);
          return {gself, gsrc};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, Scalar value) {
  Tensor out = ops::scatter(self, dim, index, value);
  if (needs_grad(self)) {
    SavedTensor si(index);
    record(
        "ScatterBackward", {self}, {&out},
        [si, dim](const BackwardCtx& c) -> variable_list {
          return {zero_scattered(c.grad(), dim, si.unpack("ScatterBackward"))};
        },
        DoubleBackward::supported);
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
    record(
        "EmbeddingBackward", {weight}, {&out},
        [ws, si, skip, scale_grad_by_freq](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor idx = ops::contiguous(ops::reshape(si.unpack("EmbeddingBackward"), {-1}));
          if (idx.dtype() != DType::i64) idx = ops::cast(idx, DType::i64);
          Tensor rows = grad_reshape(g, {idx.numel(), ws[1]});
          if (!graph()) {
            if (scale_grad_by_freq) {
              rows = ops::binary(BinaryOp::mul, rows, inverse_frequency(idx, ws[0], g.dtype()));
            }
            return {ops::index_add(zeros_of(ws, g.dtype(), g.device()), 0, idx, rows, 1, skip)};
          }
          if (scale_grad_by_freq) rows = rows * inverse_frequency(idx, ws[0], g.dtype());
          // the padding row's entries contribute nothing, as the kernel's skip does
          if (skip >= 0) rows = rows.masked_fill(ops::unsqueeze(idx.eq(skip), 1), 0);
          return {index_add_into_zeros(ws, 0, idx, rows)};
        },
        DoubleBackward::supported);
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
    record(
        "MaskedSelectBackward", {x}, {&out},
        [s, sm](const BackwardCtx& c) -> variable_list {
          Tensor m = sm.unpack("MaskedSelectBackward");
          Shape shape = broadcast_shapes(s, m.sizes(), "masked_select");
          Tensor pos = ops::nonzero_flat(ops::expand(m, shape));
          Tensor flat = index_add_into_zeros({shape_numel(shape)}, 0, pos, c.grad());
          return {sum_to(grad_reshape(flat, shape), s)};
        },
        DoubleBackward::supported);
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
