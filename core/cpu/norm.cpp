// CPU kernels of the norm family (Note [Norm statistics]). Layer norm splits rows over the
// OpenMP pool, batch norm splits channels; parameter gradients of layer norm are summed per
// column block over all rows in order, so no result depends on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/loops.h"
#include "core/ops/norm.h"

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
      const T* xr = x + m * D;
      T* yr = y + m * D;
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += static_cast<double>(xr[d]);
      const double mu = s / static_cast<double>(D);
      double ss = 0;
      for (int64_t d = 0; d < D; ++d) {
        double v = static_cast<double>(xr[d]) - mu;
        ss += v * v;
      }
      const double r = 1.0 / std::sqrt(ss / static_cast<double>(D) + eps);
      pm[m] = static_cast<T>(mu);
      pr[m] = static_cast<T>(r);
      const T tm = static_cast<T>(mu), tr = static_cast<T>(r);
      if (w && b) {
        for (int64_t d = 0; d < D; ++d) yr[d] = (xr[d] - tm) * tr * w[d] + b[d];
      } else if (w) {
        for (int64_t d = 0; d < D; ++d) yr[d] = (xr[d] - tm) * tr * w[d];
      } else if (b) {
        for (int64_t d = 0; d < D; ++d) yr[d] = (xr[d] - tm) * tr + b[d];
      } else {
        for (int64_t d = 0; d < D; ++d) yr[d] = (xr[d] - tm) * tr;
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
        const T* xr = x + m * D;
        const T* gr = dy + m * D;
        T* dr = dx + m * D;
        const T mu = pm[m], r = pr[m];
        double sg = 0, sgx = 0;  // sum(g), sum(g * xhat) with g = dy * w
        for (int64_t d = 0; d < D; ++d) {
          const T g = w ? gr[d] * w[d] : gr[d];
          sg += static_cast<double>(g);
          sgx += static_cast<double>(g) * static_cast<double>((xr[d] - mu) * r);
        }
        const T a = static_cast<T>(sg / static_cast<double>(D));
        const T c = static_cast<T>(sgx / static_cast<double>(D));
        for (int64_t d = 0; d < D; ++d) {
          const T g = w ? gr[d] * w[d] : gr[d];
          dr[d] = r * (g - a - (xr[d] - mu) * r * c);
        }
      }
    });
  }
  if (grad_weight.defined() || grad_bias.defined()) {
    T* gw = mut_ptr_or_null<T>(grad_weight);
    T* gb = mut_ptr_or_null<T>(grad_bias);
    constexpr int64_t kCols = 64;
    const int64_t nblocks = (D + kCols - 1) / kCols;
    parallel_for(0, nblocks, 1, [&](int64_t b0, int64_t b1) {
      double accw[kCols], accb[kCols];
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t d0 = blk * kCols, d1 = std::min(D, d0 + kCols), n = d1 - d0;
        std::fill(accw, accw + n, 0.0);
        std::fill(accb, accb + n, 0.0);
        for (int64_t m = 0; m < M; ++m) {
          const T* xr = x + m * D + d0;
          const T* gr = dy + m * D + d0;
          const T mu = pm[m], r = pr[m];
          for (int64_t k = 0; k < n; ++k) {
            accw[k] += static_cast<double>(gr[k] * ((xr[k] - mu) * r));
            accb[k] += static_cast<double>(gr[k]);
          }
        }
        for (int64_t k = 0; k < n; ++k) {
          if (gw) gw[d0 + k] = static_cast<T>(accw[k]);
          if (gb) gb[d0 + k] = static_cast<T>(accb[k]);
        }
      }
    });
  }
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
            for (int64_t n = 0; n < N; ++n) {
              const T* p = x + (n * C + c) * S;
              for (int64_t i = 0; i < S; ++i) s += static_cast<double>(p[i]);
            }
            mu = s / cnt;
            double ss = 0;
            for (int64_t n = 0; n < N; ++n) {
              const T* p = x + (n * C + c) * S;
              for (int64_t i = 0; i < S; ++i) {
                double v = static_cast<double>(p[i]) - mu;
                ss += v * v;
              }
            }
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
            const T* p = x + (n * C + c) * S;
            const T* g = dy + (n * C + c) * S;
            for (int64_t i = 0; i < S; ++i) {
              sdy += static_cast<double>(g[i]);
              sdyx += static_cast<double>(g[i]) * (static_cast<double>(p[i]) - mu);
            }
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
                             const Tensor& save_invstd, bool training) {
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
