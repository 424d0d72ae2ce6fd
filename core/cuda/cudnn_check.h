// CUDNN_CHECK (internal header; only in builds with cuDNN). The per-device handle is in
// core/cuda/cudnn_handle.h.
#pragma once

#include <cudnn.h>

#include "core/cuda/check.h"

namespace sl::cuda::detail {
/// Throws OutOfMemoryError for CUDNN_STATUS_ALLOC_FAILED, else CudaError, naming the status, the
/// call and file:line.
[[noreturn]] void throw_cudnn_error(cudnnStatus_t st, const char* call, const char* file, int line);
}  // namespace sl::cuda::detail

#define CUDNN_CHECK(call)                                                             \
  do {                                                                                \
    cudnnStatus_t sl_cudnn_st_ = (call);                                              \
    if (sl_cudnn_st_ != CUDNN_STATUS_SUCCESS) [[unlikely]] {                          \
      ::sl::cuda::detail::throw_cudnn_error(sl_cudnn_st_, #call, __FILE__, __LINE__); \
    }                                                                                 \
  } while (0)
