// The pinned host allocator's bookkeeping (core/cuda/pinned_uses.h) driven by fake events, so it
// runs on every machine: the block size rule and the bounded record of a block's asynchronous
// uses (Note [Pinned block uses]).
#include <map>

#include "core/cuda/pinned_uses.h"
#include "support/testing.h"

using sl::cuda::PinnedBlockUses;
using sl::cuda::PinnedEventId;
using sl::cuda::PinnedStreamId;

namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;

/// Events that complete when the test says so; a record of a live event makes it pending again.
struct FakeEvents final : sl::cuda::PinnedEvents {
  struct Event {
    int device;
    int records = 0;
    bool done = true;  // an event never recorded counts as complete (as cudaEventQuery says)
  };
  std::map<PinnedEventId, Event> live;
  PinnedEventId next = 1;
  int created = 0, waits = 0;

  PinnedEventId create_event(int device) override {
    ++created;
    live[next] = Event{device};
    return next++;
  }
  void record_event(PinnedEventId e, int device, PinnedStreamId) override {
    Event& ev = live.at(e);
    CHECK(ev.device == device);  // CUDA: an event records only on its own device's streams
    ev.records += 1;
    ev.done = false;
  }
  bool query_event(PinnedEventId e) override { return live.at(e).done; }
  void wait_event(PinnedEventId e) override {
    ++waits;
    live.at(e).done = true;
  }
  void destroy_event(PinnedEventId e) override { live.erase(e); }
  void complete_all() {
    for (auto& [id, ev] : live) ev.done = true;
  }
};

}  // namespace

TEST_CASE("pinned allocator: powers of two up to 1 MiB, multiples of 2 MiB above") {
  using sl::cuda::pinned_block_size;
  CHECK(pinned_block_size(0) == 4 * kKiB);
  CHECK(pinned_block_size(1) == 4 * kKiB);
  CHECK(pinned_block_size(4 * kKiB + 1) == 8 * kKiB);
  CHECK(pinned_block_size(600 * kKiB) == kMiB);
  CHECK(pinned_block_size(kMiB) == kMiB);
  CHECK(pinned_block_size(kMiB + 1) == 2 * kMiB);
  CHECK(pinned_block_size(4 * kMiB) == 4 * kMiB);  // a staging chunk (kStageChunkBytes)
  CHECK(pinned_block_size(5 * kMiB) == 6 * kMiB);
  // a 257 MiB shard: 258 MiB page-locked, where a power of two took 512 MiB
  CHECK(pinned_block_size(257 * kMiB) == 258 * kMiB);
}

TEST_CASE("pinned allocator: a block copied from every step holds one event per stream") {
  FakeEvents ev;
  PinnedBlockUses uses;
  CHECK(uses.done(ev));                                          // nothing recorded
  for (int step = 0; step < 100; ++step) uses.record(ev, 0, 7);  // copies not yet run
  CHECK(uses.size() == 1);
  CHECK(ev.created == 1);
  CHECK(ev.live.size() == 1);
  CHECK(ev.live.begin()->second.records == 100);
  CHECK(!uses.done(ev));  // the latest record is pending: the block is not reusable
  ev.complete_all();
  CHECK(uses.done(ev));
  CHECK(uses.size() == 0);
  CHECK(ev.live.empty());  // events destroyed
}

TEST_CASE("pinned allocator: uses on several streams all count, completed ones are dropped") {
  FakeEvents ev;
  PinnedBlockUses uses;
  uses.record(ev, 0, 7);
  uses.record(ev, 1, 7);  // the same handle on another device is another stream
  uses.record(ev, 0, 9);
  CHECK(uses.size() == 3);
  CHECK(ev.live.size() == 3);
  // a block is free for reuse only when every stream has got past its copy
  auto event_of = [&](int device, int nth) {
    int k = 0;
    for (auto& [id, e] : ev.live) {
      if (e.device == device && k++ == nth) return id;
    }
    return PinnedEventId{0};  // none: the caller's live.at() throws
  };
  ev.live.at(event_of(0, 0)).done = true;
  ev.live.at(event_of(1, 0)).done = true;
  CHECK(!uses.done(ev));  // stream 9 of device 0 still pending
  CHECK(uses.size() == 1);
  // recording drops other streams' completed events and keeps the pending ones
  uses.record(ev, 1, 7);
  CHECK(uses.size() == 2);
  ev.live.at(event_of(0, 0)).done = true;  // device 0's stream 9
  uses.record(ev, 1, 7);                   // re-records device 1's event, drops stream 9's
  CHECK(uses.size() == 1);
  CHECK(ev.live.size() == 1);
  CHECK(!uses.done(ev));
  // wait() blocks for every pending use and releases the events (process exit)
  uses.record(ev, 0, 3);
  uses.wait(ev);
  CHECK(ev.waits == 2);
  CHECK(uses.size() == 0);
  CHECK(ev.live.empty());
}
