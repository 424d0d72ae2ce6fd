// Differentiable convolutions, named and ordered as torch.nn.functional. Backward (input,
// weight, bias) is in autograd/ops/conv.cpp beside the forward; the kernels are the conv family
// (core/ops/conv.h). First-order gradients only: the backward is not itself differentiable.
#pragma once

#include "core/ops/conv.h"
#include "core/tensor.h"

namespace sl {

/// 2-d convolution (cross-correlation, as PyTorch).
///   input  [N, C, H, W] or unbatched [C, H, W]
///   weight [O, C / groups, kh, kw], bias [O] or undefined
///   stride, dilation: int or {h, w} (> 0); padding: int or {h, w} (>= 0), "same" (stride 1
///   only; odd extra padding goes at the end, as PyTorch) or "valid" (none)
/// Returns [N, O, Ho, Wo] (or [O, Ho, Wo]) with Ho = (H + 2 pad_h - dil_h (kh - 1) - 1) / s_h + 1.
/// Throws ShapeError (wrong ranks, C != weight.size(1) * groups, O not divisible by groups, bias
/// shape, a kernel dim of size 0, kernel larger than the padded input), ValueError (bad
/// stride/dilation/padding/groups), DTypeError (non-floating or mixed dtypes), DeviceError (mixed
/// devices).
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              ExpandingArray<2> stride = 1, const ConvPadding<2>& padding = 0,
              ExpandingArray<2> dilation = 1, int64_t groups = 1);

/// 1-d convolution: input [N, C, L] or [C, L], weight [O, C / groups, k], bias [O]; returns
/// [N, O, Lo] (or [O, Lo]). Same options and errors as conv2d, over one spatial dim.
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              ExpandingArray<1> stride = 1, const ConvPadding<1>& padding = 0,
              ExpandingArray<1> dilation = 1, int64_t groups = 1);

}  // namespace sl
