// Differentiable matrix products. All operands must share dtype and device (DTypeError /
// DeviceError otherwise); inner dims must agree (ShapeError).
#pragma once

#include "core/ops/matmul.h"
#include "core/tensor.h"

namespace sl {

/// torch.matmul: 1-d operands are promoted (and the added dim removed), batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
/// [M, K] @ [K, N].
Tensor mm(const Tensor& a, const Tensor& b);
/// [B, M, K] @ [B, K, N].
Tensor bmm(const Tensor& a, const Tensor& b);
/// beta * bias + alpha * a @ b.
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, Scalar beta = 1,
             Scalar alpha = 1);
/// x @ w^T + bias (bias may be undefined): x [..., in], w [out, in], bias [out].
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor());
/// act(linear(x, w, bias)) as one differentiable op: x [..., in], w [out, in], bias [out] (may be
/// undefined) -> [..., out], act one of relu, gelu (erf, PyTorch's approximate="none"),
/// gelu_tanh (Activation in core/ops/matmul.h). Values and gradients are those of linear then
/// relu/gelu: on the CPU the same ops, so the same bits; on CUDA one cuBLASLt GEMM applies the
/// bias and relu or tanh-gelu in its epilogue (erf-gelu: the bias epilogue, then the gelu
/// kernel), and the backward multiplies the incoming gradient by act' of the saved output (relu)
/// or pre-activation (gelus) before linear's backward. Autocast as linear (AmpPolicy::lower: the
/// activation runs in the lowered dtype, as relu/gelu after linear would). x and w must share a
/// floating dtype (DTypeError naming linear_act) and, with the bias, a device (DeviceError);
/// ShapeError naming linear_act for shapes that do not fit. A bias of another floating dtype is
/// promoted as linear does (then computed as the two ops).
Tensor linear_act(const Tensor& x, const Tensor& w, const Tensor& bias, Activation act);
/// Outer product of two 1-d tensors.
Tensor outer(const Tensor& a, const Tensor& b);
/// Dot product of two 1-d tensors (0-d result).
Tensor dot(const Tensor& a, const Tensor& b);

}  // namespace sl
