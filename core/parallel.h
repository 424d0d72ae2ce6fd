// Intra-op parallelism: one shared thread pool for all CPU kernels (core/parallel.cpp).
//
// The thread count comes from set_num_threads() or, at start, the SL_NUM_THREADS environment
// variable (default: the number of cores). Results never depend on it: elementwise kernels
// write disjoint ranges, and reductions split their input into fixed-size blocks combined in a
// fixed order (see parallel_reduce), so the same inputs give the same bits with 1 or N threads.
//
// Note [Thread pool]
// parallel_for cuts its range into a few chunks per thread; the calling thread and the pool's
// workers claim chunks from one atomic counter until none is left. A worker that is slow to
// wake (another process holds its core) simply finds no work left, so a busy machine degrades
// towards the serial speed instead of stalling every kernel on a fork-join barrier. Workers spin
// briefly after a job (back-to-back kernels are common) and then sleep. Calls from inside a
// chunk, or from a second thread while the pool is busy, run inline. No OpenMP in this header:
// programs built without -fopenmp include it safely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sl {

/// Threads used by CPU kernels.
int get_num_threads();
/// Sets the thread count (>= 1). Throws ValueError otherwise. The BLAS itself always runs
/// single-threaded; matmul parallelises over output tiles on this pool.
void set_num_threads(int n);

namespace detail {
/// True inside a parallel_for chunk (nested calls run inline) or an OpenMP parallel region.
bool in_parallel_region();
/// Threads worth using for `work` items with at least `grain` per thread (1: run inline).
int thread_count_hint(int64_t work, int64_t grain);
/// Runs body(ctx, i) for every i in [0, nchunks) on the pool, the caller taking part; returns
/// when all have run. Rethrows the first exception a chunk threw (the other chunks still run).
void run_chunks(int64_t nchunks, void (*body)(void*, int64_t), void* ctx);
/// Testing only: makes every `every`-th chunk claim yield in the middle (0 turns it off), to
/// provoke the race described in Note [Closing the claim word] (core/parallel.cpp).
void set_pool_claim_yield_for_testing(int every);
}  // namespace detail

/// Calls f(begin_i, end_i) over a partition of [begin, end) in parallel; ranges are at least
/// `grain` long (except the last), and f must not depend on how the range is cut. Runs inline
/// when the range is small, inside another parallel region, or with one thread. The first
/// exception thrown by f is rethrown after all ranges finish.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int nt = detail::thread_count_hint(n, grain);
  if (nt <= 1) {
    f(begin, end);
    return;
  }
  // Up to 4 chunks per thread (a preempted thread then holds back at most a quarter of its
  // share), each at least `grain` long.
  int64_t nchunks = n / grain;
  if (nchunks > int64_t{4} * nt) nchunks = int64_t{4} * nt;
  if (nchunks <= 1) {
    f(begin, end);
    return;
  }
  const int64_t chunk = (n + nchunks - 1) / nchunks;
  nchunks = (n + chunk - 1) / chunk;
  struct Ctx {
    const F* f;
    int64_t begin, end, chunk;
  } ctx{&f, begin, end, chunk};
  detail::run_chunks(
      nchunks,
      [](void* p, int64_t i) {
        const auto* c = static_cast<const Ctx*>(p);
        const int64_t b = c->begin + i * c->chunk;
        const int64_t e = b + c->chunk < c->end ? b + c->chunk : c->end;
        (*c->f)(b, e);
      },
      &ctx);
}

/// Deterministic reduction: [begin, end) is cut into blocks of exactly `block` elements (the last
/// may be shorter) whatever the thread count; map(b, e) -> Acc is computed per block (in
/// parallel), then the partials are combined left to right with combine(acc, partial).
template <class Acc, class Map, class Combine>
Acc parallel_reduce(int64_t begin, int64_t end, int64_t block, Acc init, const Map& map,
                    const Combine& combine) {
  int64_t n = end - begin;
  if (n <= 0) return init;
  int64_t nblocks = (n + block - 1) / block;
  if (nblocks == 1) return combine(init, map(begin, end));
  std::vector<Acc> partial(static_cast<size_t>(nblocks));
  parallel_for(0, nblocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t bi = b0; bi < b1; ++bi) {
      int64_t s = begin + bi * block;
      int64_t e = s + block < end ? s + block : end;
      partial[static_cast<size_t>(bi)] = map(s, e);
    }
  });
  Acc acc = init;
  for (auto& p : partial) acc = combine(acc, p);
  return acc;
}

}  // namespace sl
