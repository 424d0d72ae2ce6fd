// CUDA glue of the matmul family: batched GEMM through cuBLAS for float32 (TF32 only when
// sl::cuda::set_allow_tf32(true)), float64, float16 and bfloat16 (float32 accumulation), and a
// plain kernel for integers.
//
// Row-major to column-major: cuBLAS computes column-major products, and a row-major [M, N]
// matrix is the column-major [N, M] matrix of its transpose, so out = a @ b is computed as
// out^T = b^T @ a^T: cuBLAS gets b first, m = N, n = M.
#include <climits>

#include "core/cuda/cuda_api.h"
#include "core/cuda/kernels.h"
#include "core/cuda/runtime.h"
#include "core/ops/copy.h"
#include "core/ops/matmul.h"

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

SL_REGISTER_KERNEL(bmm_kernel, DeviceKind::cuda, &bmm_cuda);

}  // namespace
}  // namespace sl::cuda
