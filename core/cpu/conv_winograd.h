// Winograd F(2x2, 3x3) convolution on the CPU (internal header; core/cpu/conv_winograd.cpp).
#pragma once

#include "core/ops/conv.h"

namespace sl::cpu {

/// Whether the Winograd path runs this convolution: 3x3 kernel, stride 1, dilation 1, one group
/// (any padding, batch and size) with C input and O output channels, when the transformed
/// buffers of one image fit in 64M elements. The forward and the backward decide alike. (The
/// kernels handle groups; grouped convolutions are faster on im2col, see the .cpp.)
bool winograd_applies(const Conv2dGeometry& g, int64_t C, int64_t O);

/// out = conv2d(input, weight) + bias (Note [Conv layout]); f32 / f64, contiguous, bias may be
/// undefined. Same contract as conv2d_forward_kernel when winograd_applies.
template <class T>
void winograd_conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight,
                             const Tensor& bias, const Conv2dGeometry& g);

/// grad_input and grad_weight (each may be undefined; defined ones are overwritten) of
/// conv2d(input, weight) for grad_out, when winograd_applies; f32 / f64, contiguous.
template <class T>
void winograd_conv2d_backward(const Tensor& grad_input, const Tensor& grad_weight,
                              const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                              const Conv2dGeometry& g);

}  // namespace sl::cpu
