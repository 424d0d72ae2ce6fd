// CPU kernels of the pool family: one plane per task, split over the OpenMP pool. Backward
// kernels own whole input planes, so their accumulation order is fixed.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/loops.h"
#include "core/ops/pool.h"

namespace sl::cpu {
namespace {

/// Planes per parallel task so that each task does at least ~16k element visits.
int64_t plane_grain(int64_t work_per_plane) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, work_per_plane));
}

/// Kernel taps [lo, hi) whose input position start + k * dil lies in [0, size).
inline void tap_range(int64_t start, int64_t k, int64_t dil, int64_t size, int64_t& lo,
                      int64_t& hi) {
  lo = start >= 0 ? 0 : (-start + dil - 1) / dil;
  hi = start >= size ? 0 : std::min(k, (size - start + dil - 1) / dil);
  lo = std::min(lo, hi);
}

template <class T>
void max_pool_fwd(const Tensor& out, const Tensor& indices, const Tensor& input,
                  const Pool2dGeometry& g) {
  const int64_t P = input.size(0), H = input.size(1), W = input.size(2);
  const int64_t Ho = g.out_h, Wo = g.out_w;
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  int64_t* ind = indices.data_ptr<int64_t>();
  // column tap ranges are the same for every row and plane
  std::vector<int64_t> jlo(static_cast<size_t>(Wo)), jhi(static_cast<size_t>(Wo));
  for (int64_t ow = 0; ow < Wo; ++ow) {
    tap_range(ow * g.stride_w - g.pad_w, g.kw, g.dilation_w, W, jlo[static_cast<size_t>(ow)],
              jhi[static_cast<size_t>(ow)]);
  }
  parallel_for(0, P, plane_grain(Ho * Wo * g.kh * g.kw), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * H * W;
      T* yp = y + p * Ho * Wo;
      int64_t* ip = ind + p * Ho * Wo;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const int64_t h0 = oh * g.stride_h - g.pad_h;
        int64_t ilo, ihi;
        tap_range(h0, g.kh, g.dilation_h, H, ilo, ihi);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t w0 = ow * g.stride_w - g.pad_w;
          const int64_t lo = jlo[static_cast<size_t>(ow)], hi = jhi[static_cast<size_t>(ow)];
          // PyTorch's rule: the first valid position starts, a strictly greater value or a NaN
          // takes over (so ties keep the first maximum and an all -inf window its first slot)
          // (an empty window, all taps in the padding, keeps index -1 and -inf: its gradient
          // goes nowhere, where PyTorch reports an index past the plane)
          int64_t best_i =
              ilo < ihi && lo < hi ? (h0 + ilo * g.dilation_h) * W + w0 + lo * g.dilation_w : -1;
          T best = -std::numeric_limits<T>::infinity();
          for (int64_t i = ilo; i < ihi; ++i) {
            const int64_t row = (h0 + i * g.dilation_h) * W + w0;
            for (int64_t j = lo; j < hi; ++j) {
              const int64_t idx = row + j * g.dilation_w;
              const T v = xp[idx];
              if (v > best || v != v) {
                best = v;
                best_i = idx;
              }
            }
          }
          yp[oh * Wo + ow] = best;
          ip[oh * Wo + ow] = best_i;
        }
      }
    }
  });
}

template <class T>
void max_pool_bwd(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices) {
  const int64_t P = grad_input.size(0), HW = grad_input.size(1) * grad_input.size(2);
  const int64_t HWo = grad_out.size(1) * grad_out.size(2);
  T* gi = grad_input.data_ptr<T>();
  const T* go = grad_out.data_ptr<T>();
  const int64_t* ind = indices.data_ptr<int64_t>();
  parallel_for(0, P, plane_grain(HW + HWo), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gip = gi + p * HW;
      std::fill(gip, gip + HW, T(0));
      for (int64_t k = 0; k < HWo; ++k) {
        int64_t i = ind[p * HWo + k];
        if (i >= 0 && i < HW) gip[i] += go[p * HWo + k];
      }
    }
  });
}

/// PyTorch's avg_pool2d window: [hs, he) x [ws, we) clipped to the input, and its divisor.
struct AvgWindow {
  int64_t hs, he, ws, we;
  int64_t divisor;
};

inline AvgWindow avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W, const Pool2dGeometry& g) {
  int64_t hs = oh * g.stride_h - g.pad_h, ws = ow * g.stride_w - g.pad_w;
  int64_t he = std::min(hs + g.kh, H + g.pad_h), we = std::min(ws + g.kw, W + g.pad_w);
  int64_t pool_size = (he - hs) * (we - ws);
  hs = std::max<int64_t>(hs, 0);
  ws = std::max<int64_t>(ws, 0);
  he = std::min(he, H);
  we = std::min(we, W);
  int64_t div = g.divisor_override    ? g.divisor_override
                : g.count_include_pad ? pool_size
                                      : (he - hs) * (we - ws);
  return {hs, he, ws, we, div};
}

template <class T>
void avg_pool_fwd(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
  const int64_t P = input.size(0), H = input.size(1), W = input.size(2);
  const int64_t Ho = g.out_h, Wo = g.out_w;
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  parallel_for(0, P, plane_grain(Ho * Wo * g.kh * g.kw), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        for (int64_t ow = 0; ow < Wo; ++ow) {
          AvgWindow a = avg_window(oh, ow, H, W, g);
          T s = 0;
          for (int64_t h = a.hs; h < a.he; ++h) {
            for (int64_t w = a.ws; w < a.we; ++w) s += xp[h * W + w];
          }
          // an empty window (possible only past the input with ceil_mode) averages to 0
          y[(p * Ho + oh) * Wo + ow] = a.divisor > 0 ? s / static_cast<T>(a.divisor) : T(0);
        }
      }
    }
  });
}

template <class T>
void avg_pool_bwd(const Tensor& grad_input, const Tensor& grad_out, const Pool2dGeometry& g) {
  const int64_t P = grad_input.size(0), H = grad_input.size(1), W = grad_input.size(2);
  const int64_t Ho = g.out_h, Wo = g.out_w;
  T* gi = grad_input.data_ptr<T>();
  const T* go = grad_out.data_ptr<T>();
  parallel_for(0, P, plane_grain(H * W + Ho * Wo * g.kh * g.kw), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gip = gi + p * H * W;
      std::fill(gip, gip + H * W, T(0));
      for (int64_t oh = 0; oh < Ho; ++oh) {
        for (int64_t ow = 0; ow < Wo; ++ow) {
          AvgWindow a = avg_window(oh, ow, H, W, g);
          if (a.divisor <= 0) continue;
          const T v = go[(p * Ho + oh) * Wo + ow] / static_cast<T>(a.divisor);
          for (int64_t h = a.hs; h < a.he; ++h) {
            for (int64_t w = a.ws; w < a.we; ++w) gip[h * W + w] += v;
          }
        }
      }
    }
  });
}

inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) {
  return (o * in) / out;
}
inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

template <class T>
void adaptive_fwd(const Tensor& out, const Tensor& input) {
  const int64_t P = input.size(0), H = input.size(1), W = input.size(2);
  const int64_t Ho = out.size(1), Wo = out.size(2);
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  parallel_for(0, P, plane_grain(H * W + Ho * Wo), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const int64_t hs = adaptive_start(oh, H, Ho), he = adaptive_end(oh, H, Ho);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t ws = adaptive_start(ow, W, Wo), we = adaptive_end(ow, W, Wo);
          T s = 0;
          for (int64_t h = hs; h < he; ++h) {
            for (int64_t w = ws; w < we; ++w) s += xp[h * W + w];
          }
          y[(p * Ho + oh) * Wo + ow] = s / static_cast<T>((he - hs) * (we - ws));
        }
      }
    }
  });
}

template <class T>
void adaptive_bwd(const Tensor& grad_input, const Tensor& grad_out) {
  const int64_t P = grad_input.size(0), H = grad_input.size(1), W = grad_input.size(2);
  const int64_t Ho = grad_out.size(1), Wo = grad_out.size(2);
  T* gi = grad_input.data_ptr<T>();
  const T* go = grad_out.data_ptr<T>();
  parallel_for(0, P, plane_grain(H * W + Ho * Wo), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gip = gi + p * H * W;
      std::fill(gip, gip + H * W, T(0));
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const int64_t hs = adaptive_start(oh, H, Ho), he = adaptive_end(oh, H, Ho);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t ws = adaptive_start(ow, W, Wo), we = adaptive_end(ow, W, Wo);
          const T v = go[(p * Ho + oh) * Wo + ow] / static_cast<T>((he - hs) * (we - ws));
          for (int64_t h = hs; h < he; ++h) {
            for (int64_t w = ws; w < we; ++w) gip[h * W + w] += v;
          }
        }
      }
    }
  });
}

/// Calls f with the float type of t (f32/f64), naming op in the error for other dtypes.
template <class F>
void float_or_double(const Tensor& t, const char* op, F&& f) {
  switch (t.dtype()) {
    case DType::f32:
      return f(float{});
    case DType::f64:
      return f(double{});
    default:
      detail::throw_error<DTypeError>(op, ": unsupported dtype ", dtype_name(t.dtype()));
  }
}

void max_pool2d_forward_cpu(const Tensor& out, const Tensor& indices, const Tensor& input,
                            const Pool2dGeometry& g) {
  float_or_double(input, "max_pool2d",
                  [&](auto z) { max_pool_fwd<decltype(z)>(out, indices, input, g); });
}
void max_pool2d_backward_cpu(const Tensor& grad_input, const Tensor& grad_out,
                             const Tensor& indices) {
  float_or_double(grad_out, "max_pool2d_backward",
                  [&](auto z) { max_pool_bwd<decltype(z)>(grad_input, grad_out, indices); });
}
void avg_pool2d_forward_cpu(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
  float_or_double(input, "avg_pool2d", [&](auto z) { avg_pool_fwd<decltype(z)>(out, input, g); });
}
void avg_pool2d_backward_cpu(const Tensor& grad_input, const Tensor& grad_out,
                             const Pool2dGeometry& g) {
  float_or_double(grad_out, "avg_pool2d_backward",
                  [&](auto z) { avg_pool_bwd<decltype(z)>(grad_input, grad_out, g); });
}
void adaptive_avg_pool2d_forward_cpu(const Tensor& out, const Tensor& input) {
  float_or_double(input, "adaptive_avg_pool2d",
                  [&](auto z) { adaptive_fwd<decltype(z)>(out, input); });
}
void adaptive_avg_pool2d_backward_cpu(const Tensor& grad_input, const Tensor& grad_out) {
  float_or_double(grad_out, "adaptive_avg_pool2d_backward",
                  [&](auto z) { adaptive_bwd<decltype(z)>(grad_input, grad_out); });
}

SL_REGISTER_KERNEL(max_pool2d_forward_kernel, DeviceKind::cpu, &max_pool2d_forward_cpu);
SL_REGISTER_KERNEL(max_pool2d_backward_kernel, DeviceKind::cpu, &max_pool2d_backward_cpu);
SL_REGISTER_KERNEL(avg_pool2d_forward_kernel, DeviceKind::cpu, &avg_pool2d_forward_cpu);
SL_REGISTER_KERNEL(avg_pool2d_backward_kernel, DeviceKind::cpu, &avg_pool2d_backward_cpu);
SL_REGISTER_KERNEL(adaptive_avg_pool2d_forward_kernel, DeviceKind::cpu,
                   &adaptive_avg_pool2d_forward_cpu);
SL_REGISTER_KERNEL(adaptive_avg_pool2d_backward_kernel, DeviceKind::cpu,
                   &adaptive_avg_pool2d_backward_cpu);

}  // namespace
}  // namespace sl::cpu
