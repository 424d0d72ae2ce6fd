// CUDA kernel of the embedding_bag family (core/cpu/embedding_bag.cpp is the reference): one
// thread per (bag, column) walks the bag's entries in order with the CPU's comparison, so the
// maximum and its argument are the CPU's, ties and NaN included.
#include "core/cuda/check.h"
#include "core/cuda/dev_types.cuh"
#include "core/cuda/kernels_embedding.h"
#include "core/cuda/loops.cuh"

namespace sl::cuda {
namespace {

template <class T>
__global__ void embedding_bag_max_kernel(T* out, int64_t* arg, const T* rows, const int64_t* bounds,
                                         const int64_t* index, int64_t skip, int64_t B, int64_t D,
                                         int64_t L) {
  const int64_t total = B * D;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t b = e / D, d = e % D;
    const int64_t start = min(max(bounds[b], int64_t{0}), L);
    const int64_t end = min(max(bounds[b + 1], start), L);
    comp_t<T> best = 0;
    int64_t best_j = -1;
    for (int64_t j = start; j < end; ++j) {
      if (index[j] == skip) continue;
      const comp_t<T> v = to_comp(rows[j * D + d]);
      if (best_j < 0 || v > best) {
        best = v;
        best_j = j;
      }
    }
    out[e] = best_j < 0 ? convert<T>(comp_t<T>(0)) : rows[best_j * D + d];
    arg[e] = best_j;
  }
}

}  // namespace

void launch_embedding_bag_max(DType dt, void* out, int64_t* arg, const void* rows,
                              const int64_t* bounds, const int64_t* index, int64_t skip, int64_t B,
                              int64_t D, int64_t L, cudaStream_t s) {
  const int64_t total = B * D;
  if (total == 0) return;
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      embedding_bag_max_kernel<T><<<grid_for(total), kBlockThreads, 0, s>>>(
          static_cast<T*>(out), arg, static_cast<const T*>(rows), bounds, index, skip, B, D, L);
      CUDA_CHECK_LAUNCH();
    } else {
      ::sl::detail::throw_error<DTypeError>("embedding_bag: weight must be floating, got ",
                                            dtype_name(dt));
    }
  });
}

}  // namespace sl::cuda
