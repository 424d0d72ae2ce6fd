// CUDA kernels of the sort family: a bitonic sorting network over every slice at once.
//
// Each slice of n elements is copied into a scratch row of P = next power of two >= n (key in
// the compute type, position as int64), padded with entries that order after everything. The
// order is total: (value, then position), NaN after every number (before in descending order),
// as core/cpu/sort.cpp defines it, so whatever network sorts it, the result is the unique sorted
// order: the CPU's, stable, and independent of the launch configuration. The network runs as
// log2(P) (log2(P) + 1) / 2 launches, each a compare-exchange of disjoint pairs over all rows;
// topk sorts the whole slice and keeps its first k.
#include <cmath>

#include "core/cuda/dev_types.cuh"
#include "core/cuda/kernels_core.h"
#include "core/cuda/loops.cuh"
#include "core/cuda/reduce.cuh"

namespace sl::cuda {
namespace {

/// a before b in ascending order, NaN last.
template <class C>
__device__ __forceinline__ bool less_nan_last(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (b != b) return a == a;
    return a < b;
  } else {
    return a < b;
  }
}

template <class C>
struct Before {
  int64_t n;
  bool descending;
  /// Entry (ka, ia) strictly before (kb, ib); positions >= n are padding (last).
  __device__ __forceinline__ bool operator()(C ka, int64_t ia, C kb, int64_t ib) const {
    if (ia >= n) return false;
    if (ib >= n) return true;
    const bool ab = descending ? less_nan_last(kb, ka) : less_nan_last(ka, kb);
    const bool ba = descending ? less_nan_last(ka, kb) : less_nan_last(kb, ka);
    return ab || (!ba && ia < ib);
  }
};

template <class T>
__global__ void sort_init_kernel(comp_t<T>* keys, int64_t* pos, const T* in, int64_t rows,
                                 int64_t P, int64_t n, int64_t inner) {
  const int64_t total = rows * P;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t row = e / P, r = e % P;
    if (r < n) {
      const int64_t o = row / inner, i = row % inner;
      keys[e] = to_comp(in[(o * n + r) * inner + i]);
      pos[e] = r;
    } else {
      keys[e] = comp_t<T>{};
      pos[e] = n;  // padding
    }
  }
}

/// One stage (k, j) of the network: entry r of each row is compared with r ^ j; the thread of
/// the lower one does the exchange, so pairs are disjoint.
template <class C>
__global__ void bitonic_step_kernel(C* keys, int64_t* pos, int64_t rows, int64_t P, int64_t k,
                                    int64_t j, Before<C> before) {
  const int64_t total = rows * P;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t r = e % P, partner = r ^ j;
    if (partner <= r) continue;
    const int64_t a = e, b = e - r + partner;
    const C ka = keys[a], kb = keys[b];
    const int64_t ia = pos[a], ib = pos[b];
    const bool ascending_block = (r & k) == 0;
    const bool swap = ascending_block ? before(kb, ib, ka, ia) : before(ka, ia, kb, ib);
    if (swap) {
      keys[a] = kb;
      keys[b] = ka;
      pos[a] = ib;
      pos[b] = ia;
    }
  }
}

template <class T>
__global__ void sort_write_kernel(T* values, int64_t* indices, const T* in, const int64_t* pos,
                                  int64_t outer, int64_t n, int64_t inner, int64_t k, int64_t P) {
  const int64_t total = outer * k * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t i = e % inner, r = (e / inner) % k, o = e / (inner * k);
    const int64_t p = pos[(o * inner + i) * P + r];
    values[e] = in[(o * n + p) * inner + i];
    indices[e] = p;
  }
}

}  // namespace

void launch_sort(DType dt, void* values, int64_t* indices, const void* in, int64_t outer, int64_t n,
                 int64_t inner, int64_t k, bool descending, cudaStream_t s) {
  if (outer * inner * k == 0) return;
  int64_t P = 1;
  while (P < n) P *= 2;
  const int64_t rows = outer * inner;
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = comp_t<T>;
    DeviceScratch keys(static_cast<size_t>(rows * P) * sizeof(C));
    DeviceScratch pos(static_cast<size_t>(rows * P) * sizeof(int64_t));
    const unsigned grid = grid_for(rows * P);
    sort_init_kernel<T><<<grid, kBlockThreads, 0, s>>>(
        keys.as<C>(), pos.as<int64_t>(), static_cast<const T*>(in), rows, P, n, inner);
    CUDA_CHECK_LAUNCH();
    const Before<C> before{n, descending};
    for (int64_t kk = 2; kk <= P; kk *= 2) {
      for (int64_t j = kk / 2; j > 0; j /= 2) {
        bitonic_step_kernel<C><<<grid, kBlockThreads, 0, s>>>(keys.as<C>(), pos.as<int64_t>(), rows,
                                                              P, kk, j, before);
        CUDA_CHECK_LAUNCH();
      }
    }
    sort_write_kernel<T><<<grid_for(outer * k * inner), kBlockThreads, 0, s>>>(
        static_cast<T*>(values), indices, static_cast<const T*>(in), pos.as<int64_t>(), outer, n,
        inner, k, P);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sl::cuda
