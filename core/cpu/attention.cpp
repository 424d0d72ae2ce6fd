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

/// y[j] = exp(y[j] - mx) for j < n. The one exponential loop of the float rows: the forward and
/// the backward's recomputation both call it, so they give the same bits.
SL_ATTN_CLONES void row_exp_f32(float* y, int64_t n, float mx) {
  for (int64_t j = 0; j < n; ++j) y[j] = math::f32::exp(y[j] - mx);
}

/// y[j] = exp(y[j] - mx) for j < n; returns the sum (16 partial sums in double, then in
/// order).
SL_ATTN_CLONES double row_exp_sum_f32(float* y, int64_t n, float mx) {
  row_exp_f32(y, n, mx);
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

/// y[j] = x[j] * s for j < n (y may be x).
SL_ATTN_CLONES void row_scale_f32(float* y, const float* x, int64_t n, float s) {
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] * s;
}

template <class T>
void row_scale(T* y, const T* x, int64_t n, T s) {
  if constexpr (std::is_same_v<T, float>) {
    row_scale_f32(y, x, n, s);
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = x[j] * s;
  }
}

/// out = scale * p * (g - d) over one row (out may be g).
SL_ATTN_CLONES void row_grad_f32(float* out, const float* g, const float* p, int64_t n, float scale,
                                 float d) {
  for (int64_t j = 0; j < n; ++j) out[j] = scale * p[j] * (g[j] - d);
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
  row_grad_f32(out, g, p, n, scale, static_cast<float>(dd));
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
void row_exp(T* y, int64_t n, T mx) {
  if constexpr (std::is_same_v<T, float>) {
    row_exp_f32(y, n, mx);
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = std::exp(y[j] - mx);
  }
}

template <class T>
double row_exp_sum(T* y, int64_t n, T mx) {
  if constexpr (std::is_same_v<T, float>) {
    return row_exp_sum_f32(y, n, mx);
  } else {
    row_exp(y, n, mx);
    double s = 0;
    for (int64_t j = 0; j < n; ++j) s += static_cast<double>(y[j]);
    return s;
  }
}

/// The rows of [A, B, L, S] scores and their mask, as the attention softmax reads them.
template <class T, class M>
struct ScoreRows {
  int64_t A, B, L, S;
  const T* x;
  const M* mp;
  int64_t ma, mb, ml, ms;
  T sc;
  bool causal;
  int64_t causal_offset;

  ScoreRows(const Tensor& scores, const Tensor& mask, bool is_causal, double scale, int64_t offset)
      : A(scores.size(0)),
        B(scores.size(1)),
        L(scores.size(2)),
        S(scores.size(3)),
        x(scores.data_ptr<T>()),
        mp(mask.defined() ? static_cast<const M*>(mask.data_ptr()) : nullptr),
        ma(mp ? mask.stride(0) : 0),
        mb(mp ? mask.stride(1) : 0),
        ml(mp ? mask.stride(2) : 0),
        ms(mp ? mask.stride(3) : 0),
        sc(static_cast<T>(scale)),
        causal(is_causal),
        causal_offset(offset) {}

  int64_t rows() const { return A * B * L; }
  /// Rows per parallel chunk: about 4096 scores.
  int64_t grain() const { return std::max<int64_t>(1, 4096 / S); }

  /// yr = scale * row r of the scores + its mask terms, -inf where masked (yr may be the scores'
  /// own row). Returns the limit: positions j >= limit are causally masked (row i is query
  /// i + causal_offset) and left for the caller to fill.
  int64_t load(int64_t r, T* yr) const {
    const int64_t i = r % L, b = (r / L) % B, a = r / (L * B);
    const T* xr = x + r * S;
    const T neg_inf = -std::numeric_limits<T>::infinity();
    const int64_t limit = causal ? std::min<int64_t>(S, i + causal_offset + 1) : S;
    row_scale(yr, xr, limit, sc);
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
    return limit;
  }

  /// The offset of row r's entry in a strided [A, B, L, ...] tensor of per-row values.
  int64_t row_offset(const Tensor& t, int64_t r) const {
    const int64_t i = r % L, b = (r / L) % B, a = r / (L * B);
    return a * t.stride(0) + b * t.stride(1) + i * t.stride(2);
  }
};

/// The end of a probability row whose first `limit` entries hold exp(y - mx): times inv, zeros
/// for the causally masked rest; all NaN when every position was masked (mx = -inf).
template <class T>
void finish_row(T* yr, int64_t limit, int64_t S, T mx, T inv) {
  if (mx == -std::numeric_limits<T>::infinity()) {
    std::fill(yr, yr + S, std::numeric_limits<T>::quiet_NaN());
    return;
  }
  row_scale(yr, yr, limit, inv);
  std::fill(yr + limit, yr + S, T(0));
}

/// probs = the attention softmax of the scores (probs may be the scores themselves). With stats
/// defined ([A, B, L, 2] of T, any strides) each row's maximum and 1 / sum of exponentials are
/// written there (Note [Attention row statistics] in core/ops/attention.h).
template <class T, class M>
void softmax_rows(const Tensor& probs, const Tensor& scores, const Tensor& mask, bool causal,
                  double scale, int64_t causal_offset, const Tensor& stats) {
  const ScoreRows<T, M> rows(scores, mask, causal, scale, causal_offset);
  const int64_t S = rows.S;
  T* y = probs.data_ptr<T>();
  T* st = stats.defined() ? stats.data_ptr<T>() : nullptr;
  const int64_t st3 = st ? stats.stride(3) : 0;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  parallel_for(0, rows.rows(), rows.grain(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* yr = y + r * S;
      const int64_t limit = rows.load(r, yr);
      const T mx = row_max(yr, limit);
      // every position masked: NaN like PyTorch's exp(-inf - -inf)
      const T inv = mx == neg_inf ? nan : static_cast<T>(1.0 / row_exp_sum(yr, limit, mx));
      finish_row(yr, limit, S, mx, inv);
      if (st) {
        T* sr = st + rows.row_offset(stats, r);
        sr[0] = mx;
        sr[st3] = inv;
      }
    }
  });
}

/// The backward's recomputation from the forward's row statistics (Note [Attention row
/// statistics]): probs = exp(scale * scores + mask terms - max) * inv, the forward's bits, then
/// grad_scores = scale * probs * (grad_probs - dot) with dot the row's sum_j grad_probs * probs
/// given from outside. probs may be the scores and grad_scores the grad_probs (in place).
template <class T, class M>
void softmax_rows_recompute_backward(const Tensor& probs, const Tensor& grad_scores,
                                     const Tensor& scores, const Tensor& grad_probs,
                                     const Tensor& mask, const Tensor& stats, const Tensor& dot,
                                     bool causal, double scale, int64_t causal_offset) {
  const ScoreRows<T, M> rows(scores, mask, causal, scale, causal_offset);
  const int64_t S = rows.S;
  T* y = probs.data_ptr<T>();
  T* gs = grad_scores.data_ptr<T>();
  const T* g = grad_probs.data_ptr<T>();
  const T* st = stats.data_ptr<T>();
  const T* dp = dot.data_ptr<T>();
  const int64_t st3 = stats.stride(3);
  const T sc = rows.sc;
  parallel_for(0, rows.rows(), rows.grain(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* yr = y + r * S;
      const T* sr = st + rows.row_offset(stats, r);
      const T mx = sr[0], inv = sr[st3];
      const T d = dp[rows.row_offset(dot, r)];
      const int64_t limit = rows.load(r, yr);
      if (mx != -std::numeric_limits<T>::infinity()) row_exp(yr, limit, mx);
      finish_row(yr, limit, S, mx, inv);
      const T* gr = g + r * S;
      T* out = gs + r * S;
      if constexpr (std::is_same_v<T, float>) {
        row_grad_f32(out, gr, yr, S, sc, d);
      } else {
        for (int64_t j = 0; j < S; ++j) out[j] = sc * yr[j] * (gr[j] - d);
      }
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

/// Calls f(T{}, M{}) for float32 / float64 scores and a mask of bool or the scores' dtype.
template <class F>
void dispatch_rows(const char* op, const Tensor& scores, const Tensor& mask, F&& f) {
  auto run = [&](auto z) {
    using T = decltype(z);
    if (mask.defined() && mask.dtype() == DType::b8) {
      f(T{}, bool{});
    } else {
      f(T{}, T{});
    }
  };
  switch (scores.dtype()) {
    case DType::f32:
      return run(float{});
    case DType::f64:
      return run(double{});
    default:
      detail::throw_error<DTypeError>(op, ": unsupported dtype ", dtype_name(scores.dtype()));
  }
}

void attention_softmax_forward_cpu(const Tensor& probs, const Tensor& scores, const Tensor& mask,
                                   bool is_causal, double scale, int64_t causal_offset) {
  dispatch_rows("attention_softmax", scores, mask, [&](auto t, auto m) {
    softmax_rows<decltype(t), decltype(m)>(probs, scores, mask, is_causal, scale, causal_offset,
                                           Tensor());
  });
}

void attention_softmax_stats_forward_cpu(const Tensor& probs, const Tensor& stats,
                                         const Tensor& scores, const Tensor& mask, bool is_causal,
                                         double scale, int64_t causal_offset) {
  dispatch_rows("attention_softmax_stats", scores, mask, [&](auto t, auto m) {
    softmax_rows<decltype(t), decltype(m)>(probs, scores, mask, is_causal, scale, causal_offset,
                                           stats);
  });
}

void attention_softmax_recompute_backward_cpu(const Tensor& probs, const Tensor& grad_scores,
                                              const Tensor& scores, const Tensor& grad_probs,
                                              const Tensor& mask, const Tensor& stats,
                                              const Tensor& dot, bool is_causal, double scale,
                                              int64_t causal_offset) {
  dispatch_rows("attention_softmax_recompute_backward", scores, mask, [&](auto t, auto m) {
    softmax_rows_recompute_backward<decltype(t), decltype(m)>(
        probs, grad_scores, scores, grad_probs, mask, stats, dot, is_causal, scale, causal_offset);
  });
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
SL_REGISTER_KERNEL(attention_softmax_stats_forward_kernel, DeviceKind::cpu,
                   &attention_softmax_stats_forward_cpu);
SL_REGISTER_KERNEL(attention_softmax_recompute_backward_kernel, DeviceKind::cpu,
                   &attention_softmax_recompute_backward_cpu);

}  // namespace
}  // namespace sl::cpu
