// CUDA kernels of the attention family: the fused masked softmax and its backward, one row per
// group of G threads (32 when S <= 1024, else 256), with the CPU kernel's formulas
// (core/cpu/attention.cpp): the row maximum, the sum of exponentials in double, then each
// probability as exp(v - max) * (1 / sum) in the compute type. Scores and probabilities are
// float32, float64, or 16-bit storage (float16 / bfloat16) whose arithmetic (scaling, mask,
// maximum, exponentials, the backward's products) is done in float (comp_t), each result rounded
// to 16 bits once; an additive mask has the scores' dtype or, beside 16-bit scores, float32.
#include <cmath>

#include "core/cuda/block_reduce.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/float_kernels.cuh"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/loops.cuh"

namespace sl::cuda {
namespace {

/// Maximum over a group (order-free, so any tree gives the same value; group_reduce's rules).
template <int G, class T>
__device__ __forceinline__ T group_max(T v, T* buf) {
  return group_reduce<G>(v, buf, [](T a, T b) { return a > b ? a : b; });
}

template <class T, class M>
struct MaskedRow {
  using C = comp_t<T>;
  const T* x;
  const M* mrow;  // null: no mask
  int64_t ms, limit;
  C sc;
  /// The scaled, masked score of column j (-inf where masked), in the compute type.
  __device__ __forceinline__ C at(int64_t j) const {
    if (j >= limit) return -INFINITY;
    C v = to_comp(x[j]) * sc;
    if (mrow) {
      if constexpr (std::is_same_v<M, bool>) {
        if (!mrow[j * ms]) v = -INFINITY;
      } else {
        v = v + to_comp(mrow[j * ms]);
      }
    }
    return v;
  }
};

template <int G, class T, class M, class C = comp_t<T>>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_fwd_kernel(T* y, const T* x, const M* mask, int64_t A, int64_t B, int64_t L, int64_t S,
                       int64_t ma, int64_t mb, int64_t ml, int64_t ms, bool causal, int64_t coff,
                       C sc) {
  __shared__ C tbuf[kBlockThreads];
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
                        causal ? (S < i + coff + 1 ? S : i + coff + 1) : S, sc};
    C mx = -INFINITY;
    if (valid)
      for (int64_t j = lane; j < row.limit; j += G) {
        C v = row.at(j);
        mx = v > mx ? v : mx;
      }
    mx = group_max<G>(mx, tbuf);
    double sum = 0;
    const bool all_masked = mx == C(-INFINITY);
    if (valid && !all_masked)
      for (int64_t j = lane; j < row.limit; j += G)
        sum += static_cast<double>(dmath::exp(row.at(j) - mx));
    sum = group_sum<G>(sum, dbuf);
    if (!valid) continue;
    T* yr = y + r * S;
    if (all_masked) {
      for (int64_t j = lane; j < S; j += G) yr[j] = convert<T>(C(NAN));  // exp(-inf - -inf)
      continue;
    }
    const C inv = static_cast<C>(1.0 / sum);
    for (int64_t j = lane; j < S; j += G) {
      yr[j] = convert<T>(j < row.limit ? dmath::exp(row.at(j) - mx) * inv : C(0));
    }
  }
}

template <int G, class T, class C = comp_t<T>>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_bwd_kernel(T* gs, const T* g, const T* p, int64_t rows, int64_t S, C sc) {
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
      for (int64_t j = lane; j < S; j += G)
        dot += static_cast<double>(to_comp(gr[j])) * to_comp(pr[j]);
    const C d = static_cast<C>(group_sum<G>(dot, dbuf));
    if (!valid) continue;
    T* out = gs + r * S;
    for (int64_t j = lane; j < S; j += G)
      out[j] = convert<T>(sc * to_comp(pr[j]) * (to_comp(gr[j]) - d));
  }
}

unsigned row_blocks(int64_t rows, int G) {
  const int64_t per = kBlockThreads / G;
  int64_t b = (rows + per - 1) / per;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

template <class T, class M>
void run_forward(void* probs, const void* scores, const void* mask, int64_t A, int64_t B, int64_t L,
                 int64_t S, int64_t ma, int64_t mb, int64_t ml, int64_t ms, bool causal,
                 int64_t coff, double scale, cudaStream_t s) {
  T* y = static_cast<T*>(probs);
  const T* x = static_cast<const T*>(scores);
  const M* m = static_cast<const M*>(mask);
  const int64_t rows = A * B * L;
  const comp_t<T> sc = static_cast<comp_t<T>>(scale);
  if (S <= 1024) {
    softmax_fwd_kernel<32, T, M><<<row_blocks(rows, 32), kBlockThreads, 0, s>>>(
        y, x, m, A, B, L, S, ma, mb, ml, ms, causal, coff, sc);
  } else {
    softmax_fwd_kernel<kBlockThreads, T, M>
        <<<row_blocks(rows, kBlockThreads), kBlockThreads, 0, s>>>(y, x, m, A, B, L, S, ma, mb, ml,
                                                                   ms, causal, coff, sc);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_attention_softmax_forward(DType dt, void* probs, const void* scores, const void* mask,
                                      DType mask_dt, int64_t A, int64_t B, int64_t L, int64_t S,
                                      int64_t ma, int64_t mb, int64_t ml, int64_t ms, bool causal,
                                      int64_t causal_offset, double scale, cudaStream_t s) {
  const char* op = "attention_softmax";
  const bool half = dt == DType::f16 || dt == DType::bf16;
  SL_CHECK_DTYPE(!mask || mask_dt == DType::b8 || mask_dt == dt || (half && mask_dt == DType::f32),
                 op, ": mask of dtype ", dtype_name(mask_dt), " beside scores of dtype ",
                 dtype_name(dt), " (expected bool, ", dtype_name(dt),
                 ", or float32 beside 16-bit scores)");
  visit_float(dt, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (mask && mask_dt == DType::b8) {
      run_forward<T, bool>(probs, scores, mask, A, B, L, S, ma, mb, ml, ms, causal, causal_offset, scale, s);
      return;
    }
    if constexpr (is_half_v<T>) {
      if (mask && mask_dt == DType::f32) {
        run_forward<T, float>(probs, scores, mask, A, B, L, S, ma, mb, ml, ms, causal, causal_offset, scale, s);
        return;
      }
    }
    run_forward<T, T>(probs, scores, mask, A, B, L, S, ma, mb, ml, ms, causal, causal_offset, scale, s);
  });
}

void launch_attention_softmax_backward(DType dt, void* grad_scores, const void* grad_probs,
                                       const void* probs, int64_t rows, int64_t S, double scale,
                                       cudaStream_t s) {
  visit_float(dt, "attention_softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* gs = static_cast<T*>(grad_scores);
    const T* g = static_cast<const T*>(grad_probs);
    const T* p = static_cast<const T*>(probs);
    const comp_t<T> sc = static_cast<comp_t<T>>(scale);
    if (S <= 1024) {
      softmax_bwd_kernel<32, T>
          <<<row_blocks(rows, 32), kBlockThreads, 0, s>>>(gs, g, p, rows, S, sc);
    } else {
      softmax_bwd_kernel<kBlockThreads, T>
          <<<row_blocks(rows, kBlockThreads), kBlockThreads, 0, s>>>(gs, g, p, rows, S, sc);
    }
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sl::cuda
