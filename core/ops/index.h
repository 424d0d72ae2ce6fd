// The "index" family: gathering and scattering by integer indices (index_select, index_add,
// gather, scatter, scatter_add, embedding, one_hot) and by boolean masks (masked_select).
// Not differentiable (see autograd/ops/index.h).
//
// Note [Index checks]
// Generic code checks every index tensor before a kernel runs: its dtype must be int64 or int32
// (DTypeError otherwise), int32 indices are widened to int64, and every value must lie in
// [0, size) of the dim it indexes (IndexError naming the op, the offending value, the dim and its
// size). Negative indices are rejected, never wrapped. The range check reduces the index to its
// min and max and reads both to the host:
//   - CPU index tensors: two passes over the index, no synchronisation; always on.
//   - CUDA index tensors in checked mode (sl::cuda::checked_indexing(), the default): two
//     device-to-host reads, i.e. two synchronisations of the GPU per indexing op; the error is
//     thrown by the op itself.
//   - CUDA index tensors with sl::cuda::set_checked_indexing(false): no range check and no
//     synchronisation here. The CUDA kernels guard every index themselves (they do so in both
//     modes): an index outside [0, size) never reaches memory, the element that needs it is
//     skipped (gather / index_select / embedding write 0 there, the others leave the output
//     element unchanged), and the first bad index is thrown as an IndexError at the next
//     synchronisation point (Note [Unchecked indexing] in core/cuda/index_error.h). An index
//     that no output element uses (an op with an empty output) is not reported.
// Other host-side range checks of CUDA indices follow the same switch through
// index_checks_on_host: cross_entropy / nll_loss read their class targets back only in checked
// mode (otherwise their guarded gather reports a bad one, as "gather").
// Dtype, shape and device checks (host metadata) run in every mode. one_hot with num_classes
// -1 reads the index's max back in every mode (the result's shape needs it). Kernels that
// accumulate (index_add, scatter_add) walk each output line in index order on one thread, so
// results do not depend on the thread count even when indices repeat (the CUDA kernels may sort
// the index first to give each target's entries, still in index order, their own thread: Note
// [Sorted index_add] in core/cuda/index_plan.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

// Every kernel below takes `op`, the name of the user-facing op (a string literal: a CUDA kernel
// records the pointer for a bad index and the host prints it later, Note [Index checks]).

/// out [outer, k, inner] = in[:, index[j], :]; in contiguous [outer, n, inner], index i64 [k].
SL_DECLARE_KERNEL(index_select_kernel,
                  void(const Tensor& out, const Tensor& in, const Tensor& index, const char* op));
/// out[:, index[j], :] += alpha * src[:, j, :] for j in order, skipping j where index[j] ==
/// skip (skip < 0: none); out contiguous [outer, n, inner] updated in place, src contiguous
/// [outer, k, inner] of out's dtype, index i64 [k].
SL_DECLARE_KERNEL(index_add_kernel, void(const Tensor& out, const Tensor& index, const Tensor& src,
                                         Scalar alpha, int64_t skip, const char* op));
/// out = in[..., index[p], ...] along dim (torch.gather); out and index have the same sizes,
/// out contiguous, in any strides; index i64 contiguous.
SL_DECLARE_KERNEL(gather_kernel, void(const Tensor& out, const Tensor& in, int64_t dim,
                                      const Tensor& index, const char* op));
/// out[..., index[p], ...] (+)= src[p] along dim for every p of index's shape, in index order
/// along dim; out contiguous (updated in place), src of out's dtype with index's sizes (any
/// strides, may be expanded), index i64 contiguous.
SL_DECLARE_KERNEL(scatter_kernel, void(const Tensor& out, int64_t dim, const Tensor& index,
                                       const Tensor& src, bool accumulate, const char* op));
/// The flat (row-major) positions of the true elements of a contiguous bool tensor, as an i64
/// 1-d tensor on the same device, in increasing order.
SL_DECLARE_KERNEL(nonzero_flat_kernel, Tensor(const Tensor& mask));

namespace ops {

/// True when indices on device `d` are range-checked on the host before a kernel runs: always
/// on the CPU; on CUDA when sl::cuda::checked_indexing() (Note [Index checks]).
bool index_checks_on_host(Device d);

/// Throws per Note [Index checks]; returns the index as int64 (itself when already int64).
/// `size` is the length of what is indexed and `what` names it in the message ("dim 0 of size
/// 5"): "gather: index 7 is out of range for dim 0 of size 5 (expected 0 <= index < 5)". The
/// range check (and its two synchronisations on CUDA) is skipped when
/// !index_checks_on_host(index.device()); the dtype check is not.
Tensor check_index(const char* op, const Tensor& index, int64_t size, const std::string& what);

/// Picks index[j] along dim: the result has in's sizes with dim replaced by index.numel().
/// index is 1-d (or 0-d). Throws DTypeError / IndexError (Note [Index checks]).
Tensor index_select(const Tensor& in, int64_t dim, const Tensor& index);
/// self with alpha * src[.., j, ..] added at self[.., index[j], ..] along dim; src has self's
/// sizes except index.numel() along dim (a 0-d src counts as [1]). Rows equal to `skip` (>= 0)
/// are left untouched.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                 Scalar alpha = 1, int64_t skip = -1);
/// torch.gather: out[p] = in[p with p[dim] = index[p]]. index has in's number of dims and
/// index.size(d) <= in.size(d) for d != dim; the result has index's sizes. A 0-d operand counts
/// as 1-d of size 1 and an empty index skips the shape checks, as in PyTorch (Note [Gather
/// shapes as PyTorch] in core/ops/index.cpp).
Tensor gather(const Tensor& in, int64_t dim, const Tensor& index);
/// torch.scatter / scatter_add (out of place): a copy of self with src[p] written (added) at
/// self[p with p[dim] = index[p]]. src has at least index's sizes (only the leading part
/// index covers is used). With repeated indices scatter keeps the last write along dim. Shapes
/// are checked as gather's; an empty index gives a copy of self.
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, Scalar value);
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
/// Rows of weight [num, dim] for each index: the result has sizes indices.sizes() + [dim].
Tensor embedding(const Tensor& weight, const Tensor& indices);
/// One-hot int64 encoding: indices.sizes() + [num_classes]; num_classes = -1 means max + 1.
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);
/// 1-d tensor of in's elements where mask (bool) is true; in and mask broadcast together.
Tensor masked_select(const Tensor& in, const Tensor& mask);
/// Flat positions of the true elements of a bool tensor (any layout), int64 1-d.
Tensor nonzero_flat(const Tensor& mask);

}  // namespace ops
}  // namespace sl
