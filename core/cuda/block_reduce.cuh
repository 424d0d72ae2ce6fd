// Deterministic reductions across a group of threads (internal header; device code).
//
// Note [Group reductions]
// A group is G consecutive threads of a block (G a power of two dividing blockDim.x), aligned on
// a multiple of G. group_reduce combines one value per thread in a tree of fixed shape: at each
// step s = G/2, G/4, ..., 1, lane i < s combines its value with lane i + s's (op(mine, theirs)).
// The shape depends only on G, so a result is the same bits on every run. Steps with s >= 32
// cross warps and go through shared memory (one block barrier each); steps with s < 32 stay in
// one warp and go through warp shuffles, which read the very values the shared-memory tree would
// (lane i + s < 2s holds the previous step's result), so both give the same bits. A group of at
// most 32 threads therefore needs no shared memory and no block barrier.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace sl::cuda {

/// shuffle(x) applied to v: directly for the 4- and 8-byte arithmetic types the warp shuffles
/// take, else to each 4-byte word of any trivially copyable V.
template <class V, class Shuffle>
__device__ __forceinline__ V shuffle_value(V v, Shuffle shuffle) {
  static_assert(std::is_trivially_copyable_v<V>);
  if constexpr (std::is_arithmetic_v<V> && !std::is_same_v<V, bool> &&
                (sizeof(V) == 4 || sizeof(V) == 8)) {
    return shuffle(v);
  } else {
    constexpr int kWords = static_cast<int>((sizeof(V) + 3) / 4);
    uint32_t w[kWords] = {};
    __builtin_memcpy(w, &v, sizeof(V));
#pragma unroll
    for (int i = 0; i < kWords; ++i) w[i] = shuffle(w[i]);
    V r;
    __builtin_memcpy(&r, w, sizeof(V));
    return r;
  }
}

/// v of lane (this lane + s) of the warp (all 32 lanes must call; a lane past the warp's end gets
/// its own v back).
template <class V>
__device__ __forceinline__ V shfl_down_any(V v, int s) {
  return shuffle_value(v, [s](auto x) { return __shfl_down_sync(0xffffffffu, x, s); });
}

/// v of lane `src` of this lane's segment of `width` lanes (all 32 lanes must call).
template <class V>
__device__ __forceinline__ V shfl_any(V v, int src, int width) {
  return shuffle_value(v, [src, width](auto x) { return __shfl_sync(0xffffffffu, x, src, width); });
}

/// op over the G threads of this thread's group in the fixed tree of Note [Group reductions];
/// every thread of the group gets the result. All threads of the block must call it, with the
/// same G (it synchronises the block when G > 32; when G <= 32 every lane of each warp must
/// call it). `buf` is shared memory of blockDim.x elements, used only when G > 32, and may be
/// reused right after the call.
template <int G, class V, class Op>
__device__ __forceinline__ V group_reduce(V v, V* buf, Op op) {
  static_assert(G > 0 && (G & (G - 1)) == 0, "G must be a power of two");
  const int t = static_cast<int>(threadIdx.x);
  const int lane = t % G;
  if constexpr (G > 32) {
    buf[t] = v;
    __syncthreads();
#pragma unroll
    for (int s = G / 2; s >= 32; s /= 2) {
      if (lane < s) buf[t] = op(buf[t], buf[t + s]);
      __syncthreads();
    }
    v = buf[t];  // lanes < 32 (the group's first warp) hold the tree's partial results
  }
  constexpr int kFirstWarpStep = G > 32 ? 16 : G / 2;
#pragma unroll
  for (int s = kFirstWarpStep; s > 0; s /= 2) {
    const V other = shfl_down_any(v, s);
    if (lane < s) v = op(v, other);
  }
  if constexpr (G > 32) {
    if (lane == 0) buf[t] = v;
    __syncthreads();
    V r = buf[t - lane];
    __syncthreads();  // buf may be reused right after
    return r;
  } else {
    return shfl_any(v, 0, G);
  }
}

/// Sum of v over the G consecutive threads of a group (group_reduce with +).
template <int G, class V>
__device__ __forceinline__ V group_sum(V v, V* buf) {
  return group_reduce<G>(v, buf, [](V a, V b) { return a + b; });
}

}  // namespace sl::cuda
