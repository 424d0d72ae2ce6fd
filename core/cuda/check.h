// Error checks for CUDA, cuBLAS and cuDNN calls (internal header of the CUDA backend).
//
// CUDA_CHECK(cudaMalloc(...)) throws sl::CudaError (a DeviceError) with the call's text, the
// error name and string, and file:line. Out-of-memory codes throw sl::OutOfMemoryError instead,
// so callers can catch one type for host and device allocation failures.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/error.h"

namespace sl {

/// A failed CUDA runtime or library call (message: call, error, file:line).
class CudaError : public DeviceError {
  using DeviceError::DeviceError;
};

namespace cuda::detail {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t st, const char* call, const char* file,
                                     int line);
const char* cublas_status_name(cublasStatus_t st);

}  // namespace cuda::detail
}  // namespace sl

#define CUDA_CHECK(call)                                                             \
  do {                                                                               \
    cudaError_t sl_cuda_err_ = (call);                                               \
    if (sl_cuda_err_ != cudaSuccess) [[unlikely]] {                                  \
      ::sl::cuda::detail::throw_cuda_error(sl_cuda_err_, #call, __FILE__, __LINE__); \
    }                                                                                \
  } while (0)

/// After a kernel launch: reports a bad launch configuration at the launch site.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(call)                                                              \
  do {                                                                                  \
    cublasStatus_t sl_cublas_st_ = (call);                                              \
    if (sl_cublas_st_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                          \
      ::sl::cuda::detail::throw_cublas_error(sl_cublas_st_, #call, __FILE__, __LINE__); \
    }                                                                                   \
  } while (0)
