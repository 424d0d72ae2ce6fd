// CUDA kernels of the ctc family (Note [CTC gradient]): one block per sample; the threads share
// the extended-label positions s of one time step, and the block steps through time with a
// barrier between steps, so every value is computed by the CPU kernel's formula
// (core/cpu/ctc.cpp) in the same order, targets longer than their inputs included (Note [CTC
// impossible samples]: every index is bounded by T_b and by the sample's 2 L_b + 1 <= 2 S + 1
// states; the beta entries s >= 2 L_b + 1 of rows t < T_b - 1 are never written nor read).
#include <cmath>

#include "core/cuda/device_math.cuh"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/loops.cuh"

namespace sl::cuda {
namespace {

template <class T>
__device__ __forceinline__ T neg_inf() {
  return -static_cast<T>(INFINITY);
}

template <class T>
__device__ __forceinline__ T log_add3(T a, T b, T c) {
  T m = a > b ? a : b;
  m = m > c ? m : c;
  if (m == neg_inf<T>()) return m;
  return dmath::log(dmath::exp(a - m) + dmath::exp(b - m) + dmath::exp(c - m)) + m;
}

template <class T>
__device__ __forceinline__ T log_add(T a, T b) {
  T m = a > b ? a : b;
  if (m == neg_inf<T>()) return m;
  return dmath::log(dmath::exp(a - m) + dmath::exp(b - m)) + m;
}

struct CtcDims {
  int64_t T, N, C, S, blank;
  const int64_t* tg;
  const int64_t* il;
  const int64_t* tl;
  __device__ int64_t label(int64_t b, int64_t s) const {
    return s % 2 == 0 ? blank : tg[b * S + s / 2];
  }
};

template <class T>
__global__ void ctc_fwd_kernel(T* out, T* la_all, const T* lp, CtcDims d) {
  const int64_t Sp = 2 * d.S + 1;
  auto logp = [&](int64_t t, int64_t b, int64_t c) { return lp[(t * d.N + b) * d.C + c]; };
  for (int64_t b = blockIdx.x; b < d.N; b += gridDim.x) {
    const int64_t Tb = d.il[b], L = d.tl[b], Lp = 2 * L + 1;
    T* la = la_all + b * d.T * Sp;
    if (Tb == 0) {
      if (threadIdx.x == 0) out[b] = L == 0 ? T(0) : static_cast<T>(INFINITY);
      continue;  // uniform across the block
    }
    for (int64_t s = threadIdx.x; s < Sp; s += blockDim.x) la[s] = neg_inf<T>();
    __syncthreads();
    if (threadIdx.x == 0) {
      la[0] = logp(0, b, d.blank);
      if (L > 0) la[1] = logp(0, b, d.label(b, 1));
    }
    __syncthreads();
    for (int64_t t = 1; t < Tb; ++t) {
      const T* prev = la + (t - 1) * Sp;
      T* cur = la + t * Sp;
      for (int64_t s = threadIdx.x; s < Sp; s += blockDim.x) {
        if (s >= Lp) {
          cur[s] = neg_inf<T>();
          continue;
        }
        const int64_t c = d.label(b, s);
        const T a1 = prev[s];
        const T a2 = s > 0 ? prev[s - 1] : neg_inf<T>();
        const T a3 = (s > 1 && d.label(b, s - 2) != c) ? prev[s - 2] : neg_inf<T>();
        cur[s] = log_add3(a1, a2, a3) + logp(t, b, c);
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      const T* last = la + (Tb - 1) * Sp;
      const T ll = L > 0 ? log_add(last[Lp - 1], last[Lp - 2]) : last[0];
      out[b] = -ll;
    }
    __syncthreads();
  }
}

template <class T>
__global__ void ctc_bwd_kernel(T* g, const T* gn, const T* pn, const T* lp, const T* la_all,
                               T* lb_all, CtcDims d, bool zero_infinity) {
  const int64_t Sp = 2 * d.S + 1, C = d.C;
  auto logp = [&](int64_t t, int64_t b, int64_t c) { return lp[(t * d.N + b) * C + c]; };
  for (int64_t b = blockIdx.x; b < d.N; b += gridDim.x) {
    const int64_t Tb = d.il[b], L = d.tl[b], Lp = 2 * L + 1;
    const T n = pn[b];
    const bool zero = Tb == 0 || (zero_infinity && n == static_cast<T>(INFINITY));
    if (zero) {
      for (int64_t t = 0; t < d.T; ++t)
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x) g[(t * d.N + b) * C + c] = T(0);
      continue;
    }
    const T* la = la_all + b * d.T * Sp;
    T* lb = lb_all + b * d.T * Sp;
    for (int64_t s = threadIdx.x; s < Sp; s += blockDim.x) lb[(Tb - 1) * Sp + s] = neg_inf<T>();
    __syncthreads();
    if (threadIdx.x == 0) {
      lb[(Tb - 1) * Sp + Lp - 1] = logp(Tb - 1, b, d.blank);
      if (L > 0) lb[(Tb - 1) * Sp + Lp - 2] = logp(Tb - 1, b, d.label(b, Lp - 2));
    }
    __syncthreads();
    for (int64_t t = Tb - 2; t >= 0; --t) {
      const T* next = lb + (t + 1) * Sp;
      T* cur = lb + t * Sp;
      for (int64_t s = threadIdx.x; s < Lp; s += blockDim.x) {
        const int64_t c = d.label(b, s);
        const T b1 = next[s];
        const T b2 = s < Lp - 1 ? next[s + 1] : neg_inf<T>();
        const T b3 = (s < Lp - 2 && d.label(b, s + 2) != c) ? next[s + 2] : neg_inf<T>();
        cur[s] = log_add3(b1, b2, b3) + logp(t, b, c);
      }
      __syncthreads();
    }
    const T gr = gn[b];
    for (int64_t t = 0; t < d.T; ++t) {
      T* gt = g + (t * d.N + b) * C;
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        if (t >= Tb) {
          gt[c] = T(0);
          continue;
        }
        T lcab = neg_inf<T>();
        for (int64_t s = 0; s < Lp; ++s) {
          if (d.label(b, s) == c) lcab = log_add(lcab, la[t * Sp + s] + lb[t * Sp + s]);
        }
        const T l = logp(t, b, c);
        gt[c] = (dmath::exp(l) - dmath::exp(lcab + n - l)) * gr;
      }
    }
    __syncthreads();
  }
}

template <class F>
void float_or_double(DType dt, const char* op, F&& f) {
  if (dt == DType::f32) return f(float{});
  if (dt == DType::f64) return f(double{});
  ::sl::detail::throw_error<DTypeError>(op, ": unsupported dtype ", dtype_name(dt));
}

unsigned sample_blocks(int64_t N) {
  return static_cast<unsigned>(N < 1 ? 1 : (N > kMaxBlocks ? kMaxBlocks : N));
}

}  // namespace

void launch_ctc_forward(DType dt, void* nll, void* log_alpha, const void* log_probs,
                        const int64_t* targets, const int64_t* input_lengths,
                        const int64_t* target_lengths, int64_t T, int64_t N, int64_t C, int64_t S,
                        int64_t blank, cudaStream_t s) {
  if (N <= 0) return;
  CtcDims d{T, N, C, S, blank, targets, input_lengths, target_lengths};
  float_or_double(dt, "ctc_loss", [&](auto z) {
    using F = decltype(z);
    ctc_fwd_kernel<F><<<sample_blocks(N), 128, 0, s>>>(
        static_cast<F*>(nll), static_cast<F*>(log_alpha), static_cast<const F*>(log_probs), d);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_ctc_backward(DType dt, void* grad, const void* grad_nll, const void* log_probs,
                         const int64_t* targets, const int64_t* input_lengths,
                         const int64_t* target_lengths, const void* nll, const void* log_alpha,
                         void* log_beta, int64_t T, int64_t N, int64_t C, int64_t S, int64_t blank,
                         bool zero_infinity, cudaStream_t s) {
  if (N <= 0) return;
  CtcDims d{T, N, C, S, blank, targets, input_lengths, target_lengths};
  float_or_double(dt, "ctc_loss_backward", [&](auto z) {
    using F = decltype(z);
    ctc_bwd_kernel<F><<<sample_blocks(N), 128, 0, s>>>(
        static_cast<F*>(grad), static_cast<const F*>(grad_nll), static_cast<const F*>(nll),
        static_cast<const F*>(log_probs), static_cast<const F*>(log_alpha),
        static_cast<F*>(log_beta), d, zero_infinity);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sl::cuda
