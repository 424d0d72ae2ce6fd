// CUDNN_CHECK and the per-device cuDNN handle (internal header; only in builds with cuDNN).
#pragma once

#include <cudnn.h>

#include "core/cuda/check.h"

namespace sl::cuda {

namespace detail {
[[noreturn]] void throw_cudnn_error(cudnnStatus_t st, const char* call, const char* file, int line);
}  // namespace detail

/// The cuDNN handle of `device`, created on first use and bound to its compute stream.
cudnnHandle_t cudnn_handle(int device);

}  // namespace sl::cuda

#define CUDNN_CHECK(call)                                                             \
  do {                                                                                \
    cudnnStatus_t sl_cudnn_st_ = (call);                                              \
    if (sl_cudnn_st_ != CUDNN_STATUS_SUCCESS) [[unlikely]] {                          \
      ::sl::cuda::detail::throw_cudnn_error(sl_cudnn_st_, #call, __FILE__, __LINE__); \
    }                                                                                 \
  } while (0)
