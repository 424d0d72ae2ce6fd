// CUDA glue of the matmul family: batched GEMM through cuBLAS for float32 (TF32 only when
// sl::cuda::set_allow_tf32(true)), float64, float16 and bfloat16 (float32 accumulation), and a
// plain kernel for integers; a [M, K] @ [K, N] + bias [N] (linear, addmm) as one cuBLASLt call
// with the bias epilogue, and linear + tanh-gelu (linear_act) with the GELU epilogues.
//
// Note [GEMM accumulation]
// float16 and bfloat16 GEMMs accumulate in float32 (CUBLAS_COMPUTE_32F) and round once into the
// output, which is what the CUDA parity tolerances for 16-bit matmul assume. By default cuBLAS
// and cuBLASLt may still pick a split-K algorithm that adds its partial sums in the output type
// ("reduced precision reduction": PyTorch's allow_fp16/bf16_reduced_precision_reduction, on by
// default there); for a small M x N with a large K (a weight gradient, K = batch x tokens) the
// error then grows with K. Shardlight disallows it: the cuBLAS handle's math mode has
// CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION (core/cuda/runtime.cpp) and every cuBLASLt
// call restricts the reduction scheme to the compute type (or none). The cost is that the
// heuristic may choose a slower algorithm for such shapes.
//
// Row-major to column-major: cuBLAS computes column-major products, and a row-major [M, N]
// matrix is the column-major [N, M] matrix of its transpose, so out = a @ b is computed as
// out^T = b^T @ a^T: cuBLAS gets b first, m = N, n = M.
#include <climits>

#include "core/cuda/cuda_api.h"
#include "core/cuda/kernels.h"
#include "core/cuda/lt_rules.h"
#include "core/cuda/runtime.h"
#include "core/ops/copy.h"
#include "core/ops/matmul.h"
#include "core/ops/view.h"

namespace sl::cuda {
namespace {

cudaDataType_t cuda_dtype(DType dt) {
  switch (dt) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::f64:
      return CUDA_R_64F;
    case DType::f16:
      return CUDA_R_16F;
    case DType::bf16:
      return CUDA_R_16BF;
    default:
      break;
  }
  ::sl::detail::throw_error<DTypeError>("bmm: cuBLAS does not take ", dtype_name(dt));
}

int checked_int(int64_t v, const char* what) {
  SL_CHECK(v >= 0 && v <= INT_MAX, "bmm: ", what, " = ", v,
           " exceeds the 32-bit range cuBLAS accepts");
  return static_cast<int>(v);
}

void cublas_bmm(const Tensor& out, const Tensor& a_in, const Tensor& b_in, Scalar alpha,
                Scalar beta) {
  Tensor a = ops::blas_operand(a_in), b = ops::blas_operand(b_in);
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  BlasMatrix la = blas_matrix(M, K, a.stride(1), a.stride(2));
  BlasMatrix lb = blas_matrix(K, N, b.stride(1), b.stride(2));
  SL_ASSERT(la.ok && lb.ok);
  const DType dt = a.dtype();
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (dt == DType::f64) compute = CUBLAS_COMPUTE_64F;
  if (dt == DType::f32 && allow_tf32()) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  const double al = alpha.to_double(), be = beta.to_double();
  const float alf = static_cast<float>(al), bef = static_cast<float>(be);
  const void* alpha_p = dt == DType::f64 ? static_cast<const void*>(&al) : &alf;
  const void* beta_p = dt == DType::f64 ? static_cast<const void*>(&be) : &bef;
  const cudaDataType_t type = cuda_dtype(dt);

  const int device = out.device().index;
  DeviceGuard g(device);
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas_handle(device), lb.trans ? CUBLAS_OP_T : CUBLAS_OP_N,
      la.trans ? CUBLAS_OP_T : CUBLAS_OP_N, checked_int(N, "N"), checked_int(M, "M"),
      checked_int(K, "K"), alpha_p, b.data_ptr(), type, checked_int(lb.ld, "ldb"),
      static_cast<long long>(b.stride(0)), a.data_ptr(), type, checked_int(la.ld, "lda"),
      static_cast<long long>(a.stride(0)), beta_p, out.data_ptr(), type,
      checked_int(std::max<int64_t>(N, 1), "ldc"), static_cast<long long>(M * N),
      checked_int(batch, "batch"), compute, CUBLAS_GEMM_DEFAULT));
}

void bmm_cuda(const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha, Scalar beta) {
  const DType dt = a.dtype();
  if (is_floating(dt)) return cublas_bmm(out, a, b, alpha, beta);
  SL_CHECK_DTYPE(dt == DType::i32 || dt == DType::i64, "bmm: unsupported dtype ", dtype_name(dt));
  DeviceGuard g(out.device());
  launch_int_bmm(dt, a.data_ptr(), b.data_ptr(), out.data_ptr(), a.size(0), a.size(1), b.size(2),
                 a.size(2), a.stride(0), a.stride(1), a.stride(2), b.stride(0), b.stride(1),
                 b.stride(2), alpha.to_int(), beta.to_int(), compute_stream(out.device()));
}

/// Largest power of two (at most 256) dividing the address: the alignment cuBLASLt may assume.
uint32_t alignment_of(const void* p) {
  uint32_t a = 256;
  while (a > 1 && reinterpret_cast<uintptr_t>(p) % a != 0) a /= 2;
  return a;
}

/// The cuBLASLt descriptors of one call, destroyed with it.
struct LtCall {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  LtCall() = default;
  LtCall(const LtCall&) = delete;
  LtCall& operator=(const LtCall&) = delete;
  ~LtCall() {
    if (pref) (void)cublasLtMatmulPreferenceDestroy(pref);
    if (d) (void)cublasLtMatrixLayoutDestroy(d);
    if (b) (void)cublasLtMatrixLayoutDestroy(b);
    if (a) (void)cublasLtMatrixLayoutDestroy(a);
    if (op) (void)cublasLtMatmulDescDestroy(op);
  }
};

/// Workspace cuBLASLt may use per call: the device's persistent one (cublaslt_workspace).
constexpr uint64_t kLtWorkspaceBytes = kCublasLtWorkspaceBytes;

/// Where a cuBLASLt epilogue writes its auxiliary output (the pre-activation, for the GELU_AUX
/// epilogues): `ptr` with leading dimension `ld` elements, or nothing.
struct LtAux {
  void* ptr = nullptr;
  int64_t ld = 0;
};

/// out [M, N] = epilogue(a [M, K] @ b [K, N] (+ bias [N])) in one cuBLASLt call (f32 with TF32
/// as set_allow_tf32 says, f16, bf16; f32 accumulation); bias undefined for the epilogues
/// without one. Row-major to column-major as in cublas_bmm: Lt computes out^T [N, M] = b^T @ a^T,
/// whose rows are out's columns, so the epilogue's per-row bias is bias[n], and an aux matrix is
/// [N, M] column-major, i.e. row-major [M, ld]. Returns false (out untouched) for f64 or when
/// cuBLASLt offers no algorithm for this case.
bool lt_addmm_epilogue(const Tensor& out, const Tensor& a_in, const Tensor& b_in,
                       const Tensor& bias_in, cublasLtEpilogue_t epilogue, LtAux aux = {}) {
  const DType dt = out.dtype();
  if (dt != DType::f32 && dt != DType::f16 && dt != DType::bf16) return false;
  // Note [cuBLASLt epilogue limits]: degenerate or huge dimensions go to the caller's fallback
  if (!lt_epilogue_dims_ok(a_in.size(0), b_in.size(1), a_in.size(1))) return false;
  Tensor a = ops::blas_operand(ops::unsqueeze(a_in, 0));
  Tensor b = ops::blas_operand(ops::unsqueeze(b_in, 0));
  Tensor bias = bias_in.defined() ? ops::contiguous(bias_in) : Tensor();  // Lt wants it packed
  if (bias.defined() && !lt_bias_aligned(reinterpret_cast<uintptr_t>(bias.data_ptr()))) {
    bias = ops::contiguous(bias, /*force_copy=*/true);  // a fresh block is 512-byte aligned
  }
  const int64_t M = a.size(1), K = a.size(2), N = b.size(2);
  BlasMatrix la = blas_matrix(M, K, a.stride(1), a.stride(2));
  BlasMatrix lb = blas_matrix(K, N, b.stride(1), b.stride(2));
  SL_ASSERT(la.ok && lb.ok);
  const int device = out.device().index;
  DeviceGuard g(device);
  const cudaDataType_t type = cuda_dtype(dt);
  const cublasComputeType_t compute =
      dt == DType::f32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  LtCall c;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&c.op, compute, CUDA_R_32F));
  const cublasOperation_t ta = lb.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = la.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                              sizeof(epilogue)));
  if (bias.defined()) {
    const void* bias_ptr = bias.data_ptr();
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr,
                                                sizeof(bias_ptr)));
  }
  if (aux.ptr) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                &aux.ptr, sizeof(aux.ptr)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux.ld,
                                                sizeof(aux.ld)));
  }
  // Lt's A is b (stored [N, K] column-major, or [K, N] when transposed), its B is a.
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c.a, type, lb.trans ? K : N, lb.trans ? N : K, lb.ld));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c.b, type, la.trans ? M : K, la.trans ? K : M, la.ld));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c.d, type, N, M, N));
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&c.pref));
  const uint64_t ws_bytes = kLtWorkspaceBytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
  // float16/bfloat16: split-K partial sums added in float32 only (Note [GEMM accumulation])
  const uint32_t reduction =
      CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE | CUBLASLT_REDUCTION_SCHEME_NONE;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      c.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction, sizeof(reduction)));
  const uint32_t align_a = alignment_of(b.data_ptr()), align_b = alignment_of(a.data_ptr());
  const uint32_t align_d = alignment_of(out.data_ptr());
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d)));
  cublasLtHandle_t lt = cublaslt_handle(device);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt, c.op, c.a, c.b, c.d, c.d, c.pref, 1, &heuristic, &found);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) return false;  // the caller falls back
  // Not a tensor of the caching allocator: a transient 4 MiB in every linear would show in the
  // memory statistics' peak (the memory test's band, tests/cuda/test_cuda_optim.cpp).
  void* workspace = cublaslt_workspace(device);
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(lt, c.op, &one, b.data_ptr(), c.a, a.data_ptr(), c.b, &zero,
                              out.data_ptr(), c.d, out.data_ptr(), c.d, &heuristic.algo, workspace,
                              kLtWorkspaceBytes, compute_stream(device)));
  return true;
}

/// addmm_bias_kernel: CUBLASLT_EPILOGUE_BIAS.
bool lt_addmm_bias(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  return lt_addmm_epilogue(out, a, b, bias, CUBLASLT_EPILOGUE_BIAS);
}

/// Leading-dimension multiple (elements) cuBLASLt requires of a GELU_AUX pre-activation matrix.
constexpr int64_t kLtGeluAuxLdMultiple = 8;

/// addmm_act_kernel through the cuBLASLt epilogues whose activation is exactly ours:
///   relu:      declined: Lt documents its RELU epilogue as x := max(x, 0), without saying what
///              a NaN gives (an fmax-style max gives 0), where UnaryOp::relu and PyTorch keep the
///              NaN; the caller runs the BIAS epilogue, then the relu kernel.
///   gelu_tanh: GELU_BIAS / GELU (inference), GELU_AUX_BIAS / GELU_AUX when the backward needs
///              the pre-activation: cuBLASLt's GELU is the tanh approximation.
///   gelu:      declined: Lt has no erf GELU, so the caller runs the BIAS epilogue and then the
///              gelu kernel.
/// The pre-activation is stored in out's dtype with a leading dimension padded to a multiple of
/// 8 elements (Lt's rule for the GELU aux matrix) and returned as a [M, N] view of it.
AddmmActResult lt_addmm_act(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias,
                            Activation act, bool want_pre) {
  const bool has_bias = bias.defined();
  switch (act) {
    case Activation::relu:
      return {};
    case Activation::gelu_tanh: {
      if (!want_pre) {
        return {lt_addmm_epilogue(out, a, b, bias,
                                  has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU),
                Tensor()};
      }
      const int64_t M = out.size(0), N = out.size(1);
      const int64_t ld =
          (N + kLtGeluAuxLdMultiple - 1) / kLtGeluAuxLdMultiple * kLtGeluAuxLdMultiple;
      Tensor aux = ops::empty({M, ld}, out.dtype(), out.device());
      const cublasLtEpilogue_t epi =
          has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
      if (!lt_addmm_epilogue(out, a, b, bias, epi, LtAux{aux.data_ptr(), ld})) return {};
      return {true, ld == N ? aux : ops::narrow(aux, 1, 0, N)};
    }
    case Activation::gelu:
      return {};
  }
  return {};
}

SL_REGISTER_KERNEL(bmm_kernel, DeviceKind::cuda, &bmm_cuda);
SL_REGISTER_KERNEL(addmm_bias_kernel, DeviceKind::cuda, &lt_addmm_bias);
SL_REGISTER_KERNEL(addmm_act_kernel, DeviceKind::cuda, &lt_addmm_act);

}  // namespace
}  // namespace sl::cuda
