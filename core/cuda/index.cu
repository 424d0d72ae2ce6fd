// CUDA kernels of the index family (core/cpu/index.cpp is the reference). Indices were checked
// by generic code (Note [Index checks]) unless checked indexing is off; either way every index
// goes through index_ok before it is used, so every read and write here is in bounds (Note
// [Unchecked indexing]). Kernels that only move values (index_select, gather) work on raw
// elements of 1, 2, 4 or 8 bytes; kernels that add give each output element to one thread, which
// adds in the CPU's order (index order), so results are deterministic and, with every product
// rounded before its sum (no FMA contraction), the CPU's bits.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/dev_types.cuh"
#include "core/cuda/kernels_core.h"
#include "core/cuda/loops.cuh"

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
  return a * b + c;  // integers: exact (wrapping as on the CPU)
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

/// One thread per line along g.dim (lines numbered row-major over the other dims of the index).
template <class T>
__global__ void scatter_kernel(T* out, const T* src, const int64_t* index,
                               const __grid_constant__ IndexGeom g, int64_t lines, bool accumulate,
                               const __grid_constant__ IndexGuard guard) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int d = g.dim;
  const int64_t len = g.sizes[d];
  for (int64_t l = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; l < lines;
       l += step) {
    // the line's coordinates: l row-major over the sizes with dim d taken as 1
    int64_t off[3] = {0, 0, 0};
    int64_t rest = l;
    for (int e = g.ndim - 1; e >= 0; --e) {
      if (e == d) continue;
      const int64_t c = rest % g.sizes[e];
      rest /= g.sizes[e];
      for (int k = 0; k < 3; ++k) off[k] += c * g.strides[k][e];
    }
    for (int64_t j = 0; j < len; ++j) {
      const int64_t t = index[off[2] + j * g.strides[2][d]];
      if (!index_ok(guard, t)) continue;
      const T v = src[off[1] + j * g.strides[1][d]];
      T& y = out[off[0] + t * g.strides[0][d]];
      if (!accumulate) {
        y = v;
      } else if constexpr (std::is_same_v<T, bool>) {
        y = y || v;
      } else {
        y = convert<T>(to_comp(y) + to_comp(v));
      }
    }
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
  if (outer * inner == 0 || k == 0) return;
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      index_add_kernel<T><<<grid_for(outer * inner), kBlockThreads, 0, s>>>(
          static_cast<T*>(out), index, static_cast<const T*>(src), scalar_as<comp_t<T>>(alpha),
          skip, outer, n, inner, k, guard);
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
  const int64_t lines = total / g.sizes[g.dim];
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_kernel<T><<<grid_for(lines), kBlockThreads, 0, s>>>(
        static_cast<T*>(out), static_cast<const T*>(src), index, g, lines, accumulate, guard);
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
