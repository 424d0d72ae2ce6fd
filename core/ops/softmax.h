// The "softmax" family: softmax and log_softmax along one dim, and their backward kernels.
// Not differentiable (see autograd/ops/softmax.h).
//
// Both are computed stably (the maximum of each slice is subtracted before exp) and
// deterministically: each slice is reduced in a fixed order by one thread. A slice whose
// maximum is NaN gives NaN; a slice of all -inf gives NaN (0/0), as in PyTorch.
#pragma once

#include <cstdint>
#include <optional>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// out = softmax (log_softmax when `log`) of in along the middle dim; in and out are
/// contiguous [outer, n, inner] of the same floating dtype.
SL_DECLARE_KERNEL(softmax_kernel, void(const Tensor& out, const Tensor& in, bool log));
/// grad_in from grad_out and the forward output `out` (all contiguous [outer, n, inner], same
/// dtype): softmax: out * (g - sum(g * out)); log_softmax: g - exp(out) * sum(g).
SL_DECLARE_KERNEL(softmax_backward_kernel,
                  void(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, bool log));

namespace ops {

/// Softmax of t along dim; with `dtype`, t is first converted to it. The result has t's sizes.
/// Throws IndexError for a bad dim and DTypeError for a non-floating (result) dtype.
Tensor softmax(const Tensor& t, int64_t dim, bool log = false,
               std::optional<DType> dtype = std::nullopt);
/// The input gradient of softmax (log_softmax when `log`) given the output y and its gradient g
/// (same sizes and dtype).
Tensor softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, bool log);

}  // namespace ops
}  // namespace sl
