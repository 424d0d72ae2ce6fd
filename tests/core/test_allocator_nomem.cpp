// The CPU allocator when the C++ heap is exhausted while a tensor is freed: the caches' lists
// cannot grow, and deallocate (called from destructors) must free the block instead of throwing
// (Notes [CPU small-block cache] and [CPU large-block cache], core/allocator.cpp).
//
// This binary replaces the global operator new (its own executable, so that no other test runs
// with it) to make the next allocation on the calling thread throw std::bad_alloc.
#include <cstdlib>
#include <new>

#include "core/allocator.h"
#include "support/testing.h"

using sl::testing::kCacheOn;

namespace {
thread_local bool fail_next_new = false;
}  // namespace

void* operator new(std::size_t n) {
  if (fail_next_new) {
    fail_next_new = false;
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

using namespace sl;

TEST_CASE("cpu allocator: a large block freed while the heap is exhausted goes to the system") {
  empty_cache();
  const MemoryStats s0 = memory_stats();
  {
    Tensor t = empty({int64_t{1} << 20}, {.dtype = DType::b8});  // a 1 MiB block
    fail_next_new = true;  // the cache's list node cannot be allocated
  }
  const bool unused = fail_next_new;  // still armed: nothing asked for memory
  fail_next_new = false;
  // with the cache on, freeing tried to grow its list (and got bad_alloc); the block was then
  // freed, not cached, and nothing threw out of the destructor. Without the cache (ASan) there
  // is no list to grow, and the block goes straight back.
  CHECK(unused == !kCacheOn);
  CHECK(memory_stats().reserved_bytes == s0.reserved_bytes);
  CHECK(memory_stats().live_bytes == s0.live_bytes);
  // the cache still works afterwards
  { Tensor t = empty({int64_t{1} << 20}, {.dtype = DType::b8}); }
  empty_cache();
  CHECK(memory_stats().reserved_bytes == s0.reserved_bytes);
}

TEST_CASE("cpu allocator: a small block freed while the heap is exhausted goes to the system") {
  empty_cache();  // the small lists are emptied and shrunk: the next push must allocate
  const MemoryStats s0 = memory_stats();
  {
    Tensor t = empty({3}, {.dtype = DType::f32});  // a 64-byte block
    fail_next_new = true;
  }
  fail_next_new = false;
  CHECK(memory_stats().reserved_bytes == s0.reserved_bytes);
  CHECK(memory_stats().live_bytes == s0.live_bytes);
}
