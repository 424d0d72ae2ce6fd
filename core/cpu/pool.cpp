// CPU kernels of the pool family: one plane per task, split over the OpenMP pool. Backward
// kernels own whole input planes, so their accumulation order is fixed.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/cpu/float_dispatch.h"
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

// Note [Vectorised max pooling]
// max_pool_fwd runs tap by tap over a whole output row: for each kernel tap (i, j) in the
// window's order (rows, then columns), every output column whose tap lies inside the input
// compares that tap against its running maximum, a loop over contiguous output columns (input
// columns `stride` apart) that the compiler vectorises. Each output still visits its valid taps
// in PyTorch's order with PyTorch's rule (in max_row), so values and indices are those of the
// window-at-a-time loop (kept in tests/ops/test_pool.cpp as the reference).

/// Output columns [lo, hi) whose input column ow * stride + off lies in [0, W).
inline void column_range(int64_t off, int64_t stride, int64_t W, int64_t Wo, int64_t& lo,
                         int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  hi = W - 1 - off < 0 ? 0 : std::min(Wo, (W - 1 - off) / stride + 1);
  lo = std::min(lo, hi);
}

/// One tap over output columns [lo, hi): xp[at + ow * stride] against best[ow]; a strictly
/// greater value or a NaN takes over, and bi[ow] becomes at + ow * stride.
template <class T, class I>
[[gnu::always_inline]] inline void max_tap(const T* __restrict xp, int64_t stride, int64_t at,
                                           int64_t lo, int64_t hi, T* __restrict best,
                                           I* __restrict bi) {
  if (stride == 1) {
#pragma omp simd
    for (int64_t ow = lo; ow < hi; ++ow) {
      const T v = xp[at + ow];
      const bool take = v > best[ow] || v != v;
      best[ow] = take ? v : best[ow];
      bi[ow] = take ? static_cast<I>(at + ow) : bi[ow];
    }
  } else if (stride == 2) {
#pragma omp simd
    for (int64_t ow = lo; ow < hi; ++ow) {
      const T v = xp[at + 2 * ow];
      const bool take = v > best[ow] || v != v;
      best[ow] = take ? v : best[ow];
      bi[ow] = take ? static_cast<I>(at + 2 * ow) : bi[ow];
    }
  } else {
#pragma omp simd
    for (int64_t ow = lo; ow < hi; ++ow) {
      const T v = xp[at + ow * stride];
      const bool take = v > best[ow] || v != v;
      best[ow] = take ? v : best[ow];
      bi[ow] = take ? static_cast<I>(at + ow * stride) : bi[ow];
    }
  }
}

/// Column geometry of max pooling, the same for every row and plane.
struct MaxCols {
  int64_t W, Wo, kw, sw, dw, pw;
  const int64_t* jlo;     // first valid column tap of each output column (kw: none)
  const int64_t* tap_lo;  // output columns [tap_lo[j], tap_hi[j]) have column tap j inside
  const int64_t* tap_hi;
};

/// One output row of one plane: y[Wo] and ind[Wo] for the window rows [ilo, ihi) starting at
/// input row h0. best / bi hold Wo elements each.
template <class T, class I>
[[gnu::always_inline]] inline void max_row(const T* __restrict xp, int64_t h0, int64_t dh,
                                           int64_t ilo, int64_t ihi, const MaxCols& c,
                                           T* __restrict y, int64_t* __restrict ind,
                                           T* __restrict best, I* __restrict bi) {
  const int64_t W = c.W, Wo = c.Wo;
  // PyTorch's rule: the first valid position starts, a strictly greater value or a NaN takes
  // over (so ties keep the first maximum, an all -inf window its first slot, and of several
  // NaNs the last wins); an empty window, all taps in the padding, keeps index -1 and -inf: its
  // gradient goes nowhere, where PyTorch reports an index past the plane
  for (int64_t ow = 0; ow < Wo; ++ow) {
    best[ow] = -std::numeric_limits<T>::infinity();
    const int64_t lo = c.jlo[ow];
    const bool any = ilo < ihi && lo < c.kw;
    bi[ow] = any ? static_cast<I>((h0 + ilo * dh) * W + ow * c.sw - c.pw + lo * c.dw) : I(-1);
  }
  for (int64_t i = ilo; i < ihi; ++i) {
    const int64_t row = (h0 + i * dh) * W - c.pw;
    for (int64_t j = 0; j < c.kw; ++j) {
      const int64_t lo = c.tap_lo[j], hi = c.tap_hi[j];
      if (lo >= hi) continue;
      const int64_t at = row + j * c.dw;  // input index of output column 0's tap
      max_tap<T, I>(xp, c.sw, at, lo, hi, best, bi);
    }
  }
#pragma omp simd
  for (int64_t ow = 0; ow < Wo; ++ow) {
    y[ow] = best[ow];
    ind[ow] = static_cast<int64_t>(bi[ow]);
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SL_POOL_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SL_POOL_CLONES
#endif

// The row kernels with an AVX2 clone (an AVX-512 one is slower on the short rows of small
// images); indices within the plane in 32 bits where they fit.
SL_POOL_CLONES void max_row_f32(const float* xp, int64_t h0, int64_t dh, int64_t ilo, int64_t ihi,
                                const MaxCols& c, float* y, int64_t* ind, float* best,
                                int32_t* bi) {
  max_row<float, int32_t>(xp, h0, dh, ilo, ihi, c, y, ind, best, bi);
}
SL_POOL_CLONES void max_row_f64(const double* xp, int64_t h0, int64_t dh, int64_t ilo, int64_t ihi,
                                const MaxCols& c, double* y, int64_t* ind, double* best,
                                int64_t* bi) {
  max_row<double, int64_t>(xp, h0, dh, ilo, ihi, c, y, ind, best, bi);
}
void max_row_f32_wide(const float* xp, int64_t h0, int64_t dh, int64_t ilo, int64_t ihi,
                      const MaxCols& c, float* y, int64_t* ind, float* best, int64_t* bi) {
  max_row<float, int64_t>(xp, h0, dh, ilo, ihi, c, y, ind, best, bi);
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
  std::vector<int64_t> jlo(static_cast<size_t>(Wo)), tap_lo(static_cast<size_t>(g.kw)),
      tap_hi(static_cast<size_t>(g.kw));
  for (int64_t ow = 0; ow < Wo; ++ow) {
    int64_t hi;
    tap_range(ow * g.stride_w - g.pad_w, g.kw, g.dilation_w, W, jlo[static_cast<size_t>(ow)], hi);
    if (jlo[static_cast<size_t>(ow)] >= hi) jlo[static_cast<size_t>(ow)] = g.kw;  // no valid tap
  }
  for (int64_t j = 0; j < g.kw; ++j) {
    column_range(j * g.dilation_w - g.pad_w, g.stride_w, W, Wo, tap_lo[static_cast<size_t>(j)],
                 tap_hi[static_cast<size_t>(j)]);
  }
  const MaxCols cols{W,       Wo,         g.kw,          g.stride_w,   g.dilation_w,
                     g.pad_w, jlo.data(), tap_lo.data(), tap_hi.data()};
  const bool narrow = H * W <= std::numeric_limits<int32_t>::max();
  parallel_for(0, P, plane_grain(Ho * Wo * g.kh * g.kw), [&](int64_t p0, int64_t p1) {
    std::vector<T> best(static_cast<size_t>(Wo));
    std::vector<int64_t> bi64(static_cast<size_t>(Wo));
    std::vector<int32_t> bi32(static_cast<size_t>(Wo));
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const int64_t h0 = oh * g.stride_h - g.pad_h;
        int64_t ilo, ihi;
        tap_range(h0, g.kh, g.dilation_h, H, ilo, ihi);
        T* yr = y + (p * Ho + oh) * Wo;
        int64_t* ir = ind + (p * Ho + oh) * Wo;
        if constexpr (std::is_same_v<T, float>) {
          if (narrow) {
            max_row_f32(xp, h0, g.dilation_h, ilo, ihi, cols, yr, ir, best.data(), bi32.data());
          } else {
            max_row_f32_wide(xp, h0, g.dilation_h, ilo, ihi, cols, yr, ir, best.data(),
                             bi64.data());
          }
        } else {
          max_row_f64(xp, h0, g.dilation_h, ilo, ihi, cols, yr, ir, best.data(), bi64.data());
        }
      }
    }
  });
}

/// Scatter in ascending output order from zero, in T: the order and precision the CUDA gather
/// reproduces (Note [Max-pool backward order] in core/ops/pool.h); needs only the indices.
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

/// Adaptive max over the windows of adaptive_fwd, with max_row's rule (PyTorch's): the window's
/// first position starts with -inf, a strictly greater value or a NaN takes over.
template <class T>
void adaptive_max_fwd(const Tensor& out, const Tensor& indices, const Tensor& input) {
  const int64_t P = input.size(0), H = input.size(1), W = input.size(2);
  const int64_t Ho = out.size(1), Wo = out.size(2);
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  int64_t* ind = indices.data_ptr<int64_t>();
  parallel_for(0, P, plane_grain(H * W + Ho * Wo), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const int64_t hs = adaptive_start(oh, H, Ho), he = adaptive_end(oh, H, Ho);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t ws = adaptive_start(ow, W, Wo), we = adaptive_end(ow, W, Wo);
          T best = -std::numeric_limits<T>::infinity();
          int64_t bi = hs * W + ws;
          for (int64_t h = hs; h < he; ++h) {
            for (int64_t w = ws; w < we; ++w) {
              const T v = xp[h * W + w];
              if (v > best || v != v) {
                best = v;
                bi = h * W + w;
              }
            }
          }
          y[(p * Ho + oh) * Wo + ow] = best;
          ind[(p * Ho + oh) * Wo + ow] = bi;
        }
      }
    }
  });
}

void max_pool2d_forward_cpu(const Tensor& out, const Tensor& indices, const Tensor& input,
                            const Pool2dGeometry& g) {
  float_or_double(input, "max_pool2d",
                  [&](auto z) { max_pool_fwd<decltype(z)>(out, indices, input, g); });
}
void max_pool2d_backward_cpu(const Tensor& grad_input, const Tensor& grad_out,
                             const Tensor& indices, const Pool2dGeometry& /*g*/) {
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

void adaptive_max_pool2d_forward_cpu(const Tensor& out, const Tensor& indices,
                                     const Tensor& input) {
  float_or_double(input, "adaptive_max_pool2d",
                  [&](auto z) { adaptive_max_fwd<decltype(z)>(out, indices, input); });
}
void adaptive_max_pool2d_backward_cpu(const Tensor& grad_input, const Tensor& grad_out,
                                      const Tensor& indices) {
  // the max-pool scatter: ascending output order from zero (Note [Max-pool backward order])
  float_or_double(grad_out, "adaptive_max_pool2d_backward",
                  [&](auto z) { max_pool_bwd<decltype(z)>(grad_input, grad_out, indices); });
}

SL_REGISTER_KERNEL(max_pool2d_forward_kernel, DeviceKind::cpu, &max_pool2d_forward_cpu);
SL_REGISTER_KERNEL(max_pool2d_backward_kernel, DeviceKind::cpu, &max_pool2d_backward_cpu);
SL_REGISTER_KERNEL(avg_pool2d_forward_kernel, DeviceKind::cpu, &avg_pool2d_forward_cpu);
SL_REGISTER_KERNEL(avg_pool2d_backward_kernel, DeviceKind::cpu, &avg_pool2d_backward_cpu);
SL_REGISTER_KERNEL(adaptive_avg_pool2d_forward_kernel, DeviceKind::cpu,
                   &adaptive_avg_pool2d_forward_cpu);
SL_REGISTER_KERNEL(adaptive_avg_pool2d_backward_kernel, DeviceKind::cpu,
                   &adaptive_avg_pool2d_backward_cpu);
SL_REGISTER_KERNEL(adaptive_max_pool2d_forward_kernel, DeviceKind::cpu,
                   &adaptive_max_pool2d_forward_cpu);
SL_REGISTER_KERNEL(adaptive_max_pool2d_backward_kernel, DeviceKind::cpu,
                   &adaptive_max_pool2d_backward_cpu);

}  // namespace
}  // namespace sl::cpu
