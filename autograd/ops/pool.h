// Differentiable 2-d and 1-d pooling, named and ordered as torch.nn.functional; backward beside
// the forward in autograd/ops/pool.cpp (kernels: core/ops/pool.h). 2-d inputs are [N, C, H, W] or
// unbatched [C, H, W], 1-d ones [N, C, L] or unbatched [C, L]; outputs keep the leading dims.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "core/ops/pool.h"
#include "core/tensor.h"

namespace sl {

/// Max over windows of kernel_size; stride defaults (unset, `{}`) to kernel_size; padding
/// (implicit -inf, at most kernel_size / 2), dilation; ceil_mode rounds the output size up
/// (windows starting in the right/bottom padding are dropped, as PyTorch). The gradient goes to
/// the (first) maximum of each window. Throws ShapeError (rank, input too small for the
/// window), ValueError (bad kernel/stride/padding/dilation), DTypeError (non-floating).
Tensor max_pool2d(const Tensor& input, ExpandingArray<2> kernel_size, ExpandingArray<2> stride = {},
                  ExpandingArray<2> padding = 0, ExpandingArray<2> dilation = 1,
                  bool ceil_mode = false);
/// max_pool2d that also returns the indices (i64, flat h * W + w within each input plane), as
/// F.max_pool2d(..., return_indices=True). The indices are not differentiable.
std::pair<Tensor, Tensor> max_pool2d_with_indices(
    const Tensor& input, ExpandingArray<2> kernel_size, ExpandingArray<2> stride = {},
    ExpandingArray<2> padding = 0, ExpandingArray<2> dilation = 1, bool ceil_mode = false);
/// Window averages. count_include_pad: padded zeros count in the divisor; divisor_override
/// (> 0) replaces the divisor. Same geometry rules and errors as max_pool2d (no dilation).
Tensor avg_pool2d(const Tensor& input, ExpandingArray<2> kernel_size, ExpandingArray<2> stride = {},
                  ExpandingArray<2> padding = 0, bool ceil_mode = false,
                  bool count_include_pad = true, std::optional<int64_t> divisor_override = {});
/// Averages over adaptive windows so the output is output_size {Ho, Wo}: row oh covers input
/// rows [floor(oh H / Ho), ceil((oh + 1) H / Ho)). An output size of 0 gives an empty output
/// (and a zero gradient), as PyTorch's forward. Throws ShapeError for a bad rank or size
/// (negative output size, empty spatial input dim).
Tensor adaptive_avg_pool2d(const Tensor& input, ExpandingArray<2> output_size);
/// Max over the adaptive windows of adaptive_avg_pool2d, as F.adaptive_max_pool2d: output_size an
/// int or {Ho, Wo} whose entries may be None (std::nullopt: the input's size there). Input
/// [N, C, H, W] (N may be 0) or [C, H, W]; an output size of 0 gives an empty output (a zero
/// gradient; PyTorch's backward refuses it). The gradient goes to the (first) maximum of each
/// window; NaN propagates (the last NaN of a window wins). Throws ShapeError (rank, an empty
/// non-batch dim, a negative output size), DTypeError (non-floating), ValueError (unset size).
Tensor adaptive_max_pool2d(const Tensor& input, AdaptiveOutputSize<2> output_size);
/// adaptive_max_pool2d that also returns the indices (i64, flat h * W + w within each input
/// plane), as F.adaptive_max_pool2d(..., return_indices=True); they are not differentiable.
std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& input,
                                                           AdaptiveOutputSize<2> output_size);

// The 1-d ops are the 2-d ones over a height of 1 (as conv1d is conv2d), checked first in 1-d
// terms so that each error names the 1-d op and its own values.

/// Input [N, C, L] or [C, L] -> [N, C, Lo] or [C, Lo]: max over windows of kernel_size (stride
/// unset: kernel_size), implicit -inf padding (at most kernel_size / 2), dilation, ceil_mode as
/// max_pool2d. The gradient goes to the (first) maximum of each window. An output size of 0
/// gives an empty [..., C, 0] when no gradient is recorded, as PyTorch 1.13 (Note [Empty
/// max_pool1d] in autograd/ops/pool.cpp). Throws ShapeError (rank, empty L, an output size < 0,
/// or 0 when recording a gradient: PyTorch's max_pool2d and avg_pool1d throw there too),
/// ValueError (non-positive kernel/stride/dilation, padding out of [0, kernel_size / 2]),
/// DTypeError (non-floating).
Tensor max_pool1d(const Tensor& input, ExpandingArray<1> kernel_size, ExpandingArray<1> stride = {},
                  ExpandingArray<1> padding = 0, ExpandingArray<1> dilation = 1,
                  bool ceil_mode = false);
/// max_pool1d that also returns the indices (i64, positions in L), as
/// F.max_pool1d(..., return_indices=True). The indices are not differentiable. An output size
/// < 1 throws (ShapeError), as PyTorch.
std::pair<Tensor, Tensor> max_pool1d_with_indices(
    const Tensor& input, ExpandingArray<1> kernel_size, ExpandingArray<1> stride = {},
    ExpandingArray<1> padding = 0, ExpandingArray<1> dilation = 1, bool ceil_mode = false);
/// Window averages over L (F.avg_pool1d: no dilation, no divisor_override); count_include_pad:
/// padded zeros count in the divisor. Shapes and errors as max_pool1d (an output size < 1
/// throws, as PyTorch).
Tensor avg_pool1d(const Tensor& input, ExpandingArray<1> kernel_size, ExpandingArray<1> stride = {},
                  ExpandingArray<1> padding = 0, bool ceil_mode = false,
                  bool count_include_pad = true);
/// [N, C, L] or [C, L] -> [..., output_size]: output j averages input positions
/// [floor(j L / Lo), ceil((j + 1) L / Lo)). An output size of 0 gives an empty output, as
/// adaptive_avg_pool2d. Throws ShapeError (rank, empty L, negative output size), DTypeError.
Tensor adaptive_avg_pool1d(const Tensor& input, ExpandingArray<1> output_size);
/// [N, C, L] or [C, L] -> [..., output_size]: the max over the windows of adaptive_avg_pool1d,
/// PyTorch's tie and NaN rules as adaptive_max_pool2d. Throws ShapeError (rank, an empty dim other
/// than N, a negative output size), DTypeError (non-floating), ValueError (unset output_size).
Tensor adaptive_max_pool1d(const Tensor& input, ExpandingArray<1> output_size);
/// adaptive_max_pool1d that also returns the indices (i64, positions in L), as
/// F.adaptive_max_pool1d(..., return_indices=True); they are not differentiable.
std::pair<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& input,
                                                           ExpandingArray<1> output_size);

}  // namespace sl
