// The "conv" family: 2-d convolution (conv1d is conv2d over a height of 1), forward and
// backward. Not differentiable (see autograd/ops/conv.h).
//
// Note [Conv layout]
// Generic code hands kernels contiguous NCHW tensors: input [N, C, H, W], weight
// [O, C / groups, kh, kw], bias [O] (or undefined), output [N, O, Ho, Wo]. Padding may be
// asymmetric (pad_*_begin / pad_*_end), which is how "same" padding with an even dilated kernel
// is expressed (PyTorch puts the extra row/column at the end). Output sizes:
//   Ho = (H + pad_h_begin + pad_h_end - dilation_h * (kh - 1) - 1) / stride_h + 1
// Kernels may assume the geometry is valid (generic code checks it).
//
// Note [Transposed convolution]
// conv_transpose2d(x, W) is the input-gradient of the ordinary convolution (stride, padding,
// dilation, groups as given; weight W [C_in, C_out / groups, kh, kw] read as that convolution's
// [O, C / groups, kh, kw]) whose input has the transposed output's size and whose output has x's
// size. The forward is that convolution's backward-data pass, its input-gradient is that
// convolution's forward, its weight-gradient that convolution's backward-filter pass with the
// roles of input and grad_out taken by grad_y and x. output_padding adds rows at the end that
// the ordinary convolution's output-size formula maps back to x's size under the floor when
// output_padding < stride; when output_padding >= stride (allowed with dilation >
// output_padding) the formula gives floor(output_padding / stride) more rows than x has, so x
// is padded with that many zero rows (which contribute nothing) to keep every kernel call's
// sizes exactly consistent with the formula. Lives in autograd/ops/conv.cpp (the op) and
// core/ops/conv.cpp (conv_transpose2d_geometry).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// An int or D ints, like PyTorch's int-or-tuple arguments (LibTorch's ExpandingArray):
/// `2` means {2, 2}; `{2, 3}` gives each dim its own value. Default-constructed (`{}`) it is
/// unset, which the ops that accept it document (e.g. a pooling stride defaulting to the
/// kernel size).
template <size_t D>
struct ExpandingArray {
  std::array<int64_t, D> v{};
  bool set = false;

  ExpandingArray() = default;
  ExpandingArray(int64_t x) : set(true) { v.fill(x); }  // NOLINT: implicit like PyTorch's
  ExpandingArray(std::initializer_list<int64_t> xs);    // exactly 1 or D values
  int64_t operator[](size_t i) const { return v[i]; }
};

/// Convolution padding: an int or D ints, or the mode "same" (output size = input size; only
/// with stride 1) or "valid" (no padding), as torch.nn.functional.conv2d's `padding`.
template <size_t D>
struct ConvPadding {
  enum class Mode : uint8_t { explicit_, same, valid };
  Mode mode = Mode::explicit_;
  ExpandingArray<D> amount = ExpandingArray<D>(0);

  ConvPadding() = default;
  ConvPadding(int64_t x) : amount(x) {}  // NOLINT
  ConvPadding(std::initializer_list<int64_t> xs) : amount(xs) {}
  ConvPadding(ExpandingArray<D> a) : amount(a) {}  // NOLINT
  template <size_t N>
  ConvPadding(const char (&s)[N]) : ConvPadding(std::string(s)) {}  // NOLINT
  /// "same" or "valid"; anything else throws ValueError.
  explicit ConvPadding(const std::string& s);
};

/// Geometry of one 2-d convolution (Note [Conv layout]).
struct Conv2dGeometry {
  int64_t kh = 1, kw = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h_begin = 0, pad_h_end = 0, pad_w_begin = 0, pad_w_end = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  int64_t out_h = 0, out_w = 0;
};

/// out = conv2d(input, weight) + bias over contiguous NCHW tensors of one floating dtype
/// (f32/f64 on CPU); bias may be undefined.
SL_DECLARE_KERNEL(conv2d_forward_kernel,
                  void(const Tensor& out, const Tensor& input, const Tensor& weight,
                       const Tensor& bias, const Conv2dGeometry& g));
/// Gradients of conv2d: writes (overwrites) each defined output among grad_input (input's
/// shape), grad_weight (weight's shape) and grad_bias ([O]); undefined ones are skipped. All
/// contiguous, one dtype.
SL_DECLARE_KERNEL(conv2d_backward_kernel,
                  void(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                       const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                       const Conv2dGeometry& g));

/// Geometry of a transposed convolution (Note [Transposed convolution]): `conv` is the
/// ordinary convolution whose input-gradient it is (its input has the transposed output's size
/// out_h x out_w, its output x's size padded by `extra_h` / `extra_w` zero rows / columns).
struct ConvTranspose2dGeometry {
  Conv2dGeometry conv;
  int64_t out_h = 0, out_w = 0;
  int64_t extra_h = 0, extra_w = 0;
};

namespace ops {

/// Validates a conv2d call and computes its geometry. input is [N, C, H, W] (4-d), weight
/// [O, C / groups, kh, kw]. Throws ShapeError (ranks, channel mismatch, kernel larger than the
/// padded input), ValueError (non-positive stride/dilation/groups, negative padding, "same"
/// with stride > 1), DTypeError, DeviceError. `op` names the caller in messages.
Conv2dGeometry conv2d_geometry(const char* op, const Tensor& input, const Tensor& weight,
                               const Tensor& bias, ExpandingArray<2> stride,
                               const ConvPadding<2>& padding, ExpandingArray<2> dilation,
                               int64_t groups);

/// Validates a conv_transpose2d call and computes its geometry, as PyTorch 1.13 checks it.
/// input [N, C_in, H, W] (4-d), weight [C_in, C_out / groups, kh, kw], bias [C_out] or
/// undefined. Output sizes: H_out = (H - 1) * stride - 2 * padding + dilation * (kh - 1) +
/// output_padding + 1. Throws ShapeError (ranks, C_in not weight.size(0), weight.size(0) not
/// divisible by groups, bias shape, a kernel dim or an input spatial dim of size 0, an output
/// size < 1), ValueError (non-positive stride/dilation/groups, negative padding/output_padding,
/// output_padding not smaller than either stride or dilation), DTypeError, DeviceError. `op`
/// names the caller in messages.
ConvTranspose2dGeometry conv_transpose2d_geometry(const char* op, const Tensor& input,
                                                  const Tensor& weight, const Tensor& bias,
                                                  ExpandingArray<2> stride,
                                                  ExpandingArray<2> padding,
                                                  ExpandingArray<2> output_padding,
                                                  ExpandingArray<2> dilation, int64_t groups);
/// Forward over a 4-d input with a checked geometry; returns [N, O, Ho, Wo] in input's dtype.
/// 16-bit floats are computed in float32.
Tensor conv2d_forward(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const Conv2dGeometry& g);
/// Gradients w.r.t. input, weight and bias (each only when its flag is set; otherwise the
/// returned tensor is undefined).
std::array<Tensor, 3> conv2d_backward(const Tensor& grad_out, const Tensor& input,
                                      const Tensor& weight, const Conv2dGeometry& g,
                                      std::array<bool, 3> needs);

}  // namespace ops
}  // namespace sl
