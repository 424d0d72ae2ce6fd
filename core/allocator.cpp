#include "core/allocator.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>

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
  s.reserved_bytes = reserved_equals_live ? s.live_bytes : reserved_.load(std::memory_order_relaxed);
  s.alloc_count = allocs_.load(std::memory_order_relaxed);
  s.free_count = frees_.load(std::memory_order_relaxed);
  s.live_allocs = s.alloc_count - s.free_count;
  return s;
}

SL_DEFINE_KERNEL(allocator_kernel, Allocator*(int index));

namespace {

/// Host memory, 64-byte aligned, straight from the C library; counters per logical device.
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    size_t rounded = (nbytes + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) {
      detail::throw_error<OutOfMemoryError>("cpu allocator: could not allocate ", nbytes,
                                            " bytes (live ", stats_.snapshot(true).live_bytes,
                                            " bytes)");
    }
    stats_.on_alloc(nbytes);
    return p;
  }
  void deallocate(void* p, size_t nbytes) override {
    std::free(p);
    stats_.on_free(nbytes);
  }
  MemoryStats stats() const override { return stats_.snapshot(true); }
  void reset_peak() override { stats_.reset_peak(); }

 private:
  AllocStats stats_;
};

Allocator* cpu_allocator(int index) {
  static CpuAllocator allocators[kMaxDevicesPerKind];
  return &allocators[index];
}
int cpu_device_count() { return kMaxDevicesPerKind; }

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

MemoryStats memory_stats(Device d) { return get_allocator(d).stats(); }
void reset_peak_memory_stats(Device d) { get_allocator(d).reset_peak(); }
void empty_cache(Device d) { get_allocator(d).empty_cache(); }

}  // namespace sl
