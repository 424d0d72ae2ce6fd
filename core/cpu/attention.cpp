// CPU kernels of the attention family: one softmax row per iteration, rows split over the
// OpenMP pool (each row is computed by one thread in a fixed order).
//
// float rows use the branch-free exp of core/cpu/math.h (within 2 ulp), 16-lane maxima and
// 16-lane partial sums in double, so the loops vectorise (an AVX2+FMA clone is chosen at load time
// where the CPU has it); double rows use the standard library. No program here reads errno or
// enables FP traps; without this GCC will not if-convert the float selects of these loops, so they
// would not vectorise (NaN / inf semantics are kept). Set before the includes, so inline functions
// from headers get the same options and inline.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/cpu/loops.h"
#include "core/cpu/math.h"
#include "core/ops/attention.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SL_ATTN_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SL_ATTN_CLONES
#endif

namespace sl::cpu {
namespace {

constexpr int kLanes = 16;

SL_ATTN_CLONES float row_max_f32(const float* y, int64_t n) {
  float acc[kLanes];
  for (int k = 0; k < kLanes; ++k) acc[k] = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) acc[k] = acc[k] > y[j + k] ? acc[k] : y[j + k];
  }
  float m = -std::numeric_limits<float>::infinity();
  for (int k = 0; k < kLanes; ++k) m = m > acc[k] ? m : acc[k];
  for (; j < n; ++j) m = m > y[j] ? m : y[j];
  return m;  // a NaN in the row makes the exponentials (and so the row) NaN anyway
}

/// y[j] = exp(y[j] - mx) for j < n; returns the sum (16 partial sums in double, then in
/// order).
SL_ATTN_CLONES double row_exp_sum_f32(float* y, int64_t n, float mx) {
  for (int64_t j = 0; j < n; ++j) y[j] = math::f32::exp(y[j] - mx);
  double acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) acc[k] += static_cast<double>(y[j + k]);
  }
  double s = 0;
  for (int k = 0; k < kLanes; ++k) s += acc[k];
  for (; j < n; ++j) s += static_cast<double>(y[j]);
  return s;
}

/// out = scale * p * (g - sum(g * p)) over one row (the dot product summed in double).
SL_ATTN_CLONES void row_softmax_backward_f32(float* out, const float* g, const float* p, int64_t n,
                                             float scale) {
  double acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      acc[k] += static_cast<double>(g[j + k]) * static_cast<double>(p[j + k]);
    }
  }
  double dd = 0;
  for (int k = 0; k < kLanes; ++k) dd += acc[k];
  for (; j < n; ++j) dd += static_cast<double>(g[j]) * static_cast<double>(p[j]);
  const float d = static_cast<float>(dd);
  for (j = 0; j < n; ++j) out[j] = scale * p[j] * (g[j] - d);
}

template <class T>
T row_max(const T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return row_max_f32(y, n);
  } else {
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < n; ++j) m = std::max(m, y[j]);
    return m;
  }
}

template <class T>
double row_exp_sum(T* y, int64_t n, T mx) {
  if constexpr (std::is_same_v<T, float>) {
    return row_exp_sum_f32(y, n, mx);
  } else {
    double s = 0;
    for (int64_t j = 0; j < n; ++j) {
      y[j] = std::exp(y[j] - mx);
      s += static_cast<double>(y[j]);
    }
    return s;
  }
}

template <class T, class M>
void softmax_rows(const Tensor& probs, const Tensor& scores, const Tensor& mask, bool causal,
                  double scale, int64_t causal_offset) {
  const int64_t A = scores.size(0), B = scores.size(1), L = scores.size(2), S = scores.size(3);
  const T* x = scores.data_ptr<T>();
  T* y = probs.data_ptr<T>();
  const M* mp = mask.defined() ? static_cast<const M*>(mask.data_ptr()) : nullptr;
  const int64_t ma = mp ? mask.stride(0) : 0, mb = mp ? mask.stride(1) : 0;
  const int64_t ml = mp ? mask.stride(2) : 0, ms = mp ? mask.stride(3) : 0;
  const T sc = static_cast<T>(scale);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  parallel_for(0, A * B * L, std::max<int64_t>(1, 4096 / S), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r % L, b = (r / L) % B, a = r / (L * B);
      const T* xr = x + r * S;
      T* yr = y + r * S;
      // positions j >= limit are causally masked (row i is query i + causal_offset)
      const int64_t limit = causal ? std::min<int64_t>(S, i + causal_offset + 1) : S;
      for (int64_t j = 0; j < limit; ++j) yr[j] = xr[j] * sc;
      for (int64_t j = limit; j < S; ++j) yr[j] = neg_inf;
      if (mp) {
        const M* mr = mp + a * ma + b * mb + i * ml;
        if constexpr (std::is_same_v<M, bool>) {
          for (int64_t j = 0; j < limit; ++j) {
            if (!mr[j * ms]) yr[j] = neg_inf;
          }
        } else {
          for (int64_t j = 0; j < limit; ++j) yr[j] += mr[j * ms];
        }
      }
      const T mx = row_max(yr, limit);
      if (mx == neg_inf) {
        // every position masked: NaN like PyTorch's exp(-inf - -inf)
        std::fill(yr, yr + S, std::numeric_limits<T>::quiet_NaN());
        continue;
      }
      const T inv = static_cast<T>(1.0 / row_exp_sum(yr, limit, mx));
      for (int64_t j = 0; j < limit; ++j) yr[j] *= inv;
      for (int64_t j = limit; j < S; ++j) yr[j] = T(0);
    }
  });
}

template <class T>
void softmax_rows_backward(const Tensor& grad_scores, const Tensor& grad_probs, const Tensor& probs,
                           double scale) {
  const int64_t S = probs.size(3), rows = probs.numel() / S;
  const T* g = grad_probs.data_ptr<T>();
  const T* p = probs.data_ptr<T>();
  T* gs = grad_scores.data_ptr<T>();
  const T sc = static_cast<T>(scale);
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / S), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* gr = g + r * S;
      const T* pr = p + r * S;
      T* out = gs + r * S;
      if constexpr (std::is_same_v<T, float>) {
        row_softmax_backward_f32(out, gr, pr, S, sc);
      } else {
        double dot = 0;
        for (int64_t j = 0; j < S; ++j) dot += static_cast<double>(gr[j]) * pr[j];
        const T d = static_cast<T>(dot);
        for (int64_t j = 0; j < S; ++j) out[j] = sc * pr[j] * (gr[j] - d);
      }
    }
  });
}

void attention_softmax_forward_cpu(const Tensor& probs, const Tensor& scores, const Tensor& mask,
                                   bool is_causal, double scale, int64_t causal_offset) {
  auto run = [&](auto z) {
    using T = decltype(z);
    if (mask.defined() && mask.dtype() == DType::b8) {
      softmax_rows<T, bool>(probs, scores, mask, is_causal, scale, causal_offset);
    } else {
      softmax_rows<T, T>(probs, scores, mask, is_causal, scale, causal_offset);
    }
  };
  switch (scores.dtype()) {
    case DType::f32:
      return run(float{});
    case DType::f64:
      return run(double{});
    default:
      detail::throw_error<DTypeError>("attention_softmax: unsupported dtype ",
                                      dtype_name(scores.dtype()));
  }
}

void attention_softmax_backward_cpu(const Tensor& grad_scores, const Tensor& grad_probs,
                                    const Tensor& probs, double scale) {
  switch (probs.dtype()) {
    case DType::f32:
      return softmax_rows_backward<float>(grad_scores, grad_probs, probs, scale);
    case DType::f64:
      return softmax_rows_backward<double>(grad_scores, grad_probs, probs, scale);
    default:
      detail::throw_error<DTypeError>("attention_softmax_backward: unsupported dtype ",
                                      dtype_name(probs.dtype()));
  }
}

SL_REGISTER_KERNEL(attention_softmax_forward_kernel, DeviceKind::cpu,
                   &attention_softmax_forward_cpu);
SL_REGISTER_KERNEL(attention_softmax_backward_kernel, DeviceKind::cpu,
                   &attention_softmax_backward_cpu);

}  // namespace
}  // namespace sl::cpu
