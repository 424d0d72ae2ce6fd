// CUDA kernels of the dropout family (Note [Dropout mask]): element i keeps iff lane i % 4 of
// Philox block offset + i / 4 is below 1 - p, as on the CPU, so both give the same mask.
#include "core/cuda/float_kernels.cuh"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/loops.cuh"
#include "core/random.h"

namespace sl::cuda {
namespace {

template <class T>
__global__ void dropout_fwd_kernel(T* y, bool* mask, const T* x, int64_t n, float keep_prob,
                                   comp_t<T> scale, uint64_t seed, uint64_t offset) {
  grid_stride((n + 3) / 4, [&](int64_t blk) {
    Philox4x32 r = philox4x32(seed, offset + static_cast<uint64_t>(blk));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t i = blk * 4 + j;
      if (i >= n) break;
      const bool keep = uint_to_unit_float(r.v[j]) < keep_prob;
      mask[i] = keep;
      y[i] = keep ? convert<T>(to_comp(x[i]) * scale) : convert<T>(0.0f);
    }
  });
}

template <class T>
struct DropoutBackwardFn {
  comp_t<T> scale;
  __device__ T operator()(T g, bool keep) const {
    return keep ? convert<T>(to_comp(g) * scale) : convert<T>(0.0f);
  }
};

}  // namespace

void launch_dropout_forward(DType dt, void* out, bool* mask, const void* x, int64_t n, double p,
                            double scale, uint64_t seed, uint64_t offset, cudaStream_t s) {
  if (n <= 0) return;
  visit_float(dt, "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dropout_fwd_kernel<T><<<grid_for((n + 3) / 4), kBlockThreads, 0, s>>>(
        static_cast<T*>(out), mask, static_cast<const T*>(x), n, static_cast<float>(1.0 - p),
        static_cast<comp_t<T>>(scale), seed, offset);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_dropout_backward(DType dt, void* grad_in, const void* grad_out, const bool* mask,
                             int64_t n, double scale, cudaStream_t s) {
  if (n <= 0) return;
  visit_float(dt, "dropout_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    StridedLayout<3> L;
    L.ndim = 1;
    L.numel = n;
    L.sizes[0] = n;
    L.strides[0][0] = sizeof(T);
    L.strides[1][0] = sizeof(T);
    L.strides[2][0] = sizeof(bool);
    L.base[0] = static_cast<char*>(grad_in);
    L.base[1] = const_cast<char*>(static_cast<const char*>(grad_out));
    L.base[2] = const_cast<char*>(reinterpret_cast<const char*>(mask));
    launch_elementwise<T, T, bool>(L, DropoutBackwardFn<T>{static_cast<comp_t<T>>(scale)}, s);
  });
}

}  // namespace sl::cuda
