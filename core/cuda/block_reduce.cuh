// Deterministic sums across a group of threads (internal header; device code).
#pragma once

#include <cuda_runtime.h>

namespace sl::cuda {

/// Sum of v over the G consecutive threads of a group (G a power of two dividing blockDim.x);
/// every thread of the group gets the result. All threads of the block must call it (it
/// synchronises the block); `buf` is shared memory of blockDim.x elements. The tree has a fixed
/// shape, so the result does not vary from run to run.
template <int G, class V>
__device__ __forceinline__ V group_sum(V v, V* buf) {
  const int t = static_cast<int>(threadIdx.x);
  const int lane = t % G;
  buf[t] = v;
  __syncthreads();
#pragma unroll
  for (int s = G / 2; s > 0; s /= 2) {
    if (lane < s) buf[t] = buf[t] + buf[t + s];
    __syncthreads();
  }
  V r = buf[t - lane];
  __syncthreads();  // buf may be reused right after
  return r;
}

}  // namespace sl::cuda
