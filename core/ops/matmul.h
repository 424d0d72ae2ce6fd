// The "matmul" family: batched GEMM and everything built on it (mm, bmm, matmul with
// broadcasting, addmm, linear, linear + activation, outer, dot). Not differentiable (see
// autograd/ops/matmul.h).
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

/// The activation linear_act applies after the GEMM and bias, with PyTorch's definitions.
enum class Activation : uint8_t {
  relu,       // x < 0 ? 0 : x (NaN stays NaN, as UnaryOp::relu and PyTorch)
  gelu,       // x * Phi(x), with erf (torch gelu, approximate="none")
  gelu_tanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate="tanh")
};
/// "relu", "gelu", "gelu_tanh".
const char* activation_name(Activation act);

/// What addmm_act_kernel reports: whether it took the case (`fused`; false leaves everything
/// untouched), and, when asked for (want_pre), the pre-activation a @ b + bias it stored for the
/// backward: a [M, N] tensor of out's dtype with unit column stride and a row stride of at least N
/// (the GEMM epilogue may pad its rows).
struct AddmmActResult {
  bool fused = false;
  Tensor pre;
};
/// out = act(a @ b + bias) for a [M, K], b [K, N], bias [N] or undefined (no bias), out a
/// contiguous [M, N]; all one floating dtype, a and b in any strides, M, K, N > 0. A backend
/// registers it where a GEMM epilogue applies the activation exactly as UnaryOp's (cuBLASLt's
/// tanh-GELU epilogues on CUDA: it declines Activation::gelu, whose erf Lt lacks, and relu, whose
/// epilogue is not documented to keep a NaN). Devices without it (the CPU) always run linear then
/// the activation.
SL_DECLARE_KERNEL(addmm_act_kernel,
                  AddmmActResult(const Tensor& out, const Tensor& a, const Tensor& b,
                                 const Tensor& bias, Activation act, bool want_pre));

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
/// The result of linear_act_forward: out = act(pre) with pre = x @ w^T + bias, and what the
/// backward of act reads (linear_act_backward): out itself for relu, the pre-activation for the
/// gelus (a [..., out] tensor that may have padded rows); `saved` is undefined unless asked for.
struct LinearActResult {
  Tensor out, saved;
};
/// act(linear(x, w, bias)) for x [..., in], w [out, in], bias [out] (optional): x, w and bias of
/// one floating dtype (DTypeError otherwise; the autograd linear_act handles a bias of another
/// dtype) on one device (DeviceError); ShapeError when the shapes do not fit, naming linear_act.
/// With a device's addmm_act_kernel the GEMM, bias and activation are one call; otherwise (the
/// CPU, erf-gelu on CUDA, or a case the kernel declines) it is exactly ops::linear then
/// ops::unary, the same bits as those two calls. `keep_saved` asks for `saved`.
LinearActResult linear_act_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                                   Activation act, bool keep_saved);
/// linear_act_forward(...).out.
Tensor linear_act(const Tensor& x, const Tensor& w, const Tensor& bias, Activation act);
/// The gradient of the pre-activation: grad * act'(pre), from grad [..., out] and `saved` as
/// linear_act_forward returned it (BinaryOp's relu/gelu/gelu_tanh backward helpers).
Tensor linear_act_backward(const Tensor& grad, const Tensor& saved, Activation act);
/// How many linear_act_forward calls a device's addmm_act_kernel took (fused) since the program
/// started, on every thread: a test hook telling the fused epilogue from the fallback.
int64_t linear_act_fused_count();
/// t [B, rows, cols] itself when each of its matrices has a layout a BLAS takes (blas_matrix),
/// else a contiguous copy: the operands the device GEMMs behind bmm_kernel multiply.
Tensor blas_operand(const Tensor& t);

}  // namespace ops
}  // namespace sl
