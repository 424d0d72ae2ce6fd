#include "core/allocator.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/error.h"

namespace sl {

void AllocStats::on_alloc(size_t nbytes) {
  auto n = static_cast<int64_t>(nbytes);
  int64_t live = live_.fetch_add(n, std::memory_order_relaxed) + n;
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (live > peak && !peak_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
  allocs_.fetch_add(1, std::memory_order_relaxed);
}

void AllocStats::on_free(size_t nbytes) {
  live_.fetch_sub(static_cast<int64_t>(nbytes), std::memory_order_relaxed);
  frees_.fetch_add(1, std::memory_order_relaxed);
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
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kCacheBytesPerClass = 0;
#else
constexpr size_t kCacheBytesPerClass = size_t{1} << 20;
#endif
constexpr size_t kMinBlock = 64;
constexpr size_t kMaxCachedBlock = 4096;
constexpr int kNumClasses = 7;  // 64, 128, ..., 4096

/// Host memory, 64-byte aligned, from the C library (small blocks through the cache above);
/// counters per logical device.
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    void* p;
    if (nbytes <= kMaxCachedBlock) {
      const int c = size_class(nbytes);
      p = pop(c);
      if (!p) p = from_system(nbytes, kMinBlock << c);
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
    free_[c].push_back(p);
    return true;
  }
  void* from_system(size_t nbytes, size_t block) {
    void* p = std::aligned_alloc(64, block);
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
};

Allocator* cpu_allocator(int index) {
  // Never destroyed: tensors held by static objects (a process group's buffers, a user's
  // globals) are freed after static destructors begin, and must still find the cache's lists.
  static CpuAllocator* const allocators = new CpuAllocator[kMaxDevicesPerKind];
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
    int n = device_count_kernel.has(d.kind) ? device_count_kernel(d.kind) : 0;
    SL_CHECK_DEVICE(d.index < n, "get_allocator: device ", d, " is not available (", n, " ",
                    device_kind_name(d.kind), " device(s) visible)");
  }
  return *allocator_kernel(d.kind, d.index);
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
  return *pinned_allocator_kernel(*k);
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
