// CUDA kernel of the random family. Element i is computed from (seed, offset, i) with the same
// Philox functions and the same arithmetic as core/cpu/random.cpp (Note [Random streams]); the
// explicit __f*_rn / __d*_rn intrinsics keep nvcc from fusing a multiply and an add into an FMA,
// which the CPU build does not do, so both give the same bits.
#include "core/cuda/loops.cuh"
#include "core/random.h"

namespace sl::cuda {
namespace {

template <class T>
__global__ void random_kernel(T* y, int64_t n, RandomCode dist, uint64_t seed, uint64_t offset,
                              double a, double b) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  constexpr bool f64 = std::is_same_v<T, double>;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    auto u = static_cast<uint64_t>(i);
    double v = 0;
    switch (dist) {
      case RandomCode::uniform:
        if (f64) {
          v = __dadd_rn(a, __dmul_rn(__dsub_rn(b, a), philox_uniform_f64(seed, offset, u)));
        } else {
          float fa = static_cast<float>(a), fb = static_cast<float>(b);
          v = static_cast<double>(
              __fadd_rn(fa, __fmul_rn(__fsub_rn(fb, fa), philox_uniform_f32(seed, offset, u))));
        }
        break;
      case RandomCode::normal:
        v = __dadd_rn(a, __dmul_rn(b, philox_normal(seed, offset, u)));
        break;
      case RandomCode::bernoulli:
        v = philox_uniform_f32(seed, offset, u) < static_cast<float>(a) ? 1.0 : 0.0;
        break;
      case RandomCode::randint: {
        double range = __dsub_rn(b, a);
        double r = ::floor(__dmul_rn(philox_uniform_f64(seed, offset, u), range));
        v = __dadd_rn(a, r < range ? r : __dsub_rn(range, 1.0));
        break;
      }
    }
    if constexpr (std::is_same_v<T, bool>) {
      y[i] = v != 0.0;
    } else if constexpr (std::is_integral_v<T>) {
      y[i] = static_cast<T>(static_cast<int64_t>(v));
    } else if constexpr (std::is_same_v<T, double>) {
      y[i] = v;
    } else {
      y[i] = convert<T>(static_cast<float>(v));  // float, or a 16-bit float through float
    }
  }
}

}  // namespace

void launch_random(RandomCode dist, DType dt, void* out, int64_t n, uint64_t seed, uint64_t offset,
                   double a, double b, cudaStream_t s) {
  if (n <= 0) return;
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    random_kernel<T>
        <<<grid_for(n), kBlockThreads, 0, s>>>(static_cast<T*>(out), n, dist, seed, offset, a, b);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sl::cuda
