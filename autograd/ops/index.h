// Differentiable indexing ops (see core/ops/index.h for the kernels and Note [Index checks]).
// Index tensors are int64 or int32 (DTypeError otherwise) and every index must lie in
// [0, size) of what it indexes (IndexError naming the op and the bad value; thrown by the op, or
// for CUDA indices with sl::cuda::set_checked_indexing(false), at the next synchronisation).
// Gradients flow to the floating inputs, never to the indices.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace sl {

/// x's entries index[j] along dim: result sizes = x's with dim replaced by index.numel().
/// index is 1-d or 0-d. Backward: index_add of the gradient into zeros (repeats accumulate).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// self with alpha * src[.., j, ..] added at self[.., index[j], ..] along dim (out of place);
/// src has self's sizes except index.numel() along dim (a 0-d src counts as [1], as PyTorch);
/// dtypes must match.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                 Scalar alpha = 1);
/// torch.gather: out[p] = x[p with p[dim] = index[p]]; index has x's number of dims and
/// index.size(d) <= x.size(d) for d != dim (a 0-d x or index counts as 1-d of size 1; an
/// empty index is not checked, as PyTorch). Result has index's sizes.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// torch.scatter_add (out of place): a copy of self with src[p] added at
/// self[p with p[dim] = index[p]]; src and self share a dtype; src.size(d) >= index.size(d).
/// Shapes are checked as gather's (0-d counts as 1-d; an empty index returns a copy of self).
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
/// torch.scatter (out of place): as scatter_add but writing; with repeated indices the last
/// write along dim wins (deterministic). The gradient of an overwritten self element is 0.
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, Scalar value);
/// Rows of weight [num_embeddings, embedding_dim] for each entry of indices: result sizes
/// indices.sizes() + [embedding_dim]. The gradient is accumulated into weight's rows, except
/// row padding_idx (negative counts from the end), which receives no gradient. With
/// scale_grad_by_freq each entry's gradient is divided by how often its index occurs in
/// `indices` (torch.nn.functional.embedding's scale_grad_by_freq). max_norm is
/// embedding_renorm_ (autograd/ops/embedding_bag.h), applied by the caller first.
Tensor embedding(const Tensor& weight, const Tensor& indices,
                 std::optional<int64_t> padding_idx = std::nullopt,
                 bool scale_grad_by_freq = false);
/// int64 one-hot encoding: indices.sizes() + [num_classes]; -1 infers max(indices) + 1.
/// Throws IndexError for an index outside [0, num_classes). Not differentiable.
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);
/// 1-d tensor of x's elements where mask (bool) is true, x and mask broadcast together,
/// in row-major order.
Tensor masked_select(const Tensor& x, const Tensor& mask);

}  // namespace sl
