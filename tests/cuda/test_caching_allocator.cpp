// The caching allocator's bookkeeping (Note [Caching allocator]) driven by a host-memory backend,
// so it runs on every machine: reuse, splitting, merging, streams, events, out-of-memory retry,
// empty_cache and the statistics.
#include <cstdlib>
#include <map>

#include "core/cuda/caching_allocator.h"
#include "support/testing.h"

using namespace sl;
using sl::cuda::CachingAllocator;
using sl::cuda::CachingSizes;
using sl::cuda::EventId;
using sl::cuda::StreamId;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

/// Host memory with a capacity; events complete when the test says so. Recording the
/// fail_record_at-th event (1-based; 0: never) throws, as the CUDA backend does after a CUDA
/// error (a DeviceError, as CudaError is), and so does synchronize while fail_sync is set.
struct FakeBackend final : sl::cuda::DeviceMemoryBackend {
  size_t capacity;
  size_t used = 0;
  int allocs = 0, frees = 0;
  std::map<void*, size_t> live;
  std::map<EventId, bool> events;  // id -> done
  EventId next_event = 1;
  std::vector<StreamId> recorded_on;
  int record_calls = 0, fail_record_at = 0;
  int syncs = 0;
  bool fail_sync = false;

  explicit FakeBackend(size_t cap) : capacity(cap) {}
  ~FakeBackend() override {
    for (auto& [p, n] : live) std::free(p);
  }
  void* raw_alloc(size_t n) override {
    if (used + n > capacity) return nullptr;
    void* p = std::aligned_alloc(512, n);
    used += n;
    ++allocs;
    live[p] = n;
    return p;
  }
  void raw_free(void* p) override {
    used -= live.at(p);
    live.erase(p);
    std::free(p);
    ++frees;
  }
  void mem_info(size_t* f, size_t* t) override {
    *f = capacity - used;
    *t = capacity;
  }
  EventId record_event(StreamId s) override {
    if (++record_calls == fail_record_at) throw DeviceError("fake: cudaEventRecord failed");
    recorded_on.push_back(s);
    events[next_event] = false;
    return next_event++;
  }
  bool query_event(EventId e) override { return events.at(e); }
  void wait_event(EventId e) override { events.at(e) = true; }
  void destroy_event(EventId e) override { events.erase(e); }
  void synchronize() override {
    if (fail_sync) throw DeviceError("fake: cudaDeviceSynchronize failed");
    ++syncs;
    for (auto& [e, done] : events) done = true;
  }
  std::string name() const override { return "fake:0"; }
};

struct Fixture {
  FakeBackend* backend;
  std::unique_ptr<CachingAllocator> alloc;
  explicit Fixture(size_t cap = 64 * kMiB) {
    auto b = std::make_unique<FakeBackend>(cap);
    backend = b.get();
    alloc = std::make_unique<CachingAllocator>(std::move(b));
  }
};

}  // namespace

TEST_CASE("caching allocator: size rounding and segment sizes") {
  CHECK(CachingAllocator::round_size(0) == 512);
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::segment_size(512) == CachingSizes::kSmallSegment);
  CHECK(CachingAllocator::segment_size(kMiB) == CachingSizes::kSmallSegment);
  CHECK(CachingAllocator::segment_size(kMiB + 512) == CachingSizes::kLargeSegment);
  CHECK(CachingAllocator::segment_size(10 * kMiB) == 10 * kMiB);
  CHECK(CachingAllocator::segment_size(10 * kMiB + 512) == 12 * kMiB);
}

TEST_CASE("caching allocator: a freed block is reused without a new segment") {
  Fixture f;
  void* p = f.alloc->allocate(1000, 0);
  CHECK(f.backend->allocs == 1);
  MemoryStats s = f.alloc->stats();
  CHECK(s.live_bytes == 1000);
  CHECK(s.reserved_bytes == static_cast<int64_t>(CachingSizes::kSmallSegment));
  f.alloc->deallocate(p);
  CHECK(f.alloc->stats().live_bytes == 0);
  void* q = f.alloc->allocate(900, 0);
  CHECK(q == p);
  CHECK(f.backend->allocs == 1);
  f.alloc->deallocate(q);
  CHECK(f.alloc->stats().peak_bytes == 1000);
  CHECK(f.alloc->stats().alloc_count == 2);
  CHECK(f.alloc->stats().free_count == 2);
}

TEST_CASE("caching allocator: blocks split from one segment and merge back") {
  Fixture f;
  void* a = f.alloc->allocate(4096, 0);
  void* b = f.alloc->allocate(4096, 0);
  void* c = f.alloc->allocate(4096, 0);
  CHECK(f.backend->allocs == 1);  // all three from one 2 MiB segment
  CHECK(static_cast<char*>(b) == static_cast<char*>(a) + 4096);
  CHECK(static_cast<char*>(c) == static_cast<char*>(b) + 4096);
  f.alloc->deallocate(b);
  f.alloc->deallocate(a);
  f.alloc->deallocate(c);
  // fully merged: one free block of the whole segment, which empty_cache returns
  CHECK(f.alloc->cached_bytes() == CachingSizes::kSmallSegment);
  f.alloc->empty_cache();
  CHECK(f.backend->frees == 1);
  CHECK(f.alloc->stats().reserved_bytes == 0);
  CHECK(f.alloc->segment_count() == 0);
  // a block of the merged segment can now hold what three did
  void* d = f.alloc->allocate(3 * 4096, 0);
  CHECK(f.backend->allocs == 2);
  f.alloc->deallocate(d);
}

TEST_CASE("caching allocator: empty_cache keeps segments that are still in use") {
  Fixture f;
  void* a = f.alloc->allocate(4096, 0);
  void* big = f.alloc->allocate(12 * kMiB, 0);
  f.alloc->deallocate(big);
  f.alloc->empty_cache();
  CHECK(f.backend->frees == 1);  // the large segment; the small one still holds `a`
  CHECK(f.alloc->stats().reserved_bytes == static_cast<int64_t>(CachingSizes::kSmallSegment));
  f.alloc->deallocate(a);
  f.alloc->empty_cache();
  CHECK(f.alloc->stats().reserved_bytes == 0);
}

TEST_CASE("caching allocator: large requests use the large pool and split above 1 MiB") {
  Fixture f;
  void* a = f.alloc->allocate(2 * kMiB, 0);  // 20 MiB segment, 18 MiB left as a free block
  CHECK(f.alloc->stats().reserved_bytes == static_cast<int64_t>(CachingSizes::kLargeSegment));
  void* b = f.alloc->allocate(3 * kMiB, 0);
  CHECK(f.backend->allocs == 1);
  CHECK(static_cast<char*>(b) == static_cast<char*>(a) + 2 * kMiB);
  void* small = f.alloc->allocate(1000, 0);  // small requests never come from large segments
  CHECK(f.backend->allocs == 2);
  f.alloc->deallocate(a);
  f.alloc->deallocate(b);
  f.alloc->deallocate(small);
}

TEST_CASE("caching allocator: a block is reused only on its own stream") {
  Fixture f;
  const StreamId s1 = 1, s2 = 2;
  void* p = f.alloc->allocate(4096, s1);
  f.alloc->deallocate(p);
  void* q = f.alloc->allocate(4096, s2);
  CHECK(q != p);
  CHECK(f.backend->allocs == 2);
  void* r = f.alloc->allocate(4096, s1);
  CHECK(r == p);
  f.alloc->deallocate(q);
  f.alloc->deallocate(r);
}

TEST_CASE("caching allocator: record_stream delays reuse until the other stream's event") {
  Fixture f;
  const StreamId s1 = 1, s2 = 2;
  void* p = f.alloc->allocate(4096, s1);
  f.alloc->record_stream(p, s2);
  f.alloc->record_stream(p, s1);  // its own stream: nothing to wait for
  f.alloc->deallocate(p);
  REQUIRE(f.backend->recorded_on.size() == 1);
  CHECK(f.backend->recorded_on[0] == s2);
  void* q = f.alloc->allocate(4096, s1);
  CHECK(q != p);  // event pending: p is not reusable yet
  f.alloc->deallocate(q);
  for (auto& [e, done] : f.backend->events) done = true;
  void* r = f.alloc->allocate(4096, s1);
  void* t = f.alloc->allocate(4096, s1);
  CHECK((r == p || t == p));
  CHECK(f.backend->events.empty());  // destroyed once complete
  f.alloc->deallocate(r);
  f.alloc->deallocate(t);
  SL_CHECK_THROWS(f.alloc->record_stream(reinterpret_cast<void*>(0x1234), s2), ValueError,
                  "record_stream: pointer is not an allocated block of fake:0");
}

TEST_CASE("caching allocator: out of memory frees the cache and retries, then throws") {
  Fixture f(40 * kMiB);
  void* a = f.alloc->allocate(16 * kMiB, 0);
  f.alloc->deallocate(a);  // 16 MiB cached
  CHECK(f.alloc->stats().reserved_bytes == static_cast<int64_t>(16 * kMiB));
  void* b = f.alloc->allocate(30 * kMiB, 0);  // fails once, releases the cache, succeeds
  CHECK(f.backend->frees == 1);
  CHECK(f.alloc->stats().reserved_bytes == static_cast<int64_t>(30 * kMiB));
  SL_CHECK_THROWS(f.alloc->allocate(20 * kMiB, 0), OutOfMemoryError,
                  "fake:0: out of memory: requested 20971520 bytes");
  try {
    f.alloc->allocate(20 * kMiB, 0);
  } catch (const OutOfMemoryError& e) {
    std::string m = e.what();
    CHECK(m.find("10485760 bytes free of 41943040") != std::string::npos);
    CHECK(m.find("reserves 31457280 bytes") != std::string::npos);
    CHECK(m.find("31457280 held by tensors") != std::string::npos);
  }
  // the allocator is still usable after the failure
  f.alloc->deallocate(b);
  void* c = f.alloc->allocate(20 * kMiB, 0);
  CHECK(c != nullptr);
  f.alloc->deallocate(c);
  SL_CHECK_THROWS(f.alloc->allocate(size_t{1} << 63, 0), OutOfMemoryError, "beyond any device");
}

TEST_CASE("caching allocator: pending blocks are freed by an out-of-memory retry") {
  Fixture f(20 * kMiB);
  void* a = f.alloc->allocate(12 * kMiB, 1);
  f.alloc->record_stream(a, 2);
  f.alloc->deallocate(a);                     // pending on an event that has not completed
  void* b = f.alloc->allocate(12 * kMiB, 1);  // needs a's memory: waits for the event
  CHECK(b != nullptr);
  CHECK(f.backend->events.empty());
  f.alloc->deallocate(b);
}

TEST_CASE("caching allocator: a free whose event cannot be recorded parks the block until a sync") {
  const size_t seg = CachingSizes::kSmallSegment;
  // Recording fails on the first of the two other streams (no event recorded) or on the second
  // (one recorded, which must be neither lost nor destroyed early).
  for (int fail_at : {1, 2}) {
    CAPTURE(fail_at);
    Fixture f;
    const StreamId s1 = 1, s2 = 2, s3 = 3;
    void* p = f.alloc->allocate(4096, s1);
    f.alloc->record_stream(p, s2);
    f.alloc->record_stream(p, s3);
    f.backend->fail_record_at = fail_at;
    CHECK_NOTHROW(f.alloc->deallocate(p));  // runs in Storage's destructor: must not throw
    CHECK(f.backend->events.size() == static_cast<size_t>(fail_at - 1));
    MemoryStats s = f.alloc->stats();
    CHECK(s.live_bytes == 0);  // the tensor is gone
    CHECK(s.live_allocs == 0);
    CHECK(s.reserved_bytes == static_cast<int64_t>(seg));  // its memory is still ours
    CHECK(f.alloc->pending_count() == 1);
    CHECK(f.alloc->cached_bytes() == seg - 4096);  // the rest of the segment; p is not cached
    // Even once every recorded event has completed, p is not reused: nothing fenced the stream
    // whose event failed.
    for (auto& [e, done] : f.backend->events) done = true;
    void* q = f.alloc->allocate(4096, s1);
    CHECK(q != p);
    CHECK(f.alloc->pending_count() == 1);
    CHECK(f.backend->syncs == 0);
    f.alloc->deallocate(q);
    // empty_cache synchronises the device once, destroys the recorded event, caches p (merged
    // back into its segment) and releases the whole segment.
    f.alloc->empty_cache();
    CHECK(f.backend->syncs == 1);
    CHECK(f.backend->events.empty());
    CHECK(f.alloc->pending_count() == 0);
    CHECK(f.alloc->stats().reserved_bytes == 0);
    CHECK(f.alloc->segment_count() == 0);
    CHECK(f.backend->frees == f.backend->allocs);
    CHECK(f.backend->used == 0);
    // nothing to synchronise for any more
    f.alloc->empty_cache();
    CHECK(f.backend->syncs == 1);
  }
}

TEST_CASE("caching allocator: a parked block is reclaimed by the out-of-memory retry") {
  Fixture f(20 * kMiB);
  void* a = f.alloc->allocate(12 * kMiB, 1);
  f.alloc->record_stream(a, 2);
  f.backend->fail_record_at = 1;
  f.alloc->deallocate(a);
  CHECK(f.alloc->stats().live_bytes == 0);
  CHECK(f.alloc->stats().reserved_bytes == static_cast<int64_t>(12 * kMiB));
  void* b = f.alloc->allocate(12 * kMiB, 1);  // needs a's memory: synchronises, then reuses it
  CHECK(b != nullptr);
  CHECK(f.backend->syncs == 1);
  CHECK(f.alloc->pending_count() == 0);
  CHECK(f.alloc->stats().reserved_bytes == static_cast<int64_t>(12 * kMiB));
  CHECK(f.alloc->stats().live_bytes == static_cast<int64_t>(12 * kMiB));
  f.alloc->deallocate(b);
}

TEST_CASE("caching allocator: a failing synchronisation keeps the block parked") {
  Fixture f;
  void* p = f.alloc->allocate(4096, 1);
  void* keep = f.alloc->allocate(4096, 1);  // keeps the segment in use
  f.alloc->record_stream(p, 2);
  f.backend->fail_record_at = 1;
  f.alloc->deallocate(p);
  f.backend->fail_sync = true;
  SL_CHECK_THROWS(f.alloc->empty_cache(), DeviceError, "fake: cudaDeviceSynchronize failed");
  CHECK(f.alloc->pending_count() == 1);
  CHECK(f.alloc->stats().reserved_bytes == static_cast<int64_t>(CachingSizes::kSmallSegment));
  CHECK(f.alloc->cached_bytes() == CachingSizes::kSmallSegment - 2 * 4096);
  // once the device synchronises, p is cached and reused as any free block
  f.backend->fail_sync = false;
  f.alloc->empty_cache();
  CHECK(f.alloc->pending_count() == 0);
  CHECK(f.alloc->cached_bytes() == CachingSizes::kSmallSegment - 4096);
  void* q = f.alloc->allocate(4096, 1);
  CHECK(q == p);
  f.alloc->deallocate(q);
  f.alloc->deallocate(keep);
}

TEST_CASE("caching allocator: destroyed with a parked block it cannot synchronise") {
  // The destructor reports the failure and frees its bookkeeping, the parked block's too (a
  // leak checker sees the difference: valgrind --leak-check=full on this case).
  Fixture f;
  void* p = f.alloc->allocate(4096, 1);
  f.alloc->record_stream(p, 2);
  f.backend->fail_record_at = 1;
  f.alloc->deallocate(p);
  f.backend->fail_sync = true;
  CHECK_NOTHROW(f.alloc.reset());
}

TEST_CASE("caching allocator: statistics and reset_peak") {
  Fixture f;
  void* a = f.alloc->allocate(3000, 0);
  void* b = f.alloc->allocate(5000, 0);
  MemoryStats s = f.alloc->stats();
  CHECK(s.live_bytes == 8000);
  CHECK(s.peak_bytes == 8000);
  CHECK(s.live_allocs == 2);
  f.alloc->deallocate(b);
  f.alloc->reset_peak();
  CHECK(f.alloc->stats().peak_bytes == 3000);
  f.alloc->deallocate(a);
  f.alloc->deallocate(nullptr);  // ignored
  CHECK(f.alloc->stats().live_bytes == 0);
  CHECK(f.alloc->stats().live_allocs == 0);
}
