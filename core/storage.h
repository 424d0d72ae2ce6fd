// Storage: one contiguous allocation shared by a tensor and all of its views.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/device.h"

namespace sl {

class Allocator;

class Storage {
 public:
  /// Allocates nbytes on `device` from that device's allocator.
  Storage(size_t nbytes, Device device);
  /// Wraps memory owned elsewhere; `deleter` (may be empty) runs when the storage dies.
  /// Borrowed memory is not counted by the allocator statistics.
  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);
  /// Allocates nbytes of page-locked host memory (device cpu) from `pinned`, the pinned host
  /// allocator of an accelerator backend (pinned_host_allocator in core/allocator.h). Counted by
  /// that allocator's statistics, not the CPU allocator's.
  Storage(size_t nbytes, Allocator& pinned);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool is_borrowed() const { return allocator_ == nullptr; }
  /// True for page-locked host memory (Note [Pinned host memory] in core/allocator.h).
  bool is_pinned() const { return pinned_; }

  /// Version counter shared by every view of this storage; bumped by each in-place write so
  /// autograd can tell that a tensor saved for backward was modified.
  uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;
  std::function<void(void*)> deleter_;
  bool pinned_ = false;
  std::atomic<uint32_t> version_{0};
};

}  // namespace sl
