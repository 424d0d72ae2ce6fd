// How the accumulating index kernels of core/cuda/index.cu (index_add, scatter_add, scatter) split
// their work (internal header of the CUDA backend; no CUDA types, so it is built, and unit-tested
// on the host, in every build: tests/cuda/test_cuda_index.cpp).
//
// Note [Sorted index_add]
// index_add adds src[:, j, :] into out[:, index[j], :] for j = 0, 1, ..., k - 1, rounding every
// step to the output dtype; the CUDA kernels must give the CPU's bits, so the additions into one
// output element keep that order (ascending j) and that rounding. Two ways, the same bits:
//  - simple: one thread per output column (o, i) walks all k entries in order. Parallel over
//    outer * inner only, so nearly serial when that is small and k large: embedding backward is
//    index_add(zeros [V, D], 0, tokens, grad rows) with outer = 1, inner = D, k = tokens.
//  - sorted: a stable sort of the k entries by target (launch_sort: the order (value, position),
//    so equal targets keep ascending j) cuts them into runs of one target each, in ascending j;
//    one thread per (run, o, i) walks its run in order with the same step as the simple kernel.
//    Different runs have different targets, so each output element is still written by exactly
//    one thread, in the same order: no atomics, same bits. A run's target goes through index_ok
//    (Note [Unchecked indexing]) before anything is read or written: a bad target is recorded and
//    its run skipped, as the simple kernel skips each of its entries; a run of `skip` is skipped.
// scatter_add and scatter along dim do the same per line (a line: the entries along dim with
// the other coordinates fixed; each line's index is sorted on its own): scatter_add walks the run
// adding in order, scatter writes the run's last (largest) j, the CPU's last write.
//
// When to sort (sorted_accumulate): the sort is a bitonic network of L (L + 1) / 2 launches
// (L = log2 of k rounded up to a power of two), a few microseconds each; the simple kernel costs
// about one dependent global read-modify-write (~0.5 us of latency) per entry per thread when
// too few threads run to hide it. Estimates for an H100/H200-class GPU, not measurements:
//  - k < kSortedMinEntries (256): the sort (36 launches at k = 256) costs about what walking k
//    entries does; below, the simple kernel;
//  - columns >= kSortedMaxColumns (65536 output columns: 256 blocks, ~2 per SM of a 132-SM GPU)
//    already spread over the GPU; the simple kernel then does the same additions without the
//    sort.
// Worst case of the sorted path: all k entries one target, one run, walked serially as the
// simple kernel would (plus the sort). Only the speed depends on the choice, never the bits.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SL_INDEX_HD __host__ __device__ __forceinline__
#else
#define SL_INDEX_HD inline
#endif

namespace sl::cuda {

/// Below this many entries per line the accumulating kernels do not sort (Note [Sorted
/// index_add]).
inline constexpr int64_t kSortedMinEntries = 256;
/// From this many independent output columns (index_add: outer * inner; scatter: lines) up the
/// accumulating kernels do not sort.
inline constexpr int64_t kSortedMaxColumns = 65536;

/// Whether an accumulation of `entries` index entries into each of `columns` independent output
/// columns takes the sorted path (Note [Sorted index_add]).
constexpr bool sorted_accumulate(int64_t columns, int64_t entries) {
  return entries >= kSortedMinEntries && columns < kSortedMaxColumns;
}

/// Whether position p (0 <= p < k) of a sorted index starts a run of equal targets; entry r of
/// the index is at sorted[r * stride].
SL_INDEX_HD bool run_starts(const int64_t* sorted, int64_t stride, int64_t p) {
  return p == 0 || sorted[p * stride] != sorted[(p - 1) * stride];
}

/// Calls step(j) for the positions j of the run starting at p, in order (ascending j when the
/// sort was stable); sorted / perm hold the sorted targets and their positions, entry r at
/// r * stride, k entries.
template <class Step>
SL_INDEX_HD void walk_run(const int64_t* sorted, const int64_t* perm, int64_t stride, int64_t k,
                          int64_t p, Step&& step) {
  const int64_t t = sorted[p * stride];
  for (int64_t q = p; q < k && sorted[q * stride] == t; ++q) step(perm[q * stride]);
}

/// The last position of the run starting at p (scatter without accumulation keeps its write).
SL_INDEX_HD int64_t run_last(const int64_t* sorted, const int64_t* perm, int64_t stride, int64_t k,
                             int64_t p) {
  const int64_t t = sorted[p * stride];
  int64_t q = p;
  while (q + 1 < k && sorted[(q + 1) * stride] == t) ++q;
  return perm[q * stride];
}

}  // namespace sl::cuda
