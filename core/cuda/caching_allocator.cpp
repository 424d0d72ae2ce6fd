#include "core/cuda/caching_allocator.h"

#include <cstdio>
#include <exception>

#include "core/error.h"
#include "core/profiler.h"

namespace sl::cuda {

/// A piece of a segment. Blocks of one segment form a doubly linked list in address order.
struct CachingAllocator::Block {
  StreamId stream = 0;
  size_t size = 0;       ///< bytes of this block (multiple of kMinBlock)
  size_t requested = 0;  ///< bytes asked for (0 when free)
  char* ptr = nullptr;
  bool allocated = false;
  bool small = false;  ///< from the small pool
  Block* prev = nullptr;
  Block* next = nullptr;
  std::vector<StreamId> other_streams;  ///< streams besides `stream` that used it
};

bool CachingAllocator::BlockLess::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

CachingAllocator::CachingAllocator(std::unique_ptr<DeviceMemoryBackend> backend)
    : backend_(std::move(backend)) {
  stats_.set_profile_name(profiler::intern(backend_->name() + " memory"));
}

CachingAllocator::~CachingAllocator() {
  // Used by tests with a host backend; the process-wide CUDA allocators are never destroyed
  // (the CUDA runtime may already be gone at exit).
  try {
    process_events(true);
    release_cached_segments();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "CachingAllocator: error while releasing memory: %s\n", e.what());
  }
  // Whatever is left (blocks of segments still in use) is only bookkeeping now.
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (Block* b : *pool) delete b;
  }
  for (auto& [p, b] : allocated_) delete b;
  for (PendingFree& f : pending_) delete f.block;
}

size_t CachingAllocator::round_size(size_t nbytes) {
  constexpr size_t m = CachingSizes::kMinBlock;
  if (nbytes < m) return m;
  return (nbytes + m - 1) / m * m;
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= CachingSizes::kSmallRequest) return CachingSizes::kSmallSegment;
  if (rounded < CachingSizes::kMidRequest) return CachingSizes::kLargeSegment;
  constexpr size_t r = CachingSizes::kRoundLarge;
  return (rounded + r - 1) / r * r;
}

CachingAllocator::Block* CachingAllocator::find_free(Pool& pool, StreamId stream, size_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  key.ptr = nullptr;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(Pool& pool, StreamId stream, size_t size,
                                                       size_t requested) {
  size_t seg = segment_size(size);
  void* p = backend_->raw_alloc(seg);
  if (!p) {
    // Out of memory: make every cached segment available again, then retry once.
    process_events(true);
    release_cached_segments();
    p = backend_->raw_alloc(seg);
    if (!p) throw_oom(requested, size);
  }
  auto* b = new Block;
  b->stream = stream;
  b->size = seg;
  b->ptr = static_cast<char*>(p);
  b->small = &pool == &small_pool_;
  reserved_ += seg;
  ++segments_;
  stats_.set_reserved(static_cast<int64_t>(reserved_));
  return b;
}

void CachingAllocator::throw_oom(size_t requested, size_t rounded) {
  size_t free_b = 0, total_b = 0;
  try {
    backend_->mem_info(&free_b, &total_b);
  } catch (const std::exception&) {
  }
  MemoryStats s = stats_.snapshot(false);
  size_t cached = 0;
  for (Block* b : small_pool_) cached += b->size;
  for (Block* b : large_pool_) cached += b->size;
  detail::throw_error<OutOfMemoryError>(
      backend_->name(), ": out of memory: requested ", requested, " bytes (segment of ",
      segment_size(rounded), " bytes); the device has ", free_b, " bytes free of ", total_b,
      "; this allocator reserves ", reserved_, " bytes (", cached, " cached in free blocks, ",
      s.live_bytes,
      " held by tensors). Free tensors or call empty_cache; memory_stats() shows "
      "the peak");
}

void* CachingAllocator::allocate(size_t nbytes, StreamId stream) {
  SL_CHECK_T(OutOfMemoryError, nbytes <= (size_t{1} << 62), backend_->name(),
             ": out of memory: requested ", nbytes, " bytes, beyond any device");
  std::lock_guard<std::mutex> lock(mu_);
  process_events(false);
  const size_t size = round_size(nbytes);
  const bool small = size <= CachingSizes::kSmallRequest;
  Pool& pool = small ? small_pool_ : large_pool_;
  Block* b = find_free(pool, stream, size);
  if (!b) b = new_segment(pool, stream, size, nbytes);
  // Split off the remainder when it is worth keeping as a block of its own.
  size_t rest = b->size - size;
  if (rest >= (small ? CachingSizes::kMinBlock : CachingSizes::kSmallRequest + 1)) {
    auto* r = new Block;
    r->stream = b->stream;
    r->size = rest;
    r->ptr = b->ptr + size;
    r->small = b->small;
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = size;
    pool.insert(r);
  }
  b->allocated = true;
  b->requested = nbytes;
  allocated_[b->ptr] = b;
  stats_.on_alloc(nbytes);
  return b->ptr;
}

void CachingAllocator::deallocate(void* ptr) {
  if (!ptr) return;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocated_.find(ptr);
    if (it == allocated_.end()) {
      std::fprintf(stderr, "%s allocator: free of unknown pointer %p ignored\n",
                   backend_->name().c_str(), ptr);
      return;
    }
    Block* b = it->second;
    if (b->other_streams.empty()) {
      allocated_.erase(it);
      stats_.on_free(b->requested);
      b->requested = 0;
      free_block(b);
      return;
    }
    // Room first, so that nothing below but record_event can throw: a recorded event is never
    // dropped, and the block always ends up in pending_ (Note [Caching allocator]).
    PendingFree f{b, {}, false};
    f.events.reserve(b->other_streams.size());
    pending_.reserve(pending_.size() + 1);
    std::string error;
    for (StreamId s : b->other_streams) {
      try {
        f.events.push_back(backend_->record_event(s));
      } catch (const std::exception& e) {
        error = e.what();
        f.unfenced = true;
        break;
      } catch (...) {
        error = "unknown exception";
        f.unfenced = true;
        break;
      }
    }
    allocated_.erase(it);
    stats_.on_free(b->requested);
    b->requested = 0;
    b->other_streams.clear();
    pending_.push_back(std::move(f));
    if (!error.empty()) {
      std::fprintf(stderr,
                   "%s allocator: recording a stream event while freeing %p failed (%s); the "
                   "block stays reserved until empty_cache or an out-of-memory retry "
                   "synchronises the device\n",
                   backend_->name().c_str(), ptr, error.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "caching allocator: error while freeing %p: %s\n", ptr, e.what());
  }
}

void CachingAllocator::record_stream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  SL_CHECK(it != allocated_.end(), "record_stream: pointer is not an allocated block of ",
           backend_->name());
  Block* b = it->second;
  if (stream == b->stream) return;
  for (StreamId s : b->other_streams)
    if (s == stream) return;
  b->other_streams.push_back(stream);
}

void CachingAllocator::free_block(Block* b) {
  Pool& pool = b->small ? small_pool_ : large_pool_;
  b->allocated = false;
  // Merge with free neighbours (they are in the pool; remove them first).
  if (b->prev && pool.count(b->prev)) {  // a neighbour is free iff it is in the pool
    Block* p = b->prev;
    pool.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  if (b->next && pool.count(b->next)) {
    Block* n = b->next;
    pool.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  pool.insert(b);
}

void CachingAllocator::process_events(bool wait) {
  // Unfenced blocks (Note [Caching allocator]) are freed only after a device synchronisation,
  // done once, and only when waiting; if it throws, nothing has changed yet.
  bool synced = false;
  if (wait) {
    for (const PendingFree& f : pending_) {
      if (f.unfenced) {
        backend_->synchronize();
        synced = true;
        break;
      }
    }
  }
  for (size_t i = 0; i < pending_.size();) {
    PendingFree& f = pending_[i];
    bool done = true;
    if (f.unfenced) {
      done = synced;
    } else {
      for (EventId e : f.events) {
        if (wait) {
          backend_->wait_event(e);
        } else if (!backend_->query_event(e)) {
          done = false;
          break;
        }
      }
    }
    if (!done) {
      ++i;
      continue;
    }
    // Out of pending_ and into the pool before the events are destroyed: a destroy that throws
    // then leaks event handles, never a block, and no event is destroyed twice.
    std::vector<EventId> events = std::move(f.events);
    Block* b = f.block;
    if (i + 1 != pending_.size()) pending_[i] = std::move(pending_.back());
    pending_.pop_back();
    free_block(b);
    for (EventId e : events) backend_->destroy_event(e);
  }
}

size_t CachingAllocator::release_cached_segments() {
  size_t released = 0;
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev || b->next) {  // part of a segment still in use
        ++it;
        continue;
      }
      it = pool->erase(it);
      backend_->raw_free(b->ptr);
      reserved_ -= b->size;
      --segments_;
      released += b->size;
      delete b;
    }
  }
  stats_.set_reserved(static_cast<int64_t>(reserved_));
  return released;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  process_events(true);
  release_cached_segments();
}

size_t CachingAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (Block* b : small_pool_) n += b->size;
  for (Block* b : large_pool_) n += b->size;
  return n;
}

size_t CachingAllocator::pending_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

size_t CachingAllocator::segment_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segments_;
}

}  // namespace sl::cuda
