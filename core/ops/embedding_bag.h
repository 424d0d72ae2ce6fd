// The embedding_bag family's kernel: the per-bag maximum of EmbeddingBag(mode="max"). The sum and
// mean modes are compositions of the index family (autograd/ops/embedding_bag.cpp); only the
// maximum with its argument needs a kernel of its own.
#pragma once

#include <cstdint>
#include <utility>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// For each bag b and column d: out[b, d] = max of rows[j, d] over the entries j in
/// [bounds[b], bounds[b + 1]) with index[j] != skip (skip < 0: none), and arg[b, d] = the first
/// such j holding it (a later entry replaces it only when strictly greater, as PyTorch 1.13's CPU
/// kernel; a NaN only wins as the first entry); a bag with no such entry gives out 0 and arg -1.
/// out [B, D] contiguous of rows' dtype, arg i64 [B, D] contiguous, rows contiguous [L, D],
/// bounds i64 contiguous [B + 1], index i64 contiguous [L]. Bounds are clamped into [0, L] and
/// each end to at least its start, so bad bounds never read out of range.
SL_DECLARE_KERNEL(embedding_bag_max_kernel,
                  void(const Tensor& out, const Tensor& arg, const Tensor& rows,
                       const Tensor& bounds, const Tensor& index, int64_t skip));

namespace ops {

/// Runs embedding_bag_max_kernel: rows [L, D] floating, bounds i64 [B + 1], index i64 [L], all
/// on one device; returns (out [B, D], arg i64 [B, D]). Not differentiable (the autograd op in
/// autograd/ops/embedding_bag.h records the backward).
std::pair<Tensor, Tensor> embedding_bag_max(const Tensor& rows, const Tensor& bounds,
                                            const Tensor& index, int64_t skip);

}  // namespace ops
}  // namespace sl
