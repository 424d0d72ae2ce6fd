// CUDA kernels of the attention family: the fused masked softmax and its backward, one row per
// group of G threads (32 when S <= 1024, else 256), with the CPU kernel's formulas
// (core/cpu/attention.cpp): the row maximum, the sum of exponentials in double, then each
// probability as exp(v - max) * (1 / sum) in the element type.
#include <cmath>

#include "core/cuda/block_reduce.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/loops.cuh"

namespace sl::cuda {
namespace {

/// Maximum over a group (order-free, so any tree gives the same value).
template <int G, class T>
__device__ __forceinline__ T group_max(T v, T* buf) {
  const int t = static_cast<int>(threadIdx.x);
  const int lane = t % G;
  buf[t] = v;
  __syncthreads();
#pragma unroll
  for (int s = G / 2; s > 0; s /= 2) {
    if (lane < s) buf[t] = buf[t] > buf[t + s] ? buf[t] : buf[t + s];
    __syncthreads();
  }
  T r = buf[t - lane];
  __syncthreads();
  return r;
}

template <class T, class M>
struct MaskedRow {
  const T* x;
  const M* mrow;  // null: no mask
  int64_t ms, limit;
  T sc;
  /// The scaled, masked score of column j (-inf where masked).
  __device__ __forceinline__ T at(int64_t j) const {
    if (j >= limit) return -INFINITY;
    T v = x[j] * sc;
    if (mrow) {
      if constexpr (std::is_same_v<M, bool>) {
        if (!mrow[j * ms]) v = -INFINITY;
      } else {
        v = v + mrow[j * ms];
      }
    }
    return v;
  }
};

template <int G, class T, class M>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_fwd_kernel(T* y, const T* x, const M* mask, int64_t A, int64_t B, int64_t L, int64_t S,
                       int64_t ma, int64_t mb, int64_t ml, int64_t ms, bool causal, T sc) {
  __shared__ T tbuf[kBlockThreads];
  __shared__ double dbuf[kBlockThreads];
  constexpr int kRows = kBlockThreads / G;
  const int lane = static_cast<int>(threadIdx.x) % G;
  const int64_t rows = A * B * L;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kRows; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kRows) {
    const int64_t r = base + threadIdx.x / G;
    const bool valid = r < rows;
    const int64_t rr = valid ? r : 0;
    const int64_t i = rr % L, b = (rr / L) % B, a = rr / (L * B);
    MaskedRow<T, M> row{x + rr * S, mask ? mask + a * ma + b * mb + i * ml : nullptr, ms,
                        causal ? (S < i + 1 ? S : i + 1) : S, sc};
    T mx = -INFINITY;
    if (valid)
      for (int64_t j = lane; j < row.limit; j += G) {
        T v = row.at(j);
        mx = v > mx ? v : mx;
      }
    mx = group_max<G>(mx, tbuf);
    double sum = 0;
    const bool all_masked = mx == T(-INFINITY);
    if (valid && !all_masked)
      for (int64_t j = lane; j < row.limit; j += G)
        sum += static_cast<double>(dmath::exp(row.at(j) - mx));
    sum = group_sum<G>(sum, dbuf);
    if (!valid) continue;
    T* yr = y + r * S;
    if (all_masked) {
      for (int64_t j = lane; j < S; j += G) yr[j] = NAN;  // as PyTorch: exp(-inf - -inf)
      continue;
    }
    const T inv = static_cast<T>(1.0 / sum);
    for (int64_t j = lane; j < S; j += G) {
      yr[j] = j < row.limit ? dmath::exp(row.at(j) - mx) * inv : T(0);
    }
  }
}

template <int G, class T>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_bwd_kernel(T* gs, const T* g, const T* p, int64_t rows, int64_t S, T sc) {
  __shared__ double dbuf[kBlockThreads];
  constexpr int kRows = kBlockThreads / G;
  const int lane = static_cast<int>(threadIdx.x) % G;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kRows; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kRows) {
    const int64_t r = base + threadIdx.x / G;
    const bool valid = r < rows;
    const T* gr = g + (valid ? r : 0) * S;
    const T* pr = p + (valid ? r : 0) * S;
    double dot = 0;
    if (valid)
      for (int64_t j = lane; j < S; j += G) dot += static_cast<double>(gr[j]) * pr[j];
    const T d = static_cast<T>(group_sum<G>(dot, dbuf));
    if (!valid) continue;
    T* out = gs + r * S;
    for (int64_t j = lane; j < S; j += G) out[j] = sc * pr[j] * (gr[j] - d);
  }
}

template <class F>
void float_or_double(DType dt, const char* op, F&& f) {
  if (dt == DType::f32) return f(float{});
  if (dt == DType::f64) return f(double{});
  ::sl::detail::throw_error<DTypeError>(op, ": unsupported dtype ", dtype_name(dt));
}

unsigned row_blocks(int64_t rows, int G) {
  const int64_t per = kBlockThreads / G;
  int64_t b = (rows + per - 1) / per;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

template <class T, class M>
void run_forward(void* probs, const void* scores, const void* mask, int64_t A, int64_t B, int64_t L,
                 int64_t S, int64_t ma, int64_t mb, int64_t ml, int64_t ms, bool causal,
                 double scale, cudaStream_t s) {
  T* y = static_cast<T*>(probs);
  const T* x = static_cast<const T*>(scores);
  const M* m = static_cast<const M*>(mask);
  const int64_t rows = A * B * L;
  if (S <= 1024) {
    softmax_fwd_kernel<32, T, M><<<row_blocks(rows, 32), kBlockThreads, 0, s>>>(
        y, x, m, A, B, L, S, ma, mb, ml, ms, causal, static_cast<T>(scale));
  } else {
    softmax_fwd_kernel<kBlockThreads, T, M>
        <<<row_blocks(rows, kBlockThreads), kBlockThreads, 0, s>>>(
            y, x, m, A, B, L, S, ma, mb, ml, ms, causal, static_cast<T>(scale));
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_attention_softmax_forward(DType dt, void* probs, const void* scores, const void* mask,
                                      bool mask_is_bool, int64_t A, int64_t B, int64_t L, int64_t S,
                                      int64_t ma, int64_t mb, int64_t ml, int64_t ms, bool causal,
                                      double scale, cudaStream_t s) {
  float_or_double(dt, "attention_softmax", [&](auto z) {
    using T = decltype(z);
    if (mask && mask_is_bool) {
      run_forward<T, bool>(probs, scores, mask, A, B, L, S, ma, mb, ml, ms, causal, scale, s);
    } else {
      run_forward<T, T>(probs, scores, mask, A, B, L, S, ma, mb, ml, ms, causal, scale, s);
    }
  });
}

void launch_attention_softmax_backward(DType dt, void* grad_scores, const void* grad_probs,
                                       const void* probs, int64_t rows, int64_t S, double scale,
                                       cudaStream_t s) {
  float_or_double(dt, "attention_softmax_backward", [&](auto z) {
    using T = decltype(z);
    T* gs = static_cast<T*>(grad_scores);
    const T* g = static_cast<const T*>(grad_probs);
    const T* p = static_cast<const T*>(probs);
    if (S <= 1024) {
      softmax_bwd_kernel<32, T>
          <<<row_blocks(rows, 32), kBlockThreads, 0, s>>>(gs, g, p, rows, S, static_cast<T>(scale));
    } else {
      softmax_bwd_kernel<kBlockThreads, T>
          <<<row_blocks(rows, kBlockThreads), kBlockThreads, 0, s>>>(gs, g, p, rows, S,
                                                                     static_cast<T>(scale));
    }
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sl::cuda
