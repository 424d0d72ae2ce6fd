// Per-device memory allocators with live/peak accounting.
//
// Every byte a Tensor owns comes from the allocator of its device, so memory use is reported the
// same way on CPU and GPU: live bytes, peak bytes (resettable), reserved bytes (held from the
// system, caches included), and allocation counts. ZeRO's savings are measured with these numbers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/device.h"
#include "core/dispatch.h"

namespace sl {

/// Snapshot of one device's allocator counters.
struct MemoryStats {
  int64_t live_bytes = 0;      ///< bytes currently held by tensors
  int64_t peak_bytes = 0;      ///< max of live_bytes since start or the last reset_peak
  int64_t reserved_bytes = 0;  ///< bytes obtained from the system (>= live; caches keep more)
  int64_t alloc_count = 0;     ///< number of allocate calls that returned memory
  int64_t free_count = 0;      ///< number of deallocate calls
  int64_t live_allocs = 0;     ///< allocations not yet freed
};

/// Thread-safe counters shared by allocator implementations.
class AllocStats {
 public:
  void on_alloc(size_t nbytes);
  void on_free(size_t nbytes);
  /// While the profiler records, each allocation and free adds a memory event under `name` (a
  /// string that lives until the process ends, e.g. "cpu memory") with the live bytes after it.
  void set_profile_name(const char* name) { profile_name_ = name; }
  void set_reserved(int64_t bytes) { reserved_.store(bytes, std::memory_order_relaxed); }
  void reset_peak() { peak_.store(live_.load(std::memory_order_relaxed)); }
  MemoryStats snapshot(bool reserved_equals_live) const;

 private:
  std::atomic<int64_t> live_{0}, peak_{0}, reserved_{0}, allocs_{0}, frees_{0};
  const char* profile_name_ = nullptr;
};

/// Interface implemented once per device kind (and instantiated per device index).
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns memory for nbytes (64-byte aligned on CPU, 256 on CUDA; nbytes may be 0).
  /// Throws OutOfMemoryError naming the requested size when it cannot.
  virtual void* allocate(size_t nbytes) = 0;
  /// Returns memory obtained from allocate with the same nbytes.
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  /// Releases cached, unused blocks to the system (no-op where nothing is cached).
  virtual void empty_cache() {}
};

/// The allocator of a device. Throws DeviceError for a device kind that is not compiled in or an
/// index beyond the devices present.
Allocator& get_allocator(Device d);
/// Counters of `d`'s allocator.
MemoryStats memory_stats(Device d = kCPU);
/// Sets peak_bytes to the current live_bytes for `d`.
void reset_peak_memory_stats(Device d = kCPU);
/// Frees cached, unused blocks of `d`: the CUDA caching allocator's, the CPU small- and
/// large-block caches (Notes [CPU small-block cache] and [CPU large-block cache],
/// core/allocator.cpp).
void empty_cache(Device d = kCPU);

// Note [Pinned host memory]
// Page-locked ("pinned") host memory can be read and written by a GPU's DMA engines directly, so
// copies between it and the GPU need no intermediate buffer and may run asynchronously. A GPU
// backend registers one pinned host allocator (pinned_allocator_kernel): a cache of page-locked
// blocks, reused across allocations and freed when the backend shuts down. It serves two users:
// - Tensor::pin_memory() (core/tensor.h): CPU tensors in pinned memory. A host-to-device copy
//   from one is queued on the GPU's compute stream and copy_ returns before it runs, so the
//   pinned source must not be modified (or its storage reused) before the stream reaches the
//   copy: synchronise the device first. (Freeing it is safe: a freed block is not handed out
//   again before the copies queued from it have run.) A device-to-host copy into a pinned
//   tensor goes directly too, and returns when the data is there.
// - The backend itself stages copies between pageable (ordinary) host memory and the GPU in
//   chunks through two pinned buffers. Such copies are synchronous: when copy_ returns, the
//   source may be changed and the destination read.

/// Backends with page-locked host memory register a function returning their pinned host
/// allocator (it throws DeviceError when no GPU is visible).
SL_DECLARE_KERNEL(pinned_allocator_kernel, Allocator*());
/// The pinned host allocator of the first backend that has one. Throws DeviceError
/// "<op>: pinned memory needs a GPU backend ..." when none is built in or no GPU is visible.
Allocator& pinned_host_allocator(const char* op);
/// Counters of the pinned host allocator: live/peak bytes held by pinned tensors and staging
/// buffers, reserved bytes page-locked (cached blocks included). All zero when there is none.
MemoryStats pinned_memory_stats();
/// Frees the pinned host allocator's unused cached blocks (no-op when there is none).
void empty_pinned_cache();

/// Backends register a function returning the allocator of device index i for their kind.
SL_DECLARE_KERNEL(allocator_kernel, Allocator*(int index));
/// Backends register the number of devices of their kind they can see.
SL_DECLARE_KERNEL(device_count_kernel, int());

}  // namespace sl
