// The caching device allocator's bookkeeping, free of CUDA types so it is unit-tested on any
// machine (tests/cuda/test_caching_allocator.cpp drives it with host memory).
//
// Note [Caching allocator]
// Device memory comes from the backend (cudaMalloc) in segments: 2 MiB segments serve requests
// up to 1 MiB ("small pool"); larger requests get a 20 MiB segment when under 10 MiB, else a
// segment rounded up to 2 MiB. A segment is split into blocks (sizes multiples of 512 bytes);
// a freed block merges with free neighbours of its segment and is cached for reuse. Every
// segment belongs to the stream it was allocated for, and a block is only reused on that
// stream: work queued on one stream runs in order, so a block freed while kernels that use it
// are still queued can be handed to the next allocation on the same stream safely. A block that
// was also used on another stream (record_stream) is cached only after events recorded on those
// streams at free time have completed. When the backend reports out of memory, the allocator
// waits for pending events, returns every cached whole segment to the backend and retries once;
// if that fails too it throws OutOfMemoryError with the requested, free and reserved sizes.
// Nothing is ever returned to the backend except by empty_cache or that retry.
//
// A free cannot throw: it runs in Storage's destructor (implicitly noexcept, so an exception
// would terminate the process). When recording an event on one of the other streams fails
// (record_event throws; only after a CUDA error), nothing says when those streams are done with
// the block, so it is "unfenced": it leaves the tensor statistics (live bytes drop, as for any
// free) but stays out of the free pools, parked among the pending blocks with the events that
// were recorded, and its segment stays reserved. Only a whole-device synchronisation
// (backend synchronize, which covers every stream) makes it safe to reuse: empty_cache and the
// out-of-memory retry, which wait for pending events anyway, synchronise once when an unfenced
// block is parked, then destroy its events and cache it as any other free block (so its
// segment can be released). If the synchronisation throws, the block stays parked and the error
// propagates from empty_cache / allocate. The failure is reported on stderr at the free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"

namespace sl::cuda {

/// An opaque stream handle (cudaStream_t cast to an integer).
using StreamId = uintptr_t;
/// An opaque event handle.
using EventId = uintptr_t;

/// What the caching allocator needs from a device.
class DeviceMemoryBackend {
 public:
  virtual ~DeviceMemoryBackend() = default;
  /// nbytes of device memory, or nullptr when the device is out of memory (other failures
  /// throw).
  virtual void* raw_alloc(size_t nbytes) = 0;
  virtual void raw_free(void* ptr) = 0;
  /// Free and total bytes of the device, for the out-of-memory message.
  virtual void mem_info(size_t* free_bytes, size_t* total_bytes) = 0;
  /// An event recorded on `stream` now.
  virtual EventId record_event(StreamId stream) = 0;
  /// True when the event has completed (does not block).
  virtual bool query_event(EventId e) = 0;
  /// Blocks the host until the event has completed.
  virtual void wait_event(EventId e) = 0;
  virtual void destroy_event(EventId e) = 0;
  /// Blocks the host until all work queued on the device, on every stream, has completed.
  virtual void synchronize() = 0;
  /// "cuda:0", for messages.
  virtual std::string name() const = 0;
};

/// Sizes used by the caching rules (Note [Caching allocator]).
struct CachingSizes {
  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kSmallRequest = size_t{1} << 20;   // 1 MiB
  static constexpr size_t kSmallSegment = size_t{2} << 20;   // 2 MiB
  static constexpr size_t kMidRequest = size_t{10} << 20;    // 10 MiB
  static constexpr size_t kLargeSegment = size_t{20} << 20;  // 20 MiB
  static constexpr size_t kRoundLarge = size_t{2} << 20;     // 2 MiB
};

class CachingAllocator {
 public:
  explicit CachingAllocator(std::unique_ptr<DeviceMemoryBackend> backend);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// A block of at least nbytes (0 allowed) usable on `stream`, 512-byte aligned relative to
  /// the backend's alignment. Throws OutOfMemoryError as described in the Note.
  void* allocate(size_t nbytes, StreamId stream);
  /// Returns a block to the cache. Never throws (called from destructors): an unknown pointer
  /// or a failing event call is reported on stderr; a block whose events could not all be
  /// recorded is parked until a device synchronisation (the Note).
  void deallocate(void* ptr);
  /// Marks ptr (an allocated block) as used on `stream` too; see the Note.
  void record_stream(void* ptr, StreamId stream);
  /// Waits for pending events (synchronising the device when an unfenced block is parked) and
  /// returns every cached whole segment to the backend. Throws what the backend throws.
  void empty_cache();

  MemoryStats stats() const { return stats_.snapshot(false); }
  void reset_peak() { stats_.reset_peak(); }
  /// Bytes in free cached blocks (pending blocks are not counted).
  size_t cached_bytes() const;
  /// Freed blocks not yet cached: waiting for events on other streams, or unfenced.
  size_t pending_count() const;
  /// Segments currently obtained from the backend.
  size_t segment_count() const;
  /// The rounded size a request of nbytes occupies.
  static size_t round_size(size_t nbytes);
  /// The segment size allocated for a rounded request.
  static size_t segment_size(size_t rounded);

 private:
  struct Block;
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockLess>;

  Block* find_free(Pool& pool, StreamId stream, size_t size);
  Block* new_segment(Pool& pool, StreamId stream, size_t size, size_t requested);
  void free_block(Block* b);
  void process_events(bool wait);
  size_t release_cached_segments();
  [[noreturn]] void throw_oom(size_t requested, size_t rounded);

  std::unique_ptr<DeviceMemoryBackend> backend_;
  mutable std::mutex mu_;
  Pool small_pool_, large_pool_;
  std::unordered_map<void*, Block*> allocated_;
  /// A freed block waiting for the events recorded on the other streams that used it; unfenced
  /// when recording one failed (then only a device synchronisation frees it; the Note).
  struct PendingFree {
    Block* block;
    std::vector<EventId> events;
    bool unfenced;
  };
  std::vector<PendingFree> pending_;
  size_t reserved_ = 0;
  size_t segments_ = 0;
  AllocStats stats_;
};

}  // namespace sl::cuda
