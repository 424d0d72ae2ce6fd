// Intra-op parallelism: one OpenMP thread pool shared by all CPU kernels.
//
// The thread count comes from set_num_threads() or, at start, the SL_NUM_THREADS environment
// variable (default: the number of cores). Results never depend on it: elementwise kernels
// write disjoint ranges, and reductions split their input into fixed-size blocks combined in a
// fixed order (see parallel_reduce), so the same inputs give the same bits with 1 or N threads.
#pragma once

#include <cstdint>
#include <exception>
#include <vector>

namespace sl {

/// Threads used by CPU kernels.
int get_num_threads();
/// Sets the thread count (>= 1). Throws ValueError otherwise. Also sets the BLAS's count.
void set_num_threads(int n);

namespace detail {
bool in_parallel_region();
int omp_thread_count_hint(int64_t work, int64_t grain);
void run_parallel(int nthreads, void (*body)(void*, int, int), void* ctx);
}  // namespace detail

/// Calls f(begin_i, end_i) over a partition of [begin, end) in parallel; ranges are at least
/// `grain` long (except the last). Runs inline when the range is small, inside another parallel
/// region, or with one thread. The first exception thrown by f is rethrown after all finish.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  int64_t n = end - begin;
  if (n <= 0) return;
  int nt = detail::omp_thread_count_hint(n, grain);
  if (nt <= 1) {
    f(begin, end);
    return;
  }
  struct Ctx {
    const F* f;
    int64_t begin, end;
    std::exception_ptr err;
  } ctx{&f, begin, end, nullptr};
  detail::run_parallel(
      nt,
      [](void* p, int tid, int nthreads) {
        auto* c = static_cast<Ctx*>(p);
        int64_t total = c->end - c->begin;
        int64_t chunk = (total + nthreads - 1) / nthreads;
        int64_t b = c->begin + chunk * tid;
        int64_t e = b + chunk < c->end ? b + chunk : c->end;
        if (b >= e) return;
        try {
          (*c->f)(b, e);
        } catch (...) {
#pragma omp critical(sl_parallel_error)
          if (!c->err) c->err = std::current_exception();
        }
      },
      &ctx);
  if (ctx.err) std::rethrow_exception(ctx.err);
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
