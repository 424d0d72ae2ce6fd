// The CPU allocator: alignment, statistics, and the small-block cache
// (Note [CPU small-block cache], core/allocator.cpp).
#include <cstdint>
#include <thread>

#include "core/allocator.h"
#include "support/testing.h"

using namespace sl;

using sl::testing::kCacheOn;

namespace {
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

// Note [CPU large-block cache]
TEST_CASE("cpu allocator: large blocks are rounded to eight classes per power of two") {
  empty_cache();
  const MemoryStats s0 = memory_stats();
  // (asked, block): 2^17 is a class of its own; one byte more takes the next eighth (2^14 more);
  // 300000 lies in [2^18, 2^19), so it is rounded up to a multiple of 2^15 (10 * 32768)
  const std::pair<int64_t, int64_t> cases[] = {
      {131072, 131072}, {131073, 131072 + 16384}, {300000, 10 * 32768}, {1 << 20, 1 << 20}};
  for (const auto& [asked, block] : cases) {
    {
      Tensor t = bytes(asked);
      CHECK(addr(t) % 64 == 0);
      const MemoryStats s1 = memory_stats();
      CHECK(s1.live_bytes - s0.live_bytes == asked);
      CHECK_MESSAGE(s1.reserved_bytes - s0.reserved_bytes == block, "asked ", asked);
    }
    // freed: still reserved while cached, never live
    const MemoryStats s2 = memory_stats();
    CHECK(s2.live_bytes == s0.live_bytes);
    CHECK(s2.reserved_bytes - s0.reserved_bytes == (kCacheOn ? block : 0));
    empty_cache();
    CHECK(memory_stats().reserved_bytes == s0.reserved_bytes);
  }
  // 4097 bytes up to 128 KiB are neither cached nor rounded beyond 64 bytes
  { Tensor t = bytes(100000); }
  CHECK(memory_stats().reserved_bytes == s0.reserved_bytes);
}

TEST_CASE("cpu allocator: a freed large block is reused by the next request of its class") {
  empty_cache();
  uintptr_t first;
  {
    Tensor a = bytes(3 << 20);
    a.fill_(7);  // touch the pages
    first = addr(a);
  }
  Tensor b = bytes((3 << 20) - 1000);  // same class (3 MiB is a multiple of 2^18)
  if (kCacheOn) CHECK(addr(b) == first);
  Tensor c = bytes(3 << 20);  // the list of that class is empty again: a new block
  CHECK(addr(c) != addr(b));
  // a different class never takes it
  uintptr_t freed;
  {
    Tensor d = bytes(5 << 20);
    freed = addr(d);
  }
  Tensor e = bytes(6 << 20);
  CHECK(addr(e) != freed);
}

TEST_CASE("cpu allocator: a full large cache makes room by freeing its least recently freed") {
  empty_cache();
  const MemoryStats s0 = memory_stats();
  const int64_t MiB = int64_t{1} << 20;
  std::vector<uintptr_t> old_blocks;
  {
    // 16 blocks of 64 MiB fill the 1 GiB cache when freed
    std::vector<Tensor> fill;
    for (int i = 0; i < 16; ++i) fill.push_back(bytes(64 * MiB));
    for (Tensor& t : fill) {
      old_blocks.push_back(addr(t));
      t = Tensor();  // freed here, in this order
    }
  }
  CHECK(memory_stats().reserved_bytes - s0.reserved_bytes == (kCacheOn ? 1024 * MiB : 0));
  uintptr_t newer;
  {
    // a 96 MiB block (its own class: 3 * 2^25) freed into the full cache evicts the two oldest
    Tensor t = bytes(96 * MiB);
    newer = addr(t);
  }
  CHECK(memory_stats().reserved_bytes - s0.reserved_bytes ==
        (kCacheOn ? (1024 - 128 + 96) * MiB : 0));
  Tensor again = bytes(96 * MiB);  // the new class is served from the cache
  if (kCacheOn) CHECK(addr(again) == newer);
  // 14 blocks of 64 MiB are left, the most recently freed first
  std::vector<Tensor> back;
  for (int i = 0; i < 14; ++i) back.push_back(bytes(64 * MiB));
  if (kCacheOn) {
    for (int i = 0; i < 14; ++i) CHECK(addr(back[static_cast<size_t>(i)]) == old_blocks[15 - i]);
  }
  CHECK(memory_stats().reserved_bytes - s0.reserved_bytes == (14 * 64 + 96) * MiB);
  back.clear();
  again = Tensor();
  empty_cache();
  CHECK(memory_stats().reserved_bytes == s0.reserved_bytes);
}

TEST_CASE("cpu allocator: the large cache is bounded, and a refused request empties it first") {
  empty_cache();
  const MemoryStats s0 = memory_stats();
  {
    // 24 blocks of 64 MiB (1.5 GiB) freed at once, on another thread: at most 1 GiB stays
    std::vector<Tensor> many;
    for (int i = 0; i < 24; ++i) many.push_back(bytes(int64_t{64} << 20));
    std::thread([m = std::move(many)]() mutable { m.clear(); }).join();
  }
  const MemoryStats s1 = memory_stats();
  CHECK(s1.live_bytes == s0.live_bytes);
  CHECK(s1.reserved_bytes - s0.reserved_bytes == (kCacheOn ? (int64_t{1} << 30) : 0));
  // the system cannot give 2^50 bytes: the cache is freed, the retry fails, and the error names
  // the size
  CHECK_THROWS_WITH_AS(bytes(int64_t{1} << 50),
                       doctest::Contains("could not allocate 1125899906842624 bytes"),
                       OutOfMemoryError);
  CHECK(memory_stats().reserved_bytes == s0.reserved_bytes);
  CHECK(memory_stats().live_bytes == s0.live_bytes);
}
