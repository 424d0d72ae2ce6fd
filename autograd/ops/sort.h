// Differentiable sorting: stable sort, argsort, top-k (see core/ops/sort.h for the order:
// NaN is largest, ties keep input order). Gradients flow through the values to the positions
// they came from; indices are int64 and carry no gradient.
#pragma once

#include <cstdint>
#include <utility>

#include "core/tensor.h"

namespace sl {

/// (values, indices) of x sorted along dim, ascending unless `descending`; stable.
/// bool sorts false before true. Throws IndexError for a bad dim.
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
/// The indices of sort(x, dim, descending).
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
/// (values, indices) of the k largest (largest=false: smallest) elements along dim. The result
/// is always sorted (largest first, or smallest first), ties resolved by lower index; `sorted`
/// is accepted for PyTorch compatibility. Throws IndexError unless 0 <= k <= size of dim,
/// DTypeError for bool (as PyTorch). A 0-d x counts as size 1 and gives 0-d results holding its
/// element, for k = 0 too (as PyTorch 1.13).
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                               bool sorted = true);

}  // namespace sl
