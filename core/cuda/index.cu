// CUDA kernels of the index family (core/cpu/index.cpp is the reference). Indices were checked
// by generic code (Note [Index checks]) unless checked indexing is off; either way every index
// goes through index_ok before it is used, so every read and write here is in bounds (Note
// [Unchecked indexing]). Kernels that only move values (index_select, gather) work on raw
// elements of 1, 2, 4 or 8 bytes; kernels that add give each output element to one thread, which
// adds in the CPU's order (index order), so results are deterministic and, with every product
// rounded before its sum (no FMA contraction), the CPU's bits. When few output columns face many
// index entries, they sort the index first and give each run of one target its own thread (Note
// [Sorted index_add] in index_plan.h); the order of the additions, hence the bits, is the same.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/dev_types.cuh"
#include "core/cuda/index_plan.h"
#include "core/cuda/kernels_core.h"
#include "core/cuda/loops.cuh"
#include "core/cuda/reduce.cuh"
#include "core/int_wrap.h"

namespace sl::cuda {
namespace {

template <class F>
void visit_raw(int elem_size, const char* op, F&& f) {
  switch (elem_size) {
    case 1:
      return f(DevTag<uint8_t>{});
    case 2:
      return f(DevTag<uint16_t>{});
    case 4:
      return f(DevTag<uint32_t>{});
    case 8:
      return f(DevTag<uint64_t>{});
    default:
      break;
  }
  ::sl::detail::throw_error<DTypeError>(op, ": unsupported element size ", elem_size);
}

// a * b + c with the product rounded first (as the CPU computes it)
__device__ __forceinline__ float mul_add_rn(float a, float b, float c) {
  return __fadd_rn(__fmul_rn(a, b), c);
}
__device__ __forceinline__ double mul_add_rn(double a, double b, double c) {
  return __dadd_rn(__dmul_rn(a, b), c);
}
template <class C>
__device__ __forceinline__ C mul_add_rn(C a, C b, C c) {
  using W = wrap_t<C>;  // integers wrap, as on the CPU (Note [Integer wraparound])
  return static_cast<C>(W(a) * W(b) + W(c));
}

/// Writes the first bad index since the last report to the record (Note [Unchecked indexing]).
/// Out of line: the guard's fast path stays one compare and a branch.
__device__ __noinline__ void record_bad_index(const IndexGuard& g, int64_t t) {
  if (atomicCAS(g.claim, 0u, 1u) != 0u) return;  // an earlier error holds the record
  IndexErrorRecord* r = g.record;
  r->op = g.op;
  r->index = t;
  r->size = g.size;
  __threadfence_system();  // the fields reach host memory before `set`
  *static_cast<volatile int32_t*>(&r->set) = 1;
}

/// True when 0 <= t < g.size (one unsigned compare covers negative t); otherwise records t.
__device__ __forceinline__ bool index_ok(const IndexGuard& g, int64_t t) {
  if (static_cast<uint64_t>(t) < static_cast<uint64_t>(g.size)) [[likely]] {
    return true;
  }
  record_bad_index(g, t);
  return false;
}

template <class R>
__global__ void index_select_kernel(R* out, const R* in, const int64_t* index, int64_t outer,
                                    int64_t n, int64_t inner, int64_t k,
                                    const __grid_constant__ IndexGuard guard) {
  const int64_t total = outer * k * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t i = e % inner, r = e / inner;
    const int64_t j = r % k, o = r / k;
    const int64_t t = index[j];
    out[e] = index_ok(guard, t) ? in[(o * n + t) * inner + i] : R{0};
  }
}

template <class T>
__global__ void index_add_kernel(T* out, const int64_t* index, const T* src, comp_t<T> alpha,
                                 int64_t skip, int64_t outer, int64_t n, int64_t inner, int64_t k,
                                 const __grid_constant__ IndexGuard guard) {
  const int64_t total = outer * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t o = e / inner, i = e % inner;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t t = index[j];
      if (!index_ok(guard, t) || t == skip) continue;  // skip -1 (none) must not hide t = -1
      T& y = out[(o * n + t) * inner + i];
      y = convert<T>(mul_add_rn(alpha, to_comp(src[(o * k + j) * inner + i]), to_comp(y)));
    }
  }
}

/// The sorted path of index_add (Note [Sorted index_add]): work item w = p * chunks + c is sorted
/// position p with output columns [c * blockDim.x, (c + 1) * blockDim.x); only the block of a
/// run's first position works (the test is uniform over the block), one thread per column.
/// sorted / perm: the index's targets in stable sorted order and their positions j.
template <class T>
__global__ void index_add_sorted_kernel(T* out, const int64_t* sorted, const int64_t* perm,
                                        const T* src, comp_t<T> alpha, int64_t skip, int64_t outer,
                                        int64_t n, int64_t inner, int64_t k, int64_t chunks,
                                        const __grid_constant__ IndexGuard guard) {
  const int64_t columns = outer * inner;
  const int64_t work = k * chunks;
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const int64_t p = w / chunks;
    if (!run_starts(sorted, 1, p)) continue;
    const int64_t e = (w % chunks) * blockDim.x + threadIdx.x;
    if (e >= columns) continue;
    const int64_t t = sorted[p];
    if (!index_ok(guard, t) || t == skip) continue;  // as the simple kernel, for the whole run
    const int64_t o = e / inner, i = e % inner;
    T* y_at = &out[(o * n + t) * inner + i];
    T y = *y_at;  // this thread alone writes y: kept in a register, rounded to T every step
    walk_run(sorted, perm, 1, k, p, [&](int64_t j) {
      y = convert<T>(mul_add_rn(alpha, to_comp(src[(o * k + j) * inner + i]), to_comp(y)));
    });
    *y_at = y;
  }
}

/// Element offsets of flat position p (row-major over g.sizes) in operands 0..N-1, leaving out
/// dim g.dim; *c_dim gets p's coordinate along g.dim.
template <int N>
__device__ __forceinline__ void geom_offsets(const IndexGeom& g, int64_t p, int64_t (&off)[N],
                                             int64_t* c_dim) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t s = g.sizes[d];
    const int64_t c = p % s;
    p /= s;
    if (d == g.dim) {
      *c_dim = c;
      continue;
    }
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += c * g.strides[k][d];
  }
}

template <class R>
__global__ void gather_kernel(R* out, const R* in, const int64_t* index,
                              const __grid_constant__ IndexGeom g, int64_t total,
                              const __grid_constant__ IndexGuard guard) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < total;
       p += step) {
    int64_t off[3];
    int64_t c = 0;
    geom_offsets<3>(g, p, off, &c);
    const int64_t d = g.dim;
    const int64_t t = index[off[2] + c * g.strides[2][d]];
    out[off[0] + c * g.strides[0][d]] = index_ok(guard, t) ? in[off[1] + t * g.strides[1][d]] : R{0};
  }
}

/// Element offsets of line l in the three operands (lines along g.dim, numbered row-major over
/// the other dims of the index: l row-major over the sizes with dim g.dim taken as 1).
__device__ __forceinline__ void line_offsets(const IndexGeom& g, int64_t l, int64_t (&off)[3]) {
  off[0] = off[1] = off[2] = 0;
  for (int e = g.ndim - 1; e >= 0; --e) {
    if (e == g.dim) continue;
    const int64_t c = l % g.sizes[e];
    l /= g.sizes[e];
    for (int k = 0; k < 3; ++k) off[k] += c * g.strides[k][e];
  }
}

/// One scatter step: y = v, or y += v (bool: y || v) rounded to T.
template <class T>
__device__ __forceinline__ void scatter_step(T& y, T v, bool accumulate) {
  if (!accumulate) {
    y = v;
  } else if constexpr (std::is_same_v<T, bool>) {
    y = y || v;
  } else {
    using W = wrap_t<comp_t<T>>;  // integers wrap (Note [Integer wraparound])
    y = convert<T>(static_cast<comp_t<T>>(W(to_comp(y)) + W(to_comp(v))));
  }
}

/// One thread per line along g.dim.
template <class T>
__global__ void scatter_kernel(T* out, const T* src, const int64_t* index,
                               const __grid_constant__ IndexGeom g, int64_t lines, bool accumulate,
                               const __grid_constant__ IndexGuard guard) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int d = g.dim;
  const int64_t len = g.sizes[d];
  for (int64_t l = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; l < lines;
       l += step) {
    int64_t off[3];
    line_offsets(g, l, off);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t t = index[off[2] + j * g.strides[2][d]];
      if (!index_ok(guard, t)) continue;
      scatter_step(out[off[0] + t * g.strides[0][d]], src[off[1] + j * g.strides[1][d]],
                   accumulate);
    }
  }
}

/// The sorted path of scatter (Note [Sorted index_add]): one thread per (line l, sorted position
/// p); the thread of a run's first position writes the run's target. sorted / perm: each line's
/// index in stable sorted order and the positions j along dim, [before, len, after] (before /
/// after: the index's sizes before / after dim), so line l = b * after + a starts at b * len *
/// after + a with stride `after`.
template <class T>
__global__ void scatter_sorted_kernel(T* out, const T* src, const int64_t* sorted,
                                      const int64_t* perm, const __grid_constant__ IndexGeom g,
                                      int64_t lines, int64_t after, bool accumulate,
                                      const __grid_constant__ IndexGuard guard) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int d = g.dim;
  const int64_t len = g.sizes[d];
  const int64_t total = lines * len;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t l = e / len, p = e % len;
    const int64_t base = (l / after) * len * after + l % after;
    const int64_t* ls = sorted + base;
    const int64_t* lp = perm + base;
    if (!run_starts(ls, after, p)) continue;
    const int64_t t = ls[p * after];
    if (!index_ok(guard, t)) continue;  // as the simple kernel, for the whole run
    int64_t off[3];
    line_offsets(g, l, off);
    T* y_at = &out[off[0] + t * g.strides[0][d]];
    if (!accumulate) {  // the CPU's last write: the run's largest j
      *y_at = src[off[1] + run_last(ls, lp, after, len, p) * g.strides[1][d]];
      continue;
    }
    T y = *y_at;  // this thread alone writes y
    walk_run(ls, lp, after, len, p,
             [&](int64_t j) { scatter_step(y, src[off[1] + j * g.strides[1][d]], true); });
    *y_at = y;
  }
}

constexpr int kNonzeroItems = static_cast<int>(kNonzeroTile / kBlockThreads);
static_assert(kNonzeroItems * kBlockThreads == kNonzeroTile);

/// tile_counts[t] = number of true elements in tile t.
__global__ void __launch_bounds__(kBlockThreads)
    nonzero_count_kernel(const bool* mask, int64_t n, int64_t* tile_counts, int64_t tiles) {
  __shared__ int64_t buf[kBlockThreads];
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t begin = t * kNonzeroTile + static_cast<int64_t>(threadIdx.x) * kNonzeroItems;
    int64_t c = 0;
    for (int q = 0; q < kNonzeroItems; ++q) c += (begin + q < n && mask[begin + q]) ? 1 : 0;
    c = group_sum<kBlockThreads>(c, buf);
    if (threadIdx.x == 0) tile_counts[t] = c;
  }
}

/// Each thread owns kNonzeroItems consecutive elements of the tile; an exclusive scan of the
/// threads' counts gives where each writes.
__global__ void __launch_bounds__(kBlockThreads)
    nonzero_write_kernel(const bool* mask, int64_t n, const int64_t* tile_offsets, int64_t* out,
                         int64_t tiles) {
  __shared__ int64_t scan[kBlockThreads];
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t begin = t * kNonzeroTile + static_cast<int64_t>(threadIdx.x) * kNonzeroItems;
    int64_t c = 0;
    for (int q = 0; q < kNonzeroItems; ++q) c += (begin + q < n && mask[begin + q]) ? 1 : 0;
    scan[threadIdx.x] = c;
    __syncthreads();
    // inclusive Hillis-Steele scan
    for (int s = 1; s < kBlockThreads; s *= 2) {
      const int64_t add = threadIdx.x >= static_cast<unsigned>(s) ? scan[threadIdx.x - s] : 0;
      __syncthreads();
      scan[threadIdx.x] += add;
      __syncthreads();
    }
    int64_t w = tile_offsets[t] + scan[threadIdx.x] - c;
    for (int q = 0; q < kNonzeroItems; ++q) {
      if (begin + q < n && mask[begin + q]) out[w++] = begin + q;
    }
    __syncthreads();  // scan is reused by the next tile
  }
}

unsigned capped_blocks(int64_t b) {
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

}  // namespace

void launch_index_select(int elem_size, void* out, const void* in, const int64_t* index,
                         int64_t outer, int64_t n, int64_t inner, int64_t k,
                         const IndexGuard& guard, cudaStream_t s) {
  const int64_t total = outer * k * inner;
  if (total == 0) return;
  visit_raw(elem_size, "index_select", [&](auto tag) {
    using R = typename decltype(tag)::type;
    index_select_kernel<R><<<grid_for(total), kBlockThreads, 0, s>>>(
        static_cast<R*>(out), static_cast<const R*>(in), index, outer, n, inner, k, guard);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_index_add(DType dt, void* out, const int64_t* index, const void* src, DevScalar alpha,
                      int64_t skip, int64_t outer, int64_t n, int64_t inner, int64_t k,
                      const IndexGuard& guard, cudaStream_t s) {
  SL_CHECK_DTYPE(dt != DType::b8, "index_add: not supported for bool tensors");
  const int64_t columns = outer * inner;
  if (columns == 0 || k == 0) return;
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      if (!sorted_accumulate(columns, k, 1)) {
        index_add_kernel<T><<<grid_for(columns), kBlockThreads, 0, s>>>(
            static_cast<T*>(out), index, static_cast<const T*>(src), scalar_as<comp_t<T>>(alpha),
            skip, outer, n, inner, k, guard);
        CUDA_CHECK_LAUNCH();
        return;
      }
      // Note [Sorted index_add]: the targets in stable order, then a thread per (run, column)
      DeviceScratch sorted(static_cast<size_t>(k) * sizeof(int64_t));
      DeviceScratch perm(static_cast<size_t>(k) * sizeof(int64_t));
      launch_sort(DType::i64, sorted.as<int64_t>(), perm.as<int64_t>(), index, 1, k, 1, k,
                  /*descending=*/false, s);
      const int64_t chunks = (columns + kBlockThreads - 1) / kBlockThreads;
      index_add_sorted_kernel<T><<<capped_blocks(k * chunks), kBlockThreads, 0, s>>>(
          static_cast<T*>(out), sorted.as<int64_t>(), perm.as<int64_t>(),
          static_cast<const T*>(src), scalar_as<comp_t<T>>(alpha), skip, outer, n, inner, k, chunks,
          guard);
      CUDA_CHECK_LAUNCH();
    }
  });
}

void launch_gather(int elem_size, void* out, const void* in, const int64_t* index,
                   const IndexGeom& g, const IndexGuard& guard, cudaStream_t s) {
  int64_t total = 1;
  for (int d = 0; d < g.ndim; ++d) total *= g.sizes[d];
  if (total == 0) return;
  visit_raw(elem_size, "gather", [&](auto tag) {
    using R = typename decltype(tag)::type;
    gather_kernel<R><<<grid_for(total), kBlockThreads, 0, s>>>(
        static_cast<R*>(out), static_cast<const R*>(in), index, g, total, guard);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_scatter(DType dt, void* out, const void* src, const int64_t* index, const IndexGeom& g,
                    bool accumulate, const IndexGuard& guard, cudaStream_t s) {
  int64_t total = 1;
  for (int d = 0; d < g.ndim; ++d) total *= g.sizes[d];
  if (total == 0) return;
  const int64_t len = g.sizes[g.dim];
  const int64_t lines = total / len;
  // the sorted path reads the index as [before, len, after]: it needs it contiguous (it is:
  // generic code passes a contiguous index), else the simple kernel
  int64_t before = 1, after = 1, want_stride = 1;
  bool contiguous = true;
  for (int d = g.ndim - 1; d >= 0; --d) {
    contiguous = contiguous && (g.sizes[d] == 1 || g.strides[2][d] == want_stride);
    want_stride *= g.sizes[d];
    if (d < g.dim) before *= g.sizes[d];
    if (d > g.dim) after *= g.sizes[d];
  }
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (!contiguous || !sorted_accumulate(lines, len, lines)) {
      scatter_kernel<T><<<grid_for(lines), kBlockThreads, 0, s>>>(
          static_cast<T*>(out), static_cast<const T*>(src), index, g, lines, accumulate, guard);
      CUDA_CHECK_LAUNCH();
      return;
    }
    // Note [Sorted index_add]: each line's targets in stable order, then a thread per entry
    DeviceScratch sorted(static_cast<size_t>(total) * sizeof(int64_t));
    DeviceScratch perm(static_cast<size_t>(total) * sizeof(int64_t));
    launch_sort(DType::i64, sorted.as<int64_t>(), perm.as<int64_t>(), index, before, len, after,
                len, /*descending=*/false, s);
    scatter_sorted_kernel<T><<<grid_for(total), kBlockThreads, 0, s>>>(
        static_cast<T*>(out), static_cast<const T*>(src), sorted.as<int64_t>(),
        perm.as<int64_t>(), g, lines, after, accumulate, guard);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_nonzero_count(const bool* mask, int64_t n, int64_t* tile_counts, cudaStream_t s) {
  const int64_t tiles = (n + kNonzeroTile - 1) / kNonzeroTile;
  if (tiles == 0) return;
  nonzero_count_kernel<<<capped_blocks(tiles), kBlockThreads, 0, s>>>(mask, n, tile_counts, tiles);
  CUDA_CHECK_LAUNCH();
}

void launch_nonzero_write(const bool* mask, int64_t n, const int64_t* tile_offsets, int64_t* out,
                          cudaStream_t s) {
  const int64_t tiles = (n + kNonzeroTile - 1) / kNonzeroTile;
  if (tiles == 0) return;
  nonzero_write_kernel<<<capped_blocks(tiles), kBlockThreads, 0, s>>>(mask, n, tile_offsets, out,
                                                                      tiles);
  CUDA_CHECK_LAUNCH();
}

}  // namespace sl::cuda
