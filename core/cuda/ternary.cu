// CUDA kernels of the elementwise family: where, clamp, and the integer division check.
#include "core/cuda/loops.cuh"

namespace sl::cuda {
namespace {

template <class T>
struct WhereFn {
  __device__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

template <class T>
struct ClampFn {
  comp_t<T> lo, hi;
  bool has_lo, has_hi;
  __device__ T operator()(T v) const {
    comp_t<T> x = to_comp(v);
    if (x != x) return v;  // NaN propagates
    if (has_lo && x < lo) x = lo;
    if (has_hi && x > hi) x = hi;
    return convert<T>(x);
  }
};

template <class T>
__global__ void any_zero_kernel(const __grid_constant__ StridedLayout<1> L, int32_t* flag) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t off[1];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < L.numel;
       i += step) {
    strided_offsets<1, int64_t>(L, i, off);
    if (*reinterpret_cast<const T*>(L.base[0] + off[0]) == T(0)) *flag = 1;
  }
}

}  // namespace

void launch_where(DType dt, const StridedLayout<4>& L, cudaStream_t s) {
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise<T, bool, T, T>(L, WhereFn<T>{}, s);
  });
}

void launch_clamp(DType dt, bool has_lo, DevScalar lo, bool has_hi, DevScalar hi,
                  const StridedLayout<2>& L, cudaStream_t s) {
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      ::sl::detail::throw_error<DTypeError>("clamp: not supported for bool tensors");
    } else {
      using C = comp_t<T>;
      launch_elementwise<T, T>(L, ClampFn<T>{scalar_as<C>(lo), scalar_as<C>(hi), has_lo, has_hi},
                               s);
    }
  });
}

void launch_any_zero(DType dt, const StridedLayout<1>& L, int32_t* flag, cudaStream_t s) {
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      any_zero_kernel<T><<<grid_for(L.numel), kBlockThreads, 0, s>>>(L, flag);
      CUDA_CHECK_LAUNCH();
    } else {
      ::sl::detail::throw_error<DTypeError>("any_zero: expected an integer dtype");
    }
  });
}

}  // namespace sl::cuda
