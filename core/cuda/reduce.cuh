// Reduction machinery for CUDA kernels (internal header; device code).
//
// Inputs are contiguous [outer, R, inner] (Note [Reduction layout]). A policy P says how to
// reduce: P::Acc, identity(), map(value, r, out_index) and combine(a, b); a store functor writes
// a finished accumulator. Two kernels:
//  - rows (inner == 1): G threads (32 or 256) reduce one row segment, each thread keeping four
//    loads in flight; a fixed-order tree combines them (Note [Group reductions]);
//  - columns (inner > 1): one thread per output column, walking R in order (coalesced over
//    inner).
// When there are few outputs and R is long, R is cut into `chunks` fixed-length pieces whose
// partial accumulators ([outer, chunks, inner]) a second launch combines. The cut depends only
// on the shape, so results are the same bits on every run.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/allocator.h"
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/check.h"
#include "core/cuda/dev_types.cuh"
#include "core/cuda/loops.cuh"
#include "core/int_wrap.h"

namespace sl::cuda {

/// Device scratch memory from the caching allocator of the current device, freed (stream-
/// ordered) at scope exit.
class DeviceScratch {
 public:
  explicit DeviceScratch(size_t nbytes) : nbytes_(nbytes) {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    alloc_ = &get_allocator(Device(DeviceKind::cuda, dev));
    ptr_ = alloc_->allocate(nbytes);
  }
  ~DeviceScratch() { alloc_->deallocate(ptr_, nbytes_); }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  size_t nbytes_;
  Allocator* alloc_;
  void* ptr_;
};

/// How R is cut (see the header comment).
struct ReducePlan {
  int64_t chunks = 1;
  int64_t chunk_len = 0;
};

inline ReducePlan plan_reduce(int64_t outer, int64_t R, int64_t inner) {
  ReducePlan p;
  const int64_t outputs = outer * inner;
  if (inner == 1) {
    if (outputs < 1024 && R > 4096) {
      p.chunks = std::min((R + 4095) / 4096, (2048 + outputs - 1) / outputs);
    }
  } else if (outputs < 65536 && R > 64) {
    p.chunks = std::min((R + 63) / 64, (65536 + outputs - 1) / outputs);
  }
  if (p.chunks < 1) p.chunks = 1;
  p.chunk_len = R > 0 ? (R + p.chunks - 1) / p.chunks : 0;
  return p;
}

template <int G, class P, class In, class Store>
__global__ void __launch_bounds__(kBlockThreads)
    reduce_rows_kernel(P p, const In* in, int64_t units, int64_t R, int64_t chunks,
                       int64_t chunk_len, Store store) {
  using Acc = typename P::Acc;
  constexpr int kUnitsPerBlock = kBlockThreads / G;
  __shared__ Acc buf[kBlockThreads];
  const int lane = static_cast<int>(threadIdx.x) % G;
  const int slot = static_cast<int>(threadIdx.x) / G;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kUnitsPerBlock; base < units;
       base += static_cast<int64_t>(gridDim.x) * kUnitsPerBlock) {
    const int64_t unit = base + slot;
    Acc acc = p.identity();
    if (unit < units) {
      const int64_t o = unit / chunks, c = unit % chunks;
      const int64_t begin = c * chunk_len;
      const int64_t end = begin + chunk_len < R ? begin + chunk_len : R;
      const In* row = in + o * R;
      // four loads in flight per thread, combined in the order of the plain loop (same bits)
      int64_t r = begin + lane;
      for (; r + 3 * G < end; r += 4 * G) {
        const In v0 = row[r], v1 = row[r + G], v2 = row[r + 2 * G], v3 = row[r + 3 * G];
        acc = p.combine(acc, p.map(v0, r, o));
        acc = p.combine(acc, p.map(v1, r + G, o));
        acc = p.combine(acc, p.map(v2, r + 2 * G, o));
        acc = p.combine(acc, p.map(v3, r + 3 * G, o));
      }
      for (; r < end; r += G) acc = p.combine(acc, p.map(row[r], r, o));
    }
    acc = group_reduce<G>(acc, buf, [&p](const Acc& a, const Acc& b) { return p.combine(a, b); });
    if (lane == 0 && unit < units) store(unit, acc);
  }
}

template <class P, class In, class Store>
__global__ void __launch_bounds__(kBlockThreads)
    reduce_cols_kernel(P p, const In* in, int64_t outer, int64_t R, int64_t inner, int64_t chunks,
                       int64_t chunk_len, Store store) {
  using Acc = typename P::Acc;
  const int64_t total = outer * chunks * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t i = t % inner, q = t / inner;
    const int64_t c = q % chunks, o = q / chunks;
    const int64_t begin = c * chunk_len;
    const int64_t end = begin + chunk_len < R ? begin + chunk_len : R;
    const int64_t out_index = o * inner + i;
    const In* col = in + o * R * inner + i;
    Acc acc = p.identity();
    for (int64_t r = begin; r < end; ++r) acc = p.combine(acc, p.map(col[r * inner], r, out_index));
    store(t, acc);
  }
}

/// Pass-2 policy: combines accumulators produced by P.
template <class P>
struct CombineOnly {
  using Acc = typename P::Acc;
  P p;
  __device__ Acc identity() const { return p.identity(); }
  __device__ Acc map(Acc v, int64_t, int64_t) const { return v; }
  __device__ Acc combine(Acc a, Acc b) const { return p.combine(a, b); }
};

template <class Acc>
struct PartialStore {
  Acc* partial;
  __device__ void operator()(int64_t unit, Acc acc) const { partial[unit] = acc; }
};

template <int G, class P, class In, class Store>
void launch_rows(const P& p, const In* in, int64_t outer, int64_t R, int64_t chunks,
                 int64_t chunk_len, const Store& store, cudaStream_t s) {
  const int64_t units = outer * chunks;
  constexpr int upb = kBlockThreads / G;
  int64_t blocks = (units + upb - 1) / upb;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  reduce_rows_kernel<G><<<static_cast<unsigned>(blocks), kBlockThreads, 0, s>>>(
      p, in, units, R, chunks, chunk_len, store);
  CUDA_CHECK_LAUNCH();
}

/// One pass over [outer, R, inner] with the given cut; store receives unit indices.
template <class P, class In, class Store>
void reduce_pass(const P& p, const In* in, int64_t outer, int64_t R, int64_t inner,
                 const ReducePlan& plan, const Store& store, cudaStream_t s) {
  if (inner == 1) {
    if (plan.chunk_len <= 1024) {
      launch_rows<32>(p, in, outer, R, plan.chunks, plan.chunk_len, store, s);
    } else {
      launch_rows<kBlockThreads>(p, in, outer, R, plan.chunks, plan.chunk_len, store, s);
    }
  } else {
    reduce_cols_kernel<<<grid_for(outer * plan.chunks * inner), kBlockThreads, 0, s>>>(
        p, in, outer, R, inner, plan.chunks, plan.chunk_len, store);
    CUDA_CHECK_LAUNCH();
  }
}

/// Reduces [outer, R, inner] with policy p; final(out_index, acc) receives each result.
template <class P, class In, class Final>
void run_reduction(const P& p, const In* in, int64_t outer, int64_t R, int64_t inner,
                   const Final& final_store, cudaStream_t s) {
  using Acc = typename P::Acc;
  ReducePlan plan = plan_reduce(outer, R, inner);
  if (plan.chunks == 1) {
    reduce_pass(p, in, outer, R, inner, plan, final_store, s);
    return;
  }
  DeviceScratch partial(static_cast<size_t>(outer * plan.chunks * inner) * sizeof(Acc));
  reduce_pass(p, in, outer, R, inner, plan, PartialStore<Acc>{partial.as<Acc>()}, s);
  ReducePlan second;
  second.chunks = 1;
  second.chunk_len = plan.chunks;
  reduce_pass(CombineOnly<P>{p}, partial.as<Acc>(), outer, plan.chunks, inner, second, final_store,
              s);
}

// ---- common policies ---------------------------------------------------------------------

/// double for floating T; uint64_t for integers, read back with acc_value (Note [Integer
/// wraparound]).
template <class T>
using sum_acc_t = sum_acc_wrap_t<is_float_v<T>>;

template <class T>
struct SumPolicy {
  using Acc = sum_acc_t<T>;
  __device__ Acc identity() const { return Acc(0); }
  __device__ Acc map(T v, int64_t, int64_t) const { return static_cast<Acc>(to_comp(v)); }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
};

/// max (IsMax) or min with NaN propagation, in the compute type.
template <class T, bool IsMax>
struct MinMaxPolicy {
  using Acc = comp_t<T>;
  __device__ Acc identity() const {
    if constexpr (std::is_floating_point_v<Acc>) {
      return IsMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    } else {
      return IsMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
    }
  }
  __device__ Acc map(T v, int64_t, int64_t) const { return to_comp(v); }
  __device__ Acc combine(Acc a, Acc b) const {
    if constexpr (std::is_floating_point_v<Acc>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return IsMax ? (b > a ? b : a) : (b < a ? b : a);
  }
};

}  // namespace sl::cuda
