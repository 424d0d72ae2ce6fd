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
// When to sort (sorted_accumulate): a cost model in estimated microseconds for an H100/H200-class
// GPU (estimates, not measurements: bench_gpu times both sides of the choice). The simple kernel
// is latency-bound when it runs few threads: about one dependent global read-modify-write
// (kEntryLatencyUs) per entry, entries in a row. The sort is a bitonic network over `sorts` rows
// of P entries (P: entries rounded up to a power of two; index_add sorts one row of k, scatter
// one row per line) in L (L + 1) / 2 launches (L = log2 P), each a launch (kLaunchUs) plus a pass
// reading and writing every key and position (kSortBytesPerEntry at kBytesPerUs). Sorted when
// that is cheaper, except
//  - from kSortedMaxColumns independent output columns (index_add: outer * inner; scatter:
//    lines): 256 blocks, ~2 per SM of a 132-SM GPU, already spread the simple kernel's chains;
//  - above kSortedMaxScratchEntries sorted entries (sorts * P): the sort's scratch (keys,
//    positions, the sorted targets and permutation, ~32 bytes per entry) would exceed 4 GiB.
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

/// From this many independent output columns (index_add: outer * inner; scatter: lines) up the
/// accumulating kernels do not sort.
inline constexpr int64_t kSortedMaxColumns = 65536;
/// Above this many sorted entries (rows x padded length) the accumulating kernels do not sort.
inline constexpr int64_t kSortedMaxScratchEntries = int64_t{1} << 27;
/// The cost model's estimates (Note [Sorted index_add]).
inline constexpr double kEntryLatencyUs = 0.5;
inline constexpr double kLaunchUs = 4.0;
inline constexpr double kSortBytesPerEntry = 32.0;
inline constexpr double kBytesPerUs = 3.0e6;

/// Whether an accumulation of `entries` index entries into each of `columns` independent output
/// columns takes the sorted path, `sorts` rows of `entries` being sorted (index_add: 1; scatter:
/// its lines) (Note [Sorted index_add]).
constexpr bool sorted_accumulate(int64_t columns, int64_t entries, int64_t sorts) {
  if (columns >= kSortedMaxColumns || entries < 2 || sorts < 1) return false;
  int64_t P = 1, L = 0;
  while (P < entries) {
    P *= 2;
    ++L;
  }
  if (sorts > kSortedMaxScratchEntries / P) return false;
  const double pass_us =
      kLaunchUs + static_cast<double>(sorts * P) * kSortBytesPerEntry / kBytesPerUs;
  const double sorted_us = static_cast<double>(L * (L + 1) / 2) * pass_us;
  return sorted_us < static_cast<double>(entries) * kEntryLatencyUs;
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
