// Differentiable convolutions, named and ordered as torch.nn.functional. Backward (input,
// weight, bias) is in autograd/ops/conv.cpp beside the forward; the kernels are the conv family
// (core/ops/conv.h). Differentiable to any order (create_graph) w.r.t. input, weight and bias:
// Note [Conv double backward] in autograd/ops/conv.cpp.
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

/// 2-d transposed convolution ("deconvolution"), as torch.nn.functional.conv_transpose2d (same
/// argument order: groups before dilation). The gradient of conv2d w.r.t. its input, as a
/// layer (Note [Transposed convolution] in core/ops/conv.h).
///   input  [N, C_in, H, W] or unbatched [C_in, H, W]
///   weight [C_in, C_out / groups, kh, kw], bias [C_out] or undefined
///   stride, dilation: int or {h, w} (> 0); padding, output_padding: int or {h, w} (>= 0; ints
///   only: PyTorch has no "same" for transposed convolutions); output_padding must be smaller
///   than either stride or dilation, per dim
/// Returns [N, C_out, H_out, W_out] (or [C_out, H_out, W_out]) with
///   H_out = (H - 1) * stride_h - 2 * padding_h + dilation_h * (kh - 1) + output_padding_h + 1.
/// Throws ShapeError (wrong ranks, C_in != weight.size(0), weight.size(0) not divisible by
/// groups, bias shape, a kernel or input spatial dim of size 0, an output size < 1), ValueError
/// (bad stride/dilation/padding/output_padding/groups), DTypeError (non-floating or mixed
/// dtypes), DeviceError (mixed devices).
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        ExpandingArray<2> stride = 1, ExpandingArray<2> padding = 0,
                        ExpandingArray<2> output_padding = 0, int64_t groups = 1,
                        ExpandingArray<2> dilation = 1);

/// 1-d transposed convolution: input [N, C_in, L] or [C_in, L], weight [C_in, C_out / groups,
/// k], bias [C_out]; returns [N, C_out, L_out] (or [C_out, L_out]), L_out = (L - 1) * stride -
/// 2 * padding + dilation * (k - 1) + output_padding + 1. Same options (and argument order) and
/// errors as conv_transpose2d, over one spatial dim.
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        ExpandingArray<1> stride = 1, ExpandingArray<1> padding = 0,
                        ExpandingArray<1> output_padding = 0, int64_t groups = 1,
                        ExpandingArray<1> dilation = 1);

}  // namespace sl
