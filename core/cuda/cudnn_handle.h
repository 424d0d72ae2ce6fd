// The per-device cuDNN handle shared by the cuDNN glue (conv, pooling, batch norm; internal
// header, only in builds with cuDNN).
#pragma once

#include "core/cuda/cudnn_check.h"

namespace sl::cuda {

/// The cuDNN handle of `device`, created on first use and bound to its compute stream on every
/// call (Note [CUDA streams and synchronisation]). Throws DeviceError when the device does not
/// exist, CudaError when cuDNN cannot create the handle.
cudnnHandle_t cudnn_handle(int device);

}  // namespace sl::cuda
