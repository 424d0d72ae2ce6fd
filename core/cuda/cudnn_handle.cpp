// The per-device cuDNN handle and cuDNN's error reporting (moved from conv.cpp so the conv,
// pooling and batch-norm glue share one handle per device).
#include "core/cuda/cudnn_handle.h"

#include <array>
#include <mutex>

#include "core/cuda/runtime.h"

namespace sl::cuda {

namespace detail {
void throw_cudnn_error(cudnnStatus_t st, const char* call, const char* file, int line) {
  std::string msg = ::sl::detail::str_cat("cuDNN error ", cudnnGetErrorString(st), " in ", call,
                                          " at ", file, ":", line);
  if (st == CUDNN_STATUS_ALLOC_FAILED) throw OutOfMemoryError(msg);
  throw CudaError(msg);
}
}  // namespace detail

cudnnHandle_t cudnn_handle(int device) {
  static std::array<std::once_flag, kMaxDevicesPerKind> once;
  static std::array<cudnnHandle_t, kMaxDevicesPerKind> handles{};
  SL_CHECK_DEVICE(device >= 0 && device < raw_device_count(), "cudnn: device ", device,
                  " is not available");
  auto i = static_cast<size_t>(device);
  std::call_once(once[i], [&] {
    DeviceGuard g(device);
    CUDNN_CHECK(cudnnCreate(&handles[i]));
  });
  CUDNN_CHECK(cudnnSetStream(handles[i], compute_stream(device)));
  return handles[i];
}

}  // namespace sl::cuda
