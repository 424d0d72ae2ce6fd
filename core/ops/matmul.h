// The "matmul" family: batched GEMM and everything built on it (mm, bmm, matmul with
// broadcasting, addmm, linear, outer, dot). Not differentiable (see autograd/ops/matmul.h).
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// out[p] = beta * out[p] + alpha * a[p] @ b[p] for p < B, with a [B, M, K], b [B, K, N] of any
/// strides (a batch stride may be 0) and out a contiguous [B, M, N]; all the same dtype. With
/// beta == 0, out's previous contents are ignored (NaN included).
SL_DECLARE_KERNEL(bmm_kernel, void(const Tensor& out, const Tensor& a, const Tensor& b,
                                   Scalar alpha, Scalar beta));
/// out = a @ b + bias for a [M, K], b [K, N], bias [N] (added to every row), out a contiguous
/// [M, N]; all one floating dtype, a and b in any strides. A backend registers it where a GEMM
/// can add the bias in its epilogue (cuBLASLt on CUDA); it returns false, leaving out untouched,
/// when it cannot take this case, and callers then multiply and add separately. Devices without
/// it (the CPU) always multiply and add.
SL_DECLARE_KERNEL(addmm_bias_kernel,
                  bool(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias));

/// How a row-major [rows, cols] matrix with element strides (s_row, s_col) is handed to a BLAS:
/// row-major with leading dim `ld` (trans false), or its transpose, column-major, with `ld`
/// (trans true). `ok` is false when neither stride is 1 and a copy is needed.
struct BlasMatrix {
  bool ok = false;
  bool trans = false;
  int64_t ld = 0;
};
BlasMatrix blas_matrix(int64_t rows, int64_t cols, int64_t s_row, int64_t s_col);

namespace ops {

/// [M, K] @ [K, N] -> [M, N]. Throws ShapeError / DTypeError / DeviceError.
Tensor mm(const Tensor& a, const Tensor& b);
/// [B, M, K] @ [B, K, N] -> [B, M, N].
Tensor bmm(const Tensor& a, const Tensor& b);
/// torch.matmul semantics: 1-d operands are promoted and the added dim removed; batch dims
/// broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
/// beta * bias + alpha * (a @ b), bias broadcast to [M, N].
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, Scalar beta = 1,
             Scalar alpha = 1);
/// x @ w^T + bias for x [..., in], w [out, in], bias [out] (optional).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias);
/// t [B, rows, cols] itself when each of its matrices has a layout a BLAS takes (blas_matrix),
/// else a contiguous copy: the operands the device GEMMs behind bmm_kernel multiply.
Tensor blas_operand(const Tensor& t);

}  // namespace ops
}  // namespace sl
