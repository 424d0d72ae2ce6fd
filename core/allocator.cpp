#include "core/allocator.h"

#include <bit>
#include <cstdlib>
#include <iterator>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/profiler.h"

namespace sl {

void AllocStats::on_alloc(size_t nbytes) {
  auto n = static_cast<int64_t>(nbytes);
  int64_t live = live_.fetch_add(n, std::memory_order_relaxed) + n;
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (live > peak && !peak_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
  allocs_.fetch_add(1, std::memory_order_relaxed);
  if (profile_name_ != nullptr && profiler::is_recording()) [[unlikely]] {
    profiler::detail::record_memory_now(profile_name_, live);
  }
}

void AllocStats::on_free(size_t nbytes) {
  const auto n = static_cast<int64_t>(nbytes);
  const int64_t live = live_.fetch_sub(n, std::memory_order_relaxed) - n;
  frees_.fetch_add(1, std::memory_order_relaxed);
  // Last, so that the compiler can make the rare call a tail call and keep the common path short.
  if (profile_name_ != nullptr && profiler::is_recording()) [[unlikely]] {
    profiler::detail::record_memory_now(profile_name_, live);
  }
}

MemoryStats AllocStats::snapshot(bool reserved_equals_live) const {
  MemoryStats s;
  s.live_bytes = live_.load(std::memory_order_relaxed);
  s.peak_bytes = peak_.load(std::memory_order_relaxed);
  s.reserved_bytes =
      reserved_equals_live ? s.live_bytes : reserved_.load(std::memory_order_relaxed);
  s.alloc_count = allocs_.load(std::memory_order_relaxed);
  s.free_count = frees_.load(std::memory_order_relaxed);
  s.live_allocs = s.alloc_count - s.free_count;
  return s;
}

SL_DEFINE_KERNEL(allocator_kernel, Allocator*(int index));

namespace {

// Note [CPU small-block cache]
// Small tensors (autograd's scalars, biases, optimizer steps) are allocated and freed at a high
// rate. aligned_alloc serves them through glibc's memalign path, which splits chunks, bypasses
// the per-thread caches and leaves fragments whose coalescing triggers malloc_consolidate: with a
// few thousand tiny tensors alive (a recorded graph) each allocation and free cost microseconds.
// Blocks up to kMaxCachedBlock bytes are therefore rounded up to a power-of-two class (64 B to
// 4 KiB) and kept on a per-class free list when freed, up to kCacheBytesPerClass bytes per class
// (7 MiB in all per device). Larger blocks go straight to the C library as before.
// - Statistics: live_bytes counts the bytes asked for, as before; reserved_bytes counts what is
//   held from the system (blocks in use at their class size, plus the cache); empty_cache()
//   returns the cache to the system.
// - Built with AddressSanitizer the cache holds nothing, so a use after free is still reported.
// - One mutex per device guards the lists: uncontended it costs tens of nanoseconds, and tensors
//   are freed from any thread (data loader, thread pool, the thread that owns the graph).
//
// Note [CPU large-block cache]
// glibc serves large blocks with fresh mmap()ed pages and returns them on free, so a large tensor
// (activations, GEMM outputs, gradients) can pay a page fault and a page clear per 4 KiB touched,
// every step: 2,300-3,400 faults per forward + backward in tools/bench_nn (conv2d 512ch 7x7, LSTM
// h512, a BERT-base encoder layer). Blocks of kMinLargeBlock bytes and more are therefore rounded
// up to one of eight classes per power of two (at most 12.5% more than asked) and, when freed,
// kept in the large cache, which holds at most kLargeCacheBytes; the next request of that class
// takes the block back, its pages already mapped. A training loop asks for the same sizes every
// step, so after the first step it takes no faults (conv2d 512->512 7x7 then ran in 0.80 of its
// time). Shapes that change (variable sequence lengths) leave blocks of classes that may never
// be asked for again, so the cache is least-recently-freed first out: a freed block that does
// not fit evicts the oldest cached blocks (back to the system) until it does.
// - Statistics as for small blocks: live_bytes is what was asked for, reserved_bytes every block
//   held from the system at its class size, the cache included. empty_cache() frees the cache.
// - When the system refuses a block, the cache is freed and the request tried once more before
//   OutOfMemoryError.
// - The cache is off under AddressSanitizer (see above).
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kCacheBytesPerClass = 0;
constexpr size_t kLargeCacheBytes = 0;
#else
constexpr size_t kCacheBytesPerClass = size_t{1} << 20;
constexpr size_t kLargeCacheBytes = size_t{1} << 30;
#endif
constexpr size_t kMinBlock = 64;
constexpr size_t kMaxCachedBlock = 4096;
constexpr int kNumClasses = 7;  // 64, 128, ..., 4096
constexpr size_t kMinLargeBlock = size_t{128} << 10;

/// The block a large request of nbytes (>= kMinLargeBlock) gets: nbytes rounded up to a multiple
/// of 2^(p - 3), where 2^p <= nbytes < 2^(p + 1).
size_t large_block_size(size_t nbytes) {
  const size_t step = std::bit_floor(nbytes) >> 3;
  return (nbytes + step - 1) / step * step;
}

/// Host memory, 64-byte aligned, from the C library (small and large blocks through the caches
/// above); counters per logical device.
class CpuAllocator final : public Allocator {
 public:
  void set_profile_name(const char* name) { stats_.set_profile_name(name); }
  void* allocate(size_t nbytes) override {
    void* p;
    if (nbytes <= kMaxCachedBlock) {
      const int c = size_class(nbytes);
      p = pop(c);
      if (!p) p = from_system(nbytes, kMinBlock << c);
    } else if (nbytes >= kMinLargeBlock) {
      const size_t block = large_block_size(nbytes);
      p = pop_large(block);
      if (!p) p = from_system(nbytes, block);
    } else {
      p = from_system(nbytes, (nbytes + 63) / 64 * 64);
    }
    stats_.on_alloc(nbytes);
    return p;
  }
  void deallocate(void* p, size_t nbytes) override {
    stats_.on_free(nbytes);
    if (nbytes <= kMaxCachedBlock) {
      const int c = size_class(nbytes);
      if (push(c, p)) return;
      to_system(p, kMinBlock << c);
    } else if (nbytes >= kMinLargeBlock) {
      const size_t block = large_block_size(nbytes);
      if (push_large(block, p)) return;
      to_system(p, block);
    } else {
      to_system(p, (nbytes + 63) / 64 * 64);
    }
  }
  MemoryStats stats() const override {
    MemoryStats s = stats_.snapshot(false);
    s.reserved_bytes = reserved_.load(std::memory_order_relaxed);
    return s;
  }
  void reset_peak() override { stats_.reset_peak(); }
  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (int c = 0; c < kNumClasses; ++c) {
      for (void* p : free_[c]) to_system(p, kMinBlock << c);
      free_[c].clear();
      free_[c].shrink_to_fit();
    }
    for (const CachedBlock& b : large_lru_) to_system(b.ptr, b.block);
    large_lru_.clear();
    large_by_size_.clear();
    large_cached_ = 0;
  }

 private:
  static int size_class(size_t nbytes) {
    int c = 0;
    while ((kMinBlock << c) < nbytes) ++c;
    return c;
  }
  void* pop(int c) {
    if (kCacheBytesPerClass == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    if (free_[c].empty()) return nullptr;
    void* p = free_[c].back();
    free_[c].pop_back();
    return p;
  }
  bool push(int c, void* p) {
    if (kCacheBytesPerClass == 0) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (free_[c].size() >= kCacheBytesPerClass / (kMinBlock << c)) return false;
    try {
      free_[c].push_back(p);
    } catch (const std::bad_alloc&) {  // deallocate must not throw: free p instead
      return false;
    }
    return true;
  }
  void* pop_large(size_t block) {
    if (kLargeCacheBytes == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    const auto [first, last] = large_by_size_.equal_range(block);
    if (first == last) return nullptr;
    const auto it = std::prev(last);  // the most recently freed: likeliest still in cache
    void* p = it->second->ptr;
    large_lru_.erase(it->second);
    large_by_size_.erase(it);
    large_cached_ -= block;
    return p;
  }
  /// Caches p, evicting the least recently freed blocks until the cache is within its bound;
  /// false (the caller frees p) for a block larger than the whole cache.
  bool push_large(size_t block, void* p) {
    if (block > kLargeCacheBytes) return false;
    std::lock_guard<std::mutex> lock(mu_);
    // deallocate must not throw: where the lists cannot grow, p is freed instead
    try {
      large_lru_.push_back({p, block});
    } catch (const std::bad_alloc&) {
      return false;
    }
    try {
      large_by_size_.emplace(block, std::prev(large_lru_.end()));
    } catch (const std::bad_alloc&) {
      large_lru_.pop_back();
      return false;
    }
    large_cached_ += block;
    while (large_cached_ > kLargeCacheBytes) {
      const CachedBlock oldest = large_lru_.front();
      auto [first, last] = large_by_size_.equal_range(oldest.block);
      for (auto it = first; it != last; ++it) {
        if (it->second == large_lru_.begin()) {
          large_by_size_.erase(it);
          break;
        }
      }
      large_lru_.pop_front();
      large_cached_ -= oldest.block;
      to_system(oldest.ptr, oldest.block);
    }
    return true;
  }
  void* from_system(size_t nbytes, size_t block) {
    void* p = std::aligned_alloc(64, block);
    if (!p) {
      empty_cache();  // Note [CPU large-block cache]: what is cached goes back, then one retry
      p = std::aligned_alloc(64, block);
    }
    if (!p) {
      detail::throw_error<OutOfMemoryError>("cpu allocator: could not allocate ", nbytes,
                                            " bytes (live ", stats_.snapshot(true).live_bytes,
                                            " bytes)");
    }
    reserved_.fetch_add(static_cast<int64_t>(block), std::memory_order_relaxed);
    return p;
  }
  void to_system(void* p, size_t block) {
    std::free(p);
    reserved_.fetch_sub(static_cast<int64_t>(block), std::memory_order_relaxed);
  }

  AllocStats stats_;
  std::atomic<int64_t> reserved_{0};
  std::mutex mu_;
  std::vector<void*> free_[kNumClasses];
  struct CachedBlock {
    void* ptr;
    size_t block;
  };
  std::list<CachedBlock> large_lru_;  // the large cache, least recently freed first
  std::multimap<size_t, std::list<CachedBlock>::iterator> large_by_size_;  // block -> its entries
  size_t large_cached_ = 0;                                                // bytes in large_lru_
};

Allocator* cpu_allocator(int index) {
  // Never destroyed: tensors held by static objects (a process group's buffers, a user's
  // globals) are freed after static destructors begin, and must still find the cache's lists.
  static CpuAllocator* const allocators = [] {
    auto* a = new CpuAllocator[kMaxDevicesPerKind];
    a[0].set_profile_name("cpu memory");
    for (int i = 1; i < kMaxDevicesPerKind; ++i) {
      a[i].set_profile_name(profiler::intern("cpu:" + std::to_string(i) + " memory"));
    }
    return a;
  }();
  return &allocators[index];
}
int cpu_device_count() {
  return kMaxDevicesPerKind;
}

SL_REGISTER_KERNEL(allocator_kernel, DeviceKind::cpu, &cpu_allocator);
SL_REGISTER_KERNEL(device_count_kernel, DeviceKind::cpu, &cpu_device_count);

}  // namespace

Allocator& get_allocator(Device d) {
  SL_CHECK_DEVICE(d.index >= 0 && d.index < kMaxDevicesPerKind, "get_allocator: device index ",
                  d.index, " out of range for ", d);
  if (d.kind != DeviceKind::cpu) {
    int n = device_count_kernel.has(d.kind) ? device_count_kernel.get(d.kind)() : 0;
    SL_CHECK_DEVICE(d.index < n, "get_allocator: device ", d, " is not available (", n, " ",
                    device_kind_name(d.kind), " device(s) visible)");
  }
  // .get(): a lookup, not work, so not an event when the profiler records (Note [Profiler])
  return *allocator_kernel.get(d.kind)(d.index);
}

SL_DEFINE_KERNEL(pinned_allocator_kernel, Allocator*());

namespace {
/// The first device kind whose backend registered a pinned host allocator (none on the CPU).
std::optional<DeviceKind> pinned_backend() {
  for (int i = 0; i < kNumDeviceKinds; ++i) {
    const auto k = static_cast<DeviceKind>(i);
    if (pinned_allocator_kernel.has(k)) return k;
  }
  return std::nullopt;
}
}  // namespace

Allocator& pinned_host_allocator(const char* op) {
  const std::optional<DeviceKind> k = pinned_backend();
  SL_CHECK_DEVICE(k.has_value(), op,
                  ": pinned memory needs a GPU backend, and this build has none");
  const int n = device_count_kernel.has(*k) ? device_count_kernel(*k) : 0;
  SL_CHECK_DEVICE(n > 0, op, ": pinned memory needs a GPU, and none is visible (",
                  device_kind_name(*k), " backend built in, 0 devices)");
  return *pinned_allocator_kernel.get(*k)();
}

MemoryStats pinned_memory_stats() {
  const std::optional<DeviceKind> k = pinned_backend();
  return k ? pinned_allocator_kernel(*k)->stats() : MemoryStats{};
}

void empty_pinned_cache() {
  if (const auto k = pinned_backend()) pinned_allocator_kernel(*k)->empty_cache();
}

MemoryStats memory_stats(Device d) {
  return get_allocator(d).stats();
}
void reset_peak_memory_stats(Device d) {
  get_allocator(d).reset_peak();
}
void empty_cache(Device d) {
  get_allocator(d).empty_cache();
}

}  // namespace sl
