// CPU kernels of the norm family (Note [Norm statistics]). Layer norm splits rows over the
// thread pool (row sums in double, vectorised in lanes), batch norm splits channels
// (statistics in double); parameter gradients of layer norm are summed over fixed row
// blocks whose partials are combined in order, so no result depends on the thread count.
// No kernel here reads errno or enables FP traps; the vectorised loops need GCC to know that
// (set before the includes so header inlines share the options).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/loops.h"
#include "core/ops/norm.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SL_NORM_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SL_NORM_CLONES
#endif

namespace sl::cpu {
namespace {

template <class T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}
template <class T>
T* mut_ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// ---- layer norm: row kernels (omp simd, sums in double; float ones also get an AVX2 clone) ---

template <class T, bool HasW, bool HasB>
[[gnu::always_inline]] inline void ln_row_forward(const T* x, const T* w, const T* b, T* y,
                                                  int64_t D, T eps, T* mean, T* rstd) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < D; ++d) s += static_cast<double>(x[d]);
  const double mu = s / static_cast<double>(D);
  double ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t d = 0; d < D; ++d) {
    const double v = static_cast<double>(x[d]) - mu;
    ss += v * v;
  }
  const double rd = 1.0 / std::sqrt(ss / static_cast<double>(D) + static_cast<double>(eps));
  const T m = static_cast<T>(mu), r = static_cast<T>(rd);
  *mean = m;
  *rstd = r;
#pragma omp simd
  for (int64_t d = 0; d < D; ++d) {
    T v = (x[d] - m) * r;
    if constexpr (HasW) v *= w[d];
    if constexpr (HasB) v += b[d];
    y[d] = v;
  }
}

template <class T>
[[gnu::always_inline]] inline void ln_row_forward_any(const T* x, const T* w, const T* b, T* y,
                                                      int64_t D, T eps, T* mean, T* rstd) {
  if (w && b) {
    ln_row_forward<T, true, true>(x, w, b, y, D, eps, mean, rstd);
  } else if (w) {
    ln_row_forward<T, true, false>(x, w, b, y, D, eps, mean, rstd);
  } else if (b) {
    ln_row_forward<T, false, true>(x, w, b, y, D, eps, mean, rstd);
  } else {
    ln_row_forward<T, false, false>(x, w, b, y, D, eps, mean, rstd);
  }
}

SL_NORM_CLONES void ln_row_forward_f32(const float* x, const float* w, const float* b, float* y,
                                       int64_t D, float eps, float* mean, float* rstd) {
  ln_row_forward_any<float>(x, w, b, y, D, eps, mean, rstd);
}

/// dx of one row: rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
template <class T, bool HasW>
[[gnu::always_inline]] inline void ln_row_backward(const T* x, const T* dy, const T* w, T mu, T r,
                                                   T* dx, int64_t D) {
  double sg = 0, sgx = 0;  // sum(g), sum(g * xhat)
#pragma omp simd reduction(+ : sg, sgx)
  for (int64_t d = 0; d < D; ++d) {
    const T g = HasW ? dy[d] * w[d] : dy[d];
    sg += static_cast<double>(g);
    sgx += static_cast<double>(g) * static_cast<double>((x[d] - mu) * r);
  }
  const T a = static_cast<T>(sg / static_cast<double>(D));
  const T c = static_cast<T>(sgx / static_cast<double>(D));
#pragma omp simd
  for (int64_t d = 0; d < D; ++d) {
    const T g = HasW ? dy[d] * w[d] : dy[d];
    dx[d] = r * (g - a - (x[d] - mu) * r * c);
  }
}

SL_NORM_CLONES void ln_row_backward_f32(const float* x, const float* dy, const float* w, float mu,
                                        float r, float* dx, int64_t D) {
  if (w) {
    ln_row_backward<float, true>(x, dy, w, mu, r, dx, D);
  } else {
    ln_row_backward<float, false>(x, dy, w, mu, r, dx, D);
  }
}

/// pw[d] += sum over rows of dy * xhat, pb[d] += sum of dy, for rows [m0, m1) (in double).
template <class T>
[[gnu::always_inline]] inline void ln_param_rows(const T* x, const T* dy, const T* mean,
                                                 const T* rstd, int64_t m0, int64_t m1, int64_t D,
                                                 double* pw, double* pb) {
  for (int64_t m = m0; m < m1; ++m) {
    const T* xr = x + m * D;
    const T* gr = dy + m * D;
    const T mu = mean[m], r = rstd[m];
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) {
      pw[d] += static_cast<double>(gr[d] * ((xr[d] - mu) * r));
      pb[d] += static_cast<double>(gr[d]);
    }
  }
}

SL_NORM_CLONES void ln_param_rows_f32(const float* x, const float* dy, const float* mean,
                                      const float* rstd, int64_t m0, int64_t m1, int64_t D,
                                      double* pw, double* pb) {
  ln_param_rows<float>(x, dy, mean, rstd, m0, m1, D, pw, pb);
}

template <class T>
void layer_norm_fwd(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input,
                    const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t M = input.size(0), D = input.size(1);
  const T* x = input.data_ptr<T>();
  const T* w = ptr_or_null<T>(weight);
  const T* b = ptr_or_null<T>(bias);
  T* y = out.data_ptr<T>();
  T* pm = mean.data_ptr<T>();
  T* pr = rstd.data_ptr<T>();
  parallel_for(0, M, std::max<int64_t>(1, 8192 / D), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      if constexpr (std::is_same_v<T, float>) {
        ln_row_forward_f32(x + m * D, w, b, y + m * D, D, static_cast<float>(eps), pm + m, pr + m);
      } else {
        ln_row_forward_any<T>(x + m * D, w, b, y + m * D, D, static_cast<T>(eps), pm + m, pr + m);
      }
    }
  });
}

template <class T>
void layer_norm_bwd(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                    const Tensor& grad_out, const Tensor& input, const Tensor& mean,
                    const Tensor& rstd, const Tensor& weight) {
  const int64_t M = input.size(0), D = input.size(1);
  const T* x = input.data_ptr<T>();
  const T* dy = grad_out.data_ptr<T>();
  const T* pm = mean.data_ptr<T>();
  const T* pr = rstd.data_ptr<T>();
  const T* w = ptr_or_null<T>(weight);
  if (grad_input.defined()) {
    T* dx = grad_input.data_ptr<T>();
    parallel_for(0, M, std::max<int64_t>(1, 8192 / D), [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        if constexpr (std::is_same_v<T, float>) {
          ln_row_backward_f32(x + m * D, dy + m * D, w, pm[m], pr[m], dx + m * D, D);
        } else if (w) {
          ln_row_backward<T, true>(x + m * D, dy + m * D, w, pm[m], pr[m], dx + m * D, D);
        } else {
          ln_row_backward<T, false>(x + m * D, dy + m * D, w, pm[m], pr[m], dx + m * D, D);
        }
      }
    });
  }
  if (grad_weight.defined() || grad_bias.defined()) {
    // Fixed row blocks (their count depends on M only) summed per block in parallel, then the
    // block partials combined in order: the same bits for any thread count.
    const int64_t rows_per_block = std::max<int64_t>(64, (M + 255) / 256);
    const int64_t nblocks = (M + rows_per_block - 1) / rows_per_block;
    std::vector<double> partial(static_cast<size_t>(2 * nblocks * D), 0.0);
    parallel_for(0, nblocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        double* pw = partial.data() + 2 * blk * D;
        const int64_t m0 = blk * rows_per_block, m1 = std::min(M, m0 + rows_per_block);
        if constexpr (std::is_same_v<T, float>) {
          ln_param_rows_f32(x, dy, pm, pr, m0, m1, D, pw, pw + D);
        } else {
          ln_param_rows<T>(x, dy, pm, pr, m0, m1, D, pw, pw + D);
        }
      }
    });
    T* gw = mut_ptr_or_null<T>(grad_weight);
    T* gb = mut_ptr_or_null<T>(grad_bias);
    std::vector<double> sw(static_cast<size_t>(D), 0.0), sb(static_cast<size_t>(D), 0.0);
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      const double* pw = partial.data() + 2 * blk * D;
      for (int64_t d = 0; d < D; ++d) {
        sw[static_cast<size_t>(d)] += pw[d];
        sb[static_cast<size_t>(d)] += pw[D + d];
      }
    }
    for (int64_t d = 0; d < D; ++d) {
      if (gw) gw[d] = static_cast<T>(sw[static_cast<size_t>(d)]);
      if (gb) gb[d] = static_cast<T>(sb[static_cast<size_t>(d)]);
    }
  }
}

// ---- batch norm: per-plane sums in double (omp simd lanes; float ones also get an AVX2
// clone, as fast here as an AVX-512 one). Each channel's sums run over its planes in order on one
// thread, so no result depends on the thread count.

/// sum of p[0, S) in double.
template <class T>
[[gnu::always_inline]] inline double bn_sum(const T* p, int64_t S) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < S; ++i) s += static_cast<double>(p[i]);
  return s;
}

/// sum of (p[i] - mu)^2 over [0, S) in double.
template <class T>
[[gnu::always_inline]] inline double bn_sum_sq_dev(const T* p, int64_t S, double mu) {
  double ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < S; ++i) {
    const double v = static_cast<double>(p[i]) - mu;
    ss += v * v;
  }
  return ss;
}

/// sdy += sum of g, sdyx += sum of g * (p - mu) over [0, S), in double.
template <class T>
[[gnu::always_inline]] inline void bn_grad_sums(const T* g, const T* p, int64_t S, double mu,
                                                double& sdy, double& sdyx) {
  double a = 0, b = 0;
#pragma omp simd reduction(+ : a, b)
  for (int64_t i = 0; i < S; ++i) {
    const double gi = static_cast<double>(g[i]);
    a += gi;
    b += gi * (static_cast<double>(p[i]) - mu);
  }
  sdy += a;
  sdyx += b;
}

SL_NORM_CLONES double bn_sum_f32(const float* p, int64_t S) {
  return bn_sum(p, S);
}
SL_NORM_CLONES double bn_sum_sq_dev_f32(const float* p, int64_t S, double mu) {
  return bn_sum_sq_dev(p, S, mu);
}
SL_NORM_CLONES void bn_grad_sums_f32(const float* g, const float* p, int64_t S, double mu,
                                     double& sdy, double& sdyx) {
  bn_grad_sums(g, p, S, mu, sdy, sdyx);
}

// the dtype's plane sums: float through its clones, double inline
inline double plane_sum(const float* p, int64_t S) {
  return bn_sum_f32(p, S);
}
inline double plane_sum(const double* p, int64_t S) {
  return bn_sum(p, S);
}
inline double plane_sum_sq_dev(const float* p, int64_t S, double mu) {
  return bn_sum_sq_dev_f32(p, S, mu);
}
inline double plane_sum_sq_dev(const double* p, int64_t S, double mu) {
  return bn_sum_sq_dev(p, S, mu);
}
inline void plane_grad_sums(const float* g, const float* p, int64_t S, double mu, double& sdy,
                            double& sdyx) {
  bn_grad_sums_f32(g, p, S, mu, sdy, sdyx);
}
inline void plane_grad_sums(const double* g, const double* p, int64_t S, double mu, double& sdy,
                            double& sdyx) {
  bn_grad_sums(g, p, S, mu, sdy, sdyx);
}

template <class T>
void batch_norm_fwd(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                    const Tensor& input, const Tensor& weight, const Tensor& bias,
                    const Tensor& running_mean, const Tensor& running_var, bool training,
                    double momentum, double eps) {
  const int64_t N = input.size(0), C = input.size(1), S = input.size(2);
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  const T* w = ptr_or_null<T>(weight);
  const T* b = ptr_or_null<T>(bias);
  T* rm = mut_ptr_or_null<T>(running_mean);
  T* rv = mut_ptr_or_null<T>(running_var);
  T* sm = save_mean.data_ptr<T>();
  T* si = save_invstd.data_ptr<T>();
  const double cnt = static_cast<double>(N * S);
  parallel_for(
      0, C, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, N * S)), [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          double mu, invstd;
          if (training) {
            double s = 0;
            for (int64_t n = 0; n < N; ++n) s += plane_sum(x + (n * C + c) * S, S);
            mu = s / cnt;
            double ss = 0;
            for (int64_t n = 0; n < N; ++n) ss += plane_sum_sq_dev(x + (n * C + c) * S, S, mu);
            invstd = 1.0 / std::sqrt(ss / cnt + eps);
            if (rm) {
              rm[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(rm[c]) + momentum * mu);
              rv[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(rv[c]) +
                                     momentum * ss / (cnt - 1.0));
            }
          } else {
            mu = static_cast<double>(rm[c]);
            invstd = 1.0 / std::sqrt(static_cast<double>(rv[c]) + eps);
          }
          sm[c] = static_cast<T>(mu);
          si[c] = static_cast<T>(invstd);
          // y = x * scale + shift
          const T scale = static_cast<T>((w ? static_cast<double>(w[c]) : 1.0) * invstd);
          const T shift = static_cast<T>((b ? static_cast<double>(b[c]) : 0.0) -
                                         mu * static_cast<double>(scale));
          for (int64_t n = 0; n < N; ++n) {
            const T* p = x + (n * C + c) * S;
            T* q = y + (n * C + c) * S;
            for (int64_t i = 0; i < S; ++i) q[i] = p[i] * scale + shift;
          }
        }
      });
}

template <class T>
void batch_norm_bwd(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                    const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                    const Tensor& save_mean, const Tensor& save_invstd, bool training) {
  const int64_t N = input.size(0), C = input.size(1), S = input.size(2);
  const T* x = input.data_ptr<T>();
  const T* dy = grad_out.data_ptr<T>();
  const T* w = ptr_or_null<T>(weight);
  const T* sm = save_mean.data_ptr<T>();
  const T* si = save_invstd.data_ptr<T>();
  T* dx = mut_ptr_or_null<T>(grad_input);
  T* gw = mut_ptr_or_null<T>(grad_weight);
  T* gb = mut_ptr_or_null<T>(grad_bias);
  const double cnt = static_cast<double>(N * S);
  parallel_for(
      0, C, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, N * S)), [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          const double mu = static_cast<double>(sm[c]), invstd = static_cast<double>(si[c]);
          double sdy = 0, sdyx = 0;  // sum(dy), sum(dy * (x - mean))
          for (int64_t n = 0; n < N; ++n) {
            plane_grad_sums(dy + (n * C + c) * S, x + (n * C + c) * S, S, mu, sdy, sdyx);
          }
          if (gb) gb[c] = static_cast<T>(sdy);
          if (gw) gw[c] = static_cast<T>(sdyx * invstd);
          if (!dx) continue;
          const double wc = w ? static_cast<double>(w[c]) : 1.0;
          if (training) {
            // dx = w * invstd * (dy - mean(dy) - xhat * mean(dy * xhat))
            //    = dy * k + x * a + b with k = w invstd, a = -k invstd^2 sdyx / cnt
            const double k = wc * invstd;
            const double a = -k * invstd * invstd * sdyx / cnt;
            const double b = -k * sdy / cnt - a * mu;
            const T tk = static_cast<T>(k), ta = static_cast<T>(a), tb = static_cast<T>(b);
            for (int64_t n = 0; n < N; ++n) {
              const T* p = x + (n * C + c) * S;
              const T* g = dy + (n * C + c) * S;
              T* q = dx + (n * C + c) * S;
              for (int64_t i = 0; i < S; ++i) q[i] = g[i] * tk + p[i] * ta + tb;
            }
          } else {
            const T tk = static_cast<T>(wc * invstd);
            for (int64_t n = 0; n < N; ++n) {
              const T* g = dy + (n * C + c) * S;
              T* q = dx + (n * C + c) * S;
              for (int64_t i = 0; i < S; ++i) q[i] = g[i] * tk;
            }
          }
        }
      });
}

template <class F>
void float_or_double(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32:
      return f(float{});
    case DType::f64:
      return f(double{});
    default:
      detail::throw_error<DTypeError>(op, ": unsupported dtype ", dtype_name(t));
  }
}

void layer_norm_forward_cpu(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                            const Tensor& input, const Tensor& weight, const Tensor& bias,
                            double eps) {
  float_or_double(input.dtype(), "layer_norm", [&](auto z) {
    layer_norm_fwd<decltype(z)>(out, mean, rstd, input, weight, bias, eps);
  });
}
void layer_norm_backward_cpu(const Tensor& grad_input, const Tensor& grad_weight,
                             const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                             const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  float_or_double(input.dtype(), "layer_norm_backward", [&](auto z) {
    layer_norm_bwd<decltype(z)>(grad_input, grad_weight, grad_bias, grad_out, input, mean, rstd,
                                weight);
  });
}
void batch_norm_forward_cpu(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                            const Tensor& input, const Tensor& weight, const Tensor& bias,
                            const Tensor& running_mean, const Tensor& running_var, bool training,
                            double momentum, double eps) {
  float_or_double(input.dtype(), "batch_norm", [&](auto z) {
    batch_norm_fwd<decltype(z)>(out, save_mean, save_invstd, input, weight, bias, running_mean,
                                running_var, training, momentum, eps);
  });
}
void batch_norm_backward_cpu(const Tensor& grad_input, const Tensor& grad_weight,
                             const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                             const Tensor& weight, const Tensor& save_mean,
                             const Tensor& save_invstd, bool training, double /*eps*/) {
  // eps is unused: save_invstd already includes it (norm.h's contract).
  float_or_double(input.dtype(), "batch_norm_backward", [&](auto z) {
    batch_norm_bwd<decltype(z)>(grad_input, grad_weight, grad_bias, grad_out, input, weight,
                                save_mean, save_invstd, training);
  });
}

SL_REGISTER_KERNEL(layer_norm_forward_kernel, DeviceKind::cpu, &layer_norm_forward_cpu);
SL_REGISTER_KERNEL(layer_norm_backward_kernel, DeviceKind::cpu, &layer_norm_backward_cpu);
SL_REGISTER_KERNEL(batch_norm_forward_kernel, DeviceKind::cpu, &batch_norm_forward_cpu);
SL_REGISTER_KERNEL(batch_norm_backward_kernel, DeviceKind::cpu, &batch_norm_backward_cpu);

}  // namespace
}  // namespace sl::cpu
