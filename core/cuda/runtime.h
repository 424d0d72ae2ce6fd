// Per-device CUDA state of the backend (internal header): device count, the device guard, the
// compute stream, library handles and events. See Note [CUDA streams and synchronisation].
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "core/cuda/check.h"
#include "core/cuda/index_error.h"
#include "core/device.h"

namespace sl::cuda {

/// Visible GPUs, queried once (0 when the runtime reports no device or no driver).
int raw_device_count();

/// Makes `device` current for its scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  explicit DeviceGuard(Device d) : DeviceGuard(d.index) {}
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

/// The compute stream of `device` (the legacy default stream: it orders with every blocking
/// stream, so plain cudaMemcpy calls elsewhere stay safe; a communication stream created with
/// cudaStreamNonBlocking overlaps with it).
cudaStream_t compute_stream(int device);
inline cudaStream_t compute_stream(Device d) {
  return compute_stream(d.index);
}

/// Properties of `device`, queried once.
const cudaDeviceProp& device_props(int device);

/// cuBLAS / cuBLASLt handles of `device`, created on first use (the cuBLAS handle is bound to the
/// compute stream on every call to cublas_handle).
cublasHandle_t cublas_handle(int device);
cublasLtHandle_t cublaslt_handle(int device);

/// Bytes of the cuBLASLt workspace of a device (cublaslt_workspace).
inline constexpr size_t kCublasLtWorkspaceBytes = size_t{4} << 20;
/// The cuBLASLt workspace of `device` (kCublasLtWorkspaceBytes), allocated with cudaMalloc on
/// first use and kept until the process exits, as cuBLAS keeps its own: outside the caching
/// allocator, so memory_stats do not see a transient 4 MiB inside every linear (the memory test's
/// peak band has no room for it). One buffer per device is enough: every Lt call of a device is
/// queued on its one compute stream, so they never run at the same time. Throws
/// OutOfMemoryError / CudaError when the allocation fails.
void* cublaslt_workspace(int device);

/// A CUDA event (timing enabled) for benchmarks and cross-stream ordering.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t s);
  void synchronize();
  /// Milliseconds between two recorded, completed events.
  float elapsed_ms(const Event& end) const;
  cudaEvent_t get() const { return ev_; }

 private:
  cudaEvent_t ev_ = nullptr;
};

/// Blocks until `device`'s compute stream has drained; throws CudaError for kernel errors and
/// IndexError for an index error recorded since the last report (check_index_error).
void stream_synchronize(int device);

/// Where the index kernels of a device record a bad index (Note [Unchecked indexing] in
/// core/cuda/index_error.h): the device's view of its mapped record and its claim word.
struct IndexErrorSlot {
  IndexErrorRecord* device_record = nullptr;
  unsigned int* claim = nullptr;
};
/// The slot of `device`, allocated on the first call (a mapped pinned record and a device word,
/// both kept until the process exits). Throws CudaError when the allocation fails.
const IndexErrorSlot& index_error_slot(int device);
/// Call after the host waited for `device`'s compute stream: when an index kernel recorded a bad
/// index since the last report, clears the record and the claim and throws IndexError naming the
/// op, the index and the valid range (index_error_message). A device whose slot was never
/// allocated has nothing to report (one load).
void check_index_error(int device);

/// Tells the caching allocator of `d` that the block at `ptr` (a storage's data pointer) is used
/// on `stream` too, so its memory is reused only after work queued there before the free.
void record_stream(Device d, void* ptr, cudaStream_t stream);

}  // namespace sl::cuda
