// The CPU allocator: alignment, statistics, and the small-block cache
// (Note [CPU small-block cache], core/allocator.cpp).
#include <cstdint>
#include <thread>

#include "core/allocator.h"
#include "support/testing.h"

using namespace sl;

namespace {
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheOn = false;  // the cache holds nothing under AddressSanitizer
#else
constexpr bool kCacheOn = true;
#endif

uintptr_t addr(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data_ptr());
}
Tensor bytes(int64_t n) {
  return empty({n}, {.dtype = DType::b8});
}
}  // namespace

TEST_CASE("cpu allocator: 64-byte alignment below, at and above the cached sizes") {
  for (int64_t n : {1, 15, 63, 64, 65, 100, 1024, 1025, 4095, 4096, 4097, 100000}) {
    Tensor t = bytes(n);
    CHECK_MESSAGE(addr(t) % 64 == 0, "bytes ", n);
  }
}

TEST_CASE("cpu allocator: live, peak and counts are the bytes asked for") {
  empty_cache();
  const MemoryStats s0 = memory_stats();
  {
    Tensor a = bytes(100);   // a 128-byte block
    Tensor b = bytes(5000);  // above the cache: 5056 bytes from the C library
    const MemoryStats s1 = memory_stats();
    CHECK(s1.live_bytes - s0.live_bytes == 5100);
    CHECK(s1.alloc_count - s0.alloc_count == 2);
    CHECK(s1.live_allocs - s0.live_allocs == 2);
    CHECK(s1.peak_bytes >= s1.live_bytes);
    // reserved counts whole blocks: the 128-byte class and 5000 rounded up to 64
    CHECK(s1.reserved_bytes - s0.reserved_bytes == 128 + 5056);
  }
  const MemoryStats s2 = memory_stats();
  CHECK(s2.live_bytes == s0.live_bytes);
  CHECK(s2.free_count - s0.free_count == 2);
  CHECK(s2.live_allocs == s0.live_allocs);
  // the freed small block stays cached (reserved, not live); the large one went back
  CHECK(s2.reserved_bytes - s0.reserved_bytes == (kCacheOn ? 128 : 0));
  empty_cache();
  CHECK(memory_stats().reserved_bytes == s0.reserved_bytes);

  reset_peak_memory_stats();
  CHECK(memory_stats().peak_bytes == memory_stats().live_bytes);
}

TEST_CASE("cpu allocator: a freed small block is reused by the next request of its class") {
  empty_cache();
  uintptr_t first;
  {
    Tensor a = bytes(300);  // 512-byte class
    first = addr(a);
  }
  Tensor b = bytes(257);  // same class
  if (kCacheOn) CHECK(addr(b) == first);
  Tensor c = bytes(300);  // the cache is empty again: a new block
  CHECK(addr(c) != addr(b));
  CHECK(addr(c) % 64 == 0);
}

TEST_CASE("cpu allocator: the cache is bounded and blocks may be freed on another thread") {
  empty_cache();
  const MemoryStats s0 = memory_stats();
  {
    // 40000 64-byte blocks (2.5 MB) freed at once: at most 1 MiB of them stays cached
    std::vector<Tensor> many;
    for (int i = 0; i < 40000; ++i) many.push_back(bytes(8));
    std::thread([m = std::move(many)]() mutable { m.clear(); }).join();
  }
  const MemoryStats s1 = memory_stats();
  CHECK(s1.live_bytes == s0.live_bytes);
  CHECK(s1.reserved_bytes - s0.reserved_bytes <= (kCacheOn ? (1 << 20) : 0));
  CHECK(s1.reserved_bytes >= s1.live_bytes);
  empty_cache();
  CHECK(memory_stats().reserved_bytes == s0.reserved_bytes);
}

