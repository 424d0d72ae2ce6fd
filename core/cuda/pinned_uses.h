// The pinned host allocator's bookkeeping (core/cuda/pinned_allocator.cpp), free of CUDA types
// so it is unit-tested on any machine (tests/cuda/test_pinned_uses.cpp drives it with fake
// events): the size rule of pinned blocks and the record of the asynchronous copies that read a
// block.
//
// Note [Pinned block uses]
// A host-to-device copy from a pinned block is queued on a stream and read by the DMA engine
// later, so the block must not be handed out again before the copy has run. The allocator
// records an event after each such copy; a freed block is reused (or returned to the driver)
// only when every recorded event has completed. Work queued on one stream runs in order, so the
// latest event recorded on a stream covers every earlier copy on it: a block keeps at most one
// event per (device, stream), re-recorded by each new copy, and recording also drops the events
// of other streams that have completed. The record of a block that lives long and is copied
// every step (the offloaded optimizer's parameter shards, Note [Optimizer offload] in
// dist/sharded_optimizer.h) thus stays at one event per stream that copied from it, instead of
// growing by one CUDA event per copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sl::cuda {

/// Pinned blocks hold at least 4 KiB. Requests up to kPinnedSmallRequest get a power of two, so
/// blocks of one size class are interchangeable; larger ones a multiple of kPinnedRoundLarge,
/// so a large block wastes at most 2 MiB of page-locked memory instead of up to half of it. A
/// freed block serves later requests of the same rounded size.
inline constexpr size_t kPinnedMinBlock = size_t{4} << 10;      // 4 KiB
inline constexpr size_t kPinnedSmallRequest = size_t{1} << 20;  // 1 MiB
inline constexpr size_t kPinnedRoundLarge = size_t{2} << 20;    // 2 MiB

/// The size of the pinned block that serves a request of nbytes (rule above).
inline size_t pinned_block_size(size_t nbytes) {
  if (nbytes > kPinnedSmallRequest) {
    return (nbytes + kPinnedRoundLarge - 1) / kPinnedRoundLarge * kPinnedRoundLarge;
  }
  size_t size = kPinnedMinBlock;
  while (size < nbytes) size *= 2;
  return size;
}

/// An opaque event handle (cudaEvent_t cast to an integer).
using PinnedEventId = uintptr_t;
/// An opaque stream handle (cudaStream_t cast to an integer).
using PinnedStreamId = uintptr_t;

/// What the record of a block's uses needs from the runtime.
class PinnedEvents {
 public:
  virtual ~PinnedEvents() = default;
  /// A new event of `device`, not yet recorded.
  virtual PinnedEventId create_event(int device) = 0;
  /// Records e (an event of `device`) on `stream` of `device` now; a later query or wait
  /// concerns this record only.
  virtual void record_event(PinnedEventId e, int device, PinnedStreamId stream) = 0;
  /// True when the event's last record has completed (does not block).
  virtual bool query_event(PinnedEventId e) = 0;
  /// Blocks the host until the event's last record has completed; never throws.
  virtual void wait_event(PinnedEventId e) = 0;
  /// Never throws.
  virtual void destroy_event(PinnedEventId e) = 0;
};

/// The asynchronous uses of one pinned block (Note [Pinned block uses]): at most one event per
/// (device, stream). Not thread-safe (the allocator holds its lock). The owner calls wait() or
/// done() until true before dropping it, or its events leak.
class PinnedBlockUses {
 public:
  /// Notes work queued on `stream` of `device` now that reads the block: re-records the
  /// stream's event (creating it on the stream's first use) and destroys the completed events
  /// of other streams.
  void record(PinnedEvents& ev, int device, PinnedStreamId stream) {
    bool found = false;
    for (size_t i = 0; i < uses_.size();) {
      Use& u = uses_[i];
      if (u.device == device && u.stream == stream) {
        ev.record_event(u.event, device, stream);
        found = true;
        ++i;
      } else if (ev.query_event(u.event)) {
        ev.destroy_event(u.event);
        uses_[i] = uses_.back();
        uses_.pop_back();
      } else {
        ++i;
      }
    }
    if (found) return;
    const PinnedEventId e = ev.create_event(device);
    try {
      ev.record_event(e, device, stream);
    } catch (...) {
      ev.destroy_event(e);
      throw;
    }
    uses_.push_back(Use{device, stream, e});
  }
  /// True when every recorded use has completed; destroys the events of those that have.
  bool done(PinnedEvents& ev) {
    for (size_t i = 0; i < uses_.size();) {
      if (ev.query_event(uses_[i].event)) {
        ev.destroy_event(uses_[i].event);
        uses_[i] = uses_.back();
        uses_.pop_back();
      } else {
        ++i;
      }
    }
    return uses_.empty();
  }
  /// Blocks until every recorded use has completed, and destroys the events. Never throws.
  void wait(PinnedEvents& ev) noexcept {
    for (const Use& u : uses_) {
      ev.wait_event(u.event);
      ev.destroy_event(u.event);
    }
    uses_.clear();
  }
  /// Events held: one per stream with a use not yet seen completed.
  size_t size() const { return uses_.size(); }

 private:
  struct Use {
    int device;
    PinnedStreamId stream;
    PinnedEventId event;
  };
  std::vector<Use> uses_;
};

}  // namespace sl::cuda
