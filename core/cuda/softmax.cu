// CUDA kernels of the softmax family, with the CPU kernels' formulas (core/cpu/softmax.cpp): the
// slice maximum (NaN sticks), exps in the compute type (float for 16-bit), their sum in double,
// then exp(x - max) * (1 / sum), or x - (max + log(sum)) for log_softmax.
//  - rows (inner == 1): a group of G threads per row (32 when n <= 1024, else 256), the sums
//    combined by a fixed tree (Note [Group reductions] in block_reduce.cuh), so results do not
//    vary from run to run;
//  - strided slices (inner > 1): one thread per slice walking it in order, exactly as the CPU
//    does; neighbouring threads read neighbouring elements.
#include <cmath>

#include "core/cuda/block_reduce.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/float_kernels.cuh"
#include "core/cuda/kernels_core.h"
#include "core/cuda/loops.cuh"

namespace sl::cuda {
namespace {

template <class C>
__device__ __forceinline__ C nan_max(C a, C b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}

/// NaN-sticky maximum over the G consecutive threads of a group (group_reduce's calling rules).
template <int G, class C>
__device__ __forceinline__ C group_max(C v, C* buf) {
  return group_reduce<G>(v, buf, [](C a, C b) { return nan_max(a, b); });
}

template <int G, class T>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_rows_kernel(T* y, const T* x, int64_t rows, int64_t n, bool log) {
  using C = comp_t<T>;
  __shared__ C cbuf[kBlockThreads];
  __shared__ double dbuf[kBlockThreads];
  constexpr int kRows = kBlockThreads / G;
  const int lane = static_cast<int>(threadIdx.x) % G;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kRows; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kRows) {
    const int64_t r = base + threadIdx.x / G;
    const bool valid = r < rows;
    const T* xr = x + (valid ? r : 0) * n;
    C m = -INFINITY;
    if (valid) {
#pragma unroll 4  // no stores in the loop: the unrolled loads are all in flight at once
      for (int64_t j = lane; j < n; j += G) m = nan_max(to_comp(xr[j]), m);
    }
    m = group_max<G>(m, cbuf);
    double sum = 0;
    if (valid) {
#pragma unroll 4
      for (int64_t j = lane; j < n; j += G)
        sum += static_cast<double>(dmath::exp(to_comp(xr[j]) - m));
    }
    sum = group_sum<G>(sum, dbuf);
    if (!valid) continue;  // after every group call: all threads of the block take part
    T* yr = y + r * n;
    if (log) {
      const C shift = m + static_cast<C>(::log(sum));
      for (int64_t j = lane; j < n; j += G) yr[j] = convert<T>(to_comp(xr[j]) - shift);
    } else {
      const C inv = static_cast<C>(1.0 / sum);
      for (int64_t j = lane; j < n; j += G)
        yr[j] = convert<T>(dmath::exp(to_comp(xr[j]) - m) * inv);
    }
  }
}

template <int G, class T>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_rows_backward_kernel(T* gi, const T* g, const T* y, int64_t rows, int64_t n, bool log) {
  using C = comp_t<T>;
  __shared__ double dbuf[kBlockThreads];
  constexpr int kRows = kBlockThreads / G;
  const int lane = static_cast<int>(threadIdx.x) % G;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kRows; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kRows) {
    const int64_t r = base + threadIdx.x / G;
    const bool valid = r < rows;
    const int64_t off = (valid ? r : 0) * n;
    double acc = 0;
    if (valid) {
      for (int64_t j = lane; j < n; j += G) {
        const double gv = static_cast<double>(to_comp(g[off + j]));
        acc += log ? gv : gv * static_cast<double>(to_comp(y[off + j]));
      }
    }
    const C a = static_cast<C>(group_sum<G>(acc, dbuf));
    if (!valid) continue;
    for (int64_t j = lane; j < n; j += G) {
      const C gv = to_comp(g[off + j]), yv = to_comp(y[off + j]);
      gi[off + j] = convert<T>(log ? gv - dmath::exp(yv) * a : yv * (gv - a));
    }
  }
}

template <class T>
__global__ void softmax_slices_kernel(T* y, const T* x, int64_t outer, int64_t n, int64_t inner,
                                      bool log) {
  using C = comp_t<T>;
  const int64_t slices = outer * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; s < slices;
       s += step) {
    const int64_t off = (s / inner) * n * inner + s % inner;
    const T* xs = x + off;
    T* ys = y + off;
    C m = -INFINITY;
    for (int64_t r = 0; r < n; ++r) m = nan_max(to_comp(xs[r * inner]), m);
    double sum = 0;
    for (int64_t r = 0; r < n; ++r)
      sum += static_cast<double>(dmath::exp(to_comp(xs[r * inner]) - m));
    if (log) {
      const C shift = m + static_cast<C>(::log(sum));
      for (int64_t r = 0; r < n; ++r) ys[r * inner] = convert<T>(to_comp(xs[r * inner]) - shift);
    } else {
      const C inv = static_cast<C>(1.0 / sum);
      for (int64_t r = 0; r < n; ++r) {
        ys[r * inner] = convert<T>(dmath::exp(to_comp(xs[r * inner]) - m) * inv);
      }
    }
  }
}

template <class T>
__global__ void softmax_slices_backward_kernel(T* gi, const T* g, const T* y, int64_t outer,
                                               int64_t n, int64_t inner, bool log) {
  using C = comp_t<T>;
  const int64_t slices = outer * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; s < slices;
       s += step) {
    const int64_t off = (s / inner) * n * inner + s % inner;
    double acc = 0;
    for (int64_t r = 0; r < n; ++r) {
      const double gv = static_cast<double>(to_comp(g[off + r * inner]));
      acc += log ? gv : gv * static_cast<double>(to_comp(y[off + r * inner]));
    }
    const C a = static_cast<C>(acc);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t p = off + r * inner;
      const C gv = to_comp(g[p]), yv = to_comp(y[p]);
      gi[p] = convert<T>(log ? gv - dmath::exp(yv) * a : yv * (gv - a));
    }
  }
}

unsigned row_blocks(int64_t rows, int G) {
  const int64_t per = kBlockThreads / G;
  const int64_t b = (rows + per - 1) / per;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

}  // namespace

void launch_softmax_forward(DType dt, void* out, const void* in, int64_t outer, int64_t n,
                            int64_t inner, bool log, cudaStream_t s) {
  if (outer * n * inner == 0) return;
  visit_float(dt, log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = static_cast<T*>(out);
    const T* x = static_cast<const T*>(in);
    if (inner > 1) {
      softmax_slices_kernel<T>
          <<<grid_for(outer * inner), kBlockThreads, 0, s>>>(y, x, outer, n, inner, log);
    } else if (n <= 1024) {
      softmax_rows_kernel<32, T>
          <<<row_blocks(outer, 32), kBlockThreads, 0, s>>>(y, x, outer, n, log);
    } else {
      softmax_rows_kernel<kBlockThreads, T>
          <<<row_blocks(outer, kBlockThreads), kBlockThreads, 0, s>>>(y, x, outer, n, log);
    }
    CUDA_CHECK_LAUNCH();
  });
}

void launch_softmax_backward(DType dt, void* grad_in, const void* grad_out, const void* out,
                             int64_t outer, int64_t n, int64_t inner, bool log, cudaStream_t s) {
  if (outer * n * inner == 0) return;
  visit_float(dt, log ? "log_softmax_backward" : "softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* gi = static_cast<T*>(grad_in);
    const T* g = static_cast<const T*>(grad_out);
    const T* y = static_cast<const T*>(out);
    if (inner > 1) {
      softmax_slices_backward_kernel<T>
          <<<grid_for(outer * inner), kBlockThreads, 0, s>>>(gi, g, y, outer, n, inner, log);
    } else if (n <= 1024) {
      softmax_rows_backward_kernel<32, T>
          <<<row_blocks(outer, 32), kBlockThreads, 0, s>>>(gi, g, y, outer, n, log);
    } else {
      softmax_rows_backward_kernel<kBlockThreads, T>
          <<<row_blocks(outer, kBlockThreads), kBlockThreads, 0, s>>>(gi, g, y, outer, n, log);
    }
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sl::cuda
