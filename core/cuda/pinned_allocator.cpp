// The CUDA pinned host allocator and the staged host<->device copies (pinned_allocator.h).
#include "core/cuda/pinned_allocator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/cuda/pinned_uses.h"
#include "core/cuda/runtime.h"
#include "core/profiler.h"

namespace sl::cuda {
namespace {

/// True when e has completed; false while work before it is still queued.
bool event_done(cudaEvent_t e) {
  cudaError_t err = cudaEventQuery(e);
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not sticky; clear it
    return false;
  }
  CUDA_CHECK(err);
  return true;
}

/// The CUDA events behind PinnedBlockUses (Note [Pinned block uses] in pinned_uses.h).
class CudaPinnedEvents final : public PinnedEvents {
 public:
  PinnedEventId create_event(int device) override {
    DeviceGuard g(device);
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return reinterpret_cast<PinnedEventId>(e);
  }
  void record_event(PinnedEventId e, int device, PinnedStreamId stream) override {
    DeviceGuard g(device);  // an event is recorded on a stream of the device it was made on
    CUDA_CHECK(cudaEventRecord(ev(e), reinterpret_cast<cudaStream_t>(stream)));
  }
  bool query_event(PinnedEventId e) override { return event_done(ev(e)); }
  void wait_event(PinnedEventId e) override { (void)cudaEventSynchronize(ev(e)); }
  void destroy_event(PinnedEventId e) override { (void)cudaEventDestroy(ev(e)); }

 private:
  static cudaEvent_t ev(PinnedEventId e) { return reinterpret_cast<cudaEvent_t>(e); }
};

class PinnedHostAllocator final : public Allocator {
 public:
  void set_profile_name(const char* name) { stats_.set_profile_name(name); }
  void* allocate(size_t nbytes) override {
    const size_t size = pinned_block_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    SL_CHECK(!shut_down_, "pinned allocator: allocation after process exit began");
    auto [first, last] = free_.equal_range(size);
    for (auto it = first; it != last; ++it) {
      Block& b = blocks_.at(it->second);
      if (!b.uses.done(events_)) continue;
      void* p = it->second;
      free_.erase(it);
      b.in_use = true;
      stats_.on_alloc(nbytes);
      return p;
    }
    void* p = nullptr;
    cudaError_t err = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_free_blocks();  // page-locked memory is scarce: give back the cache and retry
      err = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      ::sl::detail::throw_error<OutOfMemoryError>("pinned allocator: cudaHostAlloc of ", size,
                                                  " bytes (for ", nbytes, " requested) failed; ",
                                                  reserved_, " bytes pinned already");
    }
    CUDA_CHECK(err);
    blocks_.emplace(p, Block{size, true, {}});
    reserved_ += static_cast<int64_t>(size);
    stats_.set_reserved(reserved_);
    stats_.on_alloc(nbytes);
    return p;
  }

  void deallocate(void* p, size_t nbytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.on_free(nbytes);
    auto it = blocks_.find(p);
    SL_ASSERT(it != blocks_.end() && it->second.in_use);
    if (shut_down_) {  // after process exit began: nothing is cached any more
      it->second.uses.wait(events_);  // its queued copies first (and their events released)
      (void)cudaFreeHost(p);
      reserved_ -= static_cast<int64_t>(it->second.size);
      blocks_.erase(it);
      return;
    }
    it->second.in_use = false;
    free_.emplace(it->second.size, p);
  }

  MemoryStats stats() const override { return stats_.snapshot(false); }
  void reset_peak() override { stats_.reset_peak(); }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    release_free_blocks();
  }

  void record_use(void* block, int device, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(block);
    SL_CHECK(it != blocks_.end() && it->second.in_use,
             "record_pinned_use: the pointer is not a live pinned block");
    // one event per (device, stream), re-recorded: the record stays bounded for a block that
    // lives long and is copied from every step (Note [Pinned block uses])
    it->second.uses.record(events_, device, reinterpret_cast<PinnedStreamId>(stream));
  }

  /// At process exit: frees the cached blocks while the CUDA runtime is still up; blocks still
  /// held (by tensors in static objects) are freed directly when they are deallocated.
  void shut_down() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [p, b] : blocks_) {
      if (b.in_use) continue;
      b.uses.wait(events_);
    }
    release_free_blocks();
    shut_down_ = true;
  }

 private:
  struct Block {
    size_t size;
    bool in_use;
    PinnedBlockUses uses;  // the asynchronous copies that read the block
  };

  /// Frees the cached blocks whose uses have completed. Caller holds mu_.
  void release_free_blocks() {
    for (auto it = free_.begin(); it != free_.end();) {
      auto b = blocks_.find(it->second);
      if (!b->second.uses.done(events_)) {
        ++it;
        continue;
      }
      (void)cudaFreeHost(it->second);
      reserved_ -= static_cast<int64_t>(b->second.size);
      blocks_.erase(b);
      it = free_.erase(it);
    }
    stats_.set_reserved(reserved_);
  }

  std::mutex mu_;
  CudaPinnedEvents events_;
  std::unordered_map<void*, Block> blocks_;  // every block page-locked, by address
  std::multimap<size_t, void*> free_;        // the cached ones, by size
  int64_t reserved_ = 0;
  bool shut_down_ = false;
  AllocStats stats_;
};

PinnedHostAllocator& instance() {
  // Never destroyed (tensors in static objects may free into it late); the atexit handler,
  // registered after the CUDA runtime initialised, runs before the runtime's own teardown.
  static PinnedHostAllocator* a = [] {
    (void)raw_device_count();  // initialise the runtime first
    auto* p = new PinnedHostAllocator();
    p->set_profile_name("pinned host memory");
    std::atexit([] { instance().shut_down(); });
    return p;
  }();
  return *a;
}

Allocator* pinned_allocator_hook() {
  return &instance();
}
SL_REGISTER_KERNEL(pinned_allocator_kernel, DeviceKind::cuda, &pinned_allocator_hook);

/// One staging buffer of a staged copy and the event after the last copy that used it.
struct Stage {
  void* ptr = nullptr;
  size_t bytes = 0;
  cudaEvent_t done = nullptr;

  /// Blocks until the copy last queued on this buffer has completed.
  void wait() const {
    if (done) CUDA_CHECK(cudaEventSynchronize(done));
  }
  void record(cudaStream_t s) {
    if (!done) CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(done, s));
  }
};

/// The two staging buffers of one copy of n bytes (one when n fits a chunk). Released when the
/// copy ends, after their last queued copy has run (also when the copy throws).
class StagePair {
 public:
  explicit StagePair(size_t n) {
    const size_t chunk = std::min(n, kStageChunkBytes);
    for (int i = 0; i < (n > chunk ? 2 : 1); ++i) {
      stages_[i].ptr = instance().allocate(chunk);
      stages_[i].bytes = chunk;
    }
  }
  ~StagePair() {
    for (Stage& s : stages_) {
      if (s.done) {
        (void)cudaEventSynchronize(s.done);
        (void)cudaEventDestroy(s.done);
      }
      if (s.ptr) instance().deallocate(s.ptr, s.bytes);
    }
  }
  StagePair(const StagePair&) = delete;
  StagePair& operator=(const StagePair&) = delete;
  Stage& operator[](size_t chunk_index) { return stages_[chunk_index % 2]; }

 private:
  Stage stages_[2];
};

}  // namespace

Allocator& pinned_allocator() {
  return instance();
}

void record_pinned_use(void* block, int device, cudaStream_t stream) {
  instance().record_use(block, device, stream);
}

void staged_host_to_device(void* dst, const void* src, size_t n, int device) {
  if (n == 0) return;
  DeviceGuard g(device);
  cudaStream_t s = compute_stream(device);
  StagePair stages(n);
  for (size_t i = 0, off = 0; off < n; ++i, off += kStageChunkBytes) {
    const size_t len = std::min(kStageChunkBytes, n - off);
    Stage& st = stages[i];
    st.wait();  // the DMA that last read this buffer is done
    std::memcpy(st.ptr, static_cast<const char*>(src) + off, len);
    CUDA_CHECK(
        cudaMemcpyAsync(static_cast<char*>(dst) + off, st.ptr, len, cudaMemcpyHostToDevice, s));
    st.record(s);
  }
  stream_synchronize(device);
}

void staged_device_to_host(void* dst, const void* src, size_t n, int device) {
  if (n == 0) return;
  DeviceGuard g(device);
  cudaStream_t s = compute_stream(device);
  StagePair stages(n);
  const size_t chunks = (n + kStageChunkBytes - 1) / kStageChunkBytes;
  auto issue = [&](size_t i) {
    const size_t off = i * kStageChunkBytes, len = std::min(kStageChunkBytes, n - off);
    CUDA_CHECK(cudaMemcpyAsync(stages[i].ptr, static_cast<const char*>(src) + off, len,
                               cudaMemcpyDeviceToHost, s));
    stages[i].record(s);
  };
  issue(0);
  for (size_t i = 0; i < chunks; ++i) {
    // chunk i + 1 goes into the other buffer, whose chunk i - 1 was copied out already
    if (i + 1 < chunks) issue(i + 1);
    const size_t off = i * kStageChunkBytes, len = std::min(kStageChunkBytes, n - off);
    stages[i].wait();
    std::memcpy(static_cast<char*>(dst) + off, stages[i].ptr, len);
  }
  // the last chunk's event follows every kernel queued before the copy
  check_index_error(device);
}

}  // namespace sl::cuda
