// The "sort" family: stable sort, argsort and top-k along one dim. Not differentiable (see
// autograd/ops/sort.h).
//
// Order: NaN counts as larger than every number (last in ascending order, first in
// descending), as in PyTorch. Sorting is stable: equal elements keep their input order, in both
// directions. topk orders by (value, then lower index first), so its result is deterministic
// even with ties, and it is always returned sorted.
#pragma once

#include <cstdint>
#include <utility>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// values/indices [outer, n, inner] (indices i64) = in [outer, n, inner] sorted along the middle
/// dim; all contiguous.
SL_DECLARE_KERNEL(sort_kernel, void(const Tensor& values, const Tensor& indices, const Tensor& in,
                                    bool descending));
/// values/indices [outer, k, inner]: the k largest (smallest) of each slice of in
/// [outer, n, inner], sorted; all contiguous, 0 <= k <= n.
SL_DECLARE_KERNEL(topk_kernel, void(const Tensor& values, const Tensor& indices, const Tensor& in,
                                    int64_t k, bool largest));

namespace ops {

/// (values, indices) of t sorted along dim (bool: false before true). Throws IndexError for a
/// bad dim.
std::pair<Tensor, Tensor> sort(const Tensor& t, int64_t dim, bool descending);
/// (values, indices) of the k largest (largest=false: smallest) elements along dim, sorted.
/// Throws IndexError unless 0 <= k <= size of dim, DTypeError for bool (as PyTorch). A 0-d t
/// counts as size 1 and gives 0-d results holding its element, for k = 0 too (as PyTorch 1.13).
std::pair<Tensor, Tensor> topk(const Tensor& t, int64_t k, int64_t dim, bool largest);

}  // namespace ops
}  // namespace sl
