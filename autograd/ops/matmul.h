// Differentiable matrix products. All operands must share dtype and device (DTypeError /
// DeviceError otherwise); inner dims must agree (ShapeError).
#pragma once

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
/// Outer product of two 1-d tensors.
Tensor outer(const Tensor& a, const Tensor& b);
/// Dot product of two 1-d tensors (0-d result).
Tensor dot(const Tensor& a, const Tensor& b);

}  // namespace sl
