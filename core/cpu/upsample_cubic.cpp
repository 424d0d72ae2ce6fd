// CPU kernels of the upsample family's bicubic and antialias modes (the others in upsample.cpp):
// the per-dimension taps or windows (core/ops/upsample_index.h) are computed once per call, then
// planes are split over the OpenMP pool. Backward kernels own whole input planes and scatter in
// ascending output order (Note [Upsample backward order]).
#include <algorithm>
#include <vector>

#include "core/cpu/loops.h"
#include "core/ops/upsample.h"
#include "core/ops/upsample_index.h"

namespace sl::cpu {
namespace {

using upsample::CubicTaps;

/// Planes per parallel task so that each task does at least ~16k element visits.
int64_t plane_grain(int64_t work_per_plane) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, work_per_plane));
}

template <class T>
std::vector<CubicTaps<T>> cubic_table(int64_t in, int64_t out, bool align_corners, double scale) {
  const T ratio = upsample::linear_ratio<T>(in, out, align_corners, scale);
  std::vector<CubicTaps<T>> t(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) t[o] = upsample::cubic_source<T>(o, in, ratio, align_corners);
  return t;
}

template <class T>
void cubic_fwd(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  const int64_t P = input.size(0), H = input.size(1), W = input.size(2);
  const int64_t Ho = g.out_h, Wo = g.out_w;
  const auto th = cubic_table<T>(H, Ho, g.align_corners, g.scale_h);
  const auto tw = cubic_table<T>(W, Wo, g.align_corners, g.scale_w);
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  parallel_for(0, P, plane_grain(16 * Ho * Wo), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * H * W;
      T* yp = y + p * Ho * Wo;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const CubicTaps<T>& h = th[oh];
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const CubicTaps<T>& w = tw[ow];
          // PyTorch's order: each row's taps along W, then the rows along H
          T acc = 0;
          for (int kh = 0; kh < 4; ++kh) {
            const T* r = xp + h.i[kh] * W;
            const T row =
                r[w.i[0]] * w.w[0] + r[w.i[1]] * w.w[1] + r[w.i[2]] * w.w[2] + r[w.i[3]] * w.w[3];
            acc += row * h.w[kh];
          }
          yp[oh * Wo + ow] = acc;
        }
      }
    }
  });
}

template <class T>
void cubic_bwd(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g) {
  const int64_t P = grad_input.size(0), H = grad_input.size(1), W = grad_input.size(2);
  const int64_t Ho = g.out_h, Wo = g.out_w;
  const auto th = cubic_table<T>(H, Ho, g.align_corners, g.scale_h);
  const auto tw = cubic_table<T>(W, Wo, g.align_corners, g.scale_w);
  T* gi = grad_input.data_ptr<T>();
  const T* go = grad_out.data_ptr<T>();
  parallel_for(0, P, plane_grain(H * W + 16 * Ho * Wo), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gip = gi + p * H * W;
      const T* gop = go + p * Ho * Wo;
      std::fill(gip, gip + H * W, T(0));
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const CubicTaps<T>& h = th[oh];
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const CubicTaps<T>& w = tw[ow];
          const T v = gop[oh * Wo + ow];
          for (int kh = 0; kh < 4; ++kh) {
            T* r = gip + h.i[kh] * W;
            for (int kw = 0; kw < 4; ++kw) r[w.i[kw]] += v * (h.w[kh] * w.w[kw]);
          }
        }
      }
    }
  });
}

/// One dimension's antialias windows: window o covers inputs [lo[o], lo[o] + size[o]) with
/// weights w[o * taps + j] (normalised, as PyTorch's _compute_indices_weights_aa).
template <class T>
struct AaTable {
  std::vector<int64_t> lo, size;
  std::vector<T> w;
  int64_t taps = 0;
};

template <class T>
AaTable<T> aa_table(int64_t in, int64_t out, bool align_corners, double scale, bool cubic) {
  const T ratio = upsample::linear_ratio<T>(in, out, align_corners, scale);
  AaTable<T> t;
  t.lo.resize(static_cast<size_t>(out));
  t.size.resize(static_cast<size_t>(out));
  std::vector<upsample::AaWindow<T>> win;
  win.reserve(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    win.push_back(upsample::aa_window<T>(o, in, ratio, cubic));
    t.taps = std::max(t.taps, win.back().size);
  }
  t.w.assign(static_cast<size_t>(out * t.taps), T(0));
  for (int64_t o = 0; o < out; ++o) {
    t.lo[o] = win[o].lo;
    t.size[o] = win[o].size;
    for (int64_t j = 0; j < win[o].size; ++j) t.w[o * t.taps + j] = win[o].weight(j);
  }
  return t;
}

template <class T>
void aa_fwd(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  const int64_t P = input.size(0), H = input.size(1), W = input.size(2);
  const int64_t Ho = g.out_h, Wo = g.out_w;
  const auto th = aa_table<T>(H, Ho, g.align_corners, g.scale_h, g.cubic);
  const auto tw = aa_table<T>(W, Wo, g.align_corners, g.scale_w, g.cubic);
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  const int64_t work = H * Wo * tw.taps + Ho * Wo * th.taps;
  parallel_for(0, P, plane_grain(work), [&](int64_t p0, int64_t p1) {
    std::vector<T> tmp(static_cast<size_t>(H * Wo));  // the W pass of one plane
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * H * W;
      T* yp = y + p * Ho * Wo;
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const T* r = xp + h * W + tw.lo[ow];
          const T* wt = tw.w.data() + ow * tw.taps;
          T acc = 0;
          for (int64_t j = 0; j < tw.size[ow]; ++j) acc += r[j] * wt[j];
          tmp[h * Wo + ow] = acc;
        }
      }
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const T* wt = th.w.data() + oh * th.taps;
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const T* c = tmp.data() + th.lo[oh] * Wo + ow;
          T acc = 0;
          for (int64_t i = 0; i < th.size[oh]; ++i) acc += c[i * Wo] * wt[i];
          yp[oh * Wo + ow] = acc;
        }
      }
    }
  });
}

template <class T>
void aa_bwd(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g) {
  const int64_t P = grad_input.size(0), H = grad_input.size(1), W = grad_input.size(2);
  const int64_t Ho = g.out_h, Wo = g.out_w;
  const auto th = aa_table<T>(H, Ho, g.align_corners, g.scale_h, g.cubic);
  const auto tw = aa_table<T>(W, Wo, g.align_corners, g.scale_w, g.cubic);
  T* gi = grad_input.data_ptr<T>();
  const T* go = grad_out.data_ptr<T>();
  parallel_for(0, P, plane_grain(H * W + Ho * Wo * th.taps * tw.taps), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gip = gi + p * H * W;
      const T* gop = go + p * Ho * Wo;
      std::fill(gip, gip + H * W, T(0));
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const T* wh = th.w.data() + oh * th.taps;
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const T* ww = tw.w.data() + ow * tw.taps;
          const T v = gop[oh * Wo + ow];
          for (int64_t i = 0; i < th.size[oh]; ++i) {
            T* r = gip + (th.lo[oh] + i) * W + tw.lo[ow];
            for (int64_t j = 0; j < tw.size[ow]; ++j) r[j] += v * (wh[i] * ww[j]);
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

void cubic_forward_cpu(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  float_or_double(input, "upsample_bicubic",
                  [&](auto z) { cubic_fwd<decltype(z)>(out, input, g); });
}
void cubic_backward_cpu(const Tensor& grad_input, const Tensor& grad_out,
                        const UpsampleGeometry& g) {
  float_or_double(grad_out, "upsample_bicubic_backward",
                  [&](auto z) { cubic_bwd<decltype(z)>(grad_input, grad_out, g); });
}
void aa_forward_cpu(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  float_or_double(input, "upsample_antialias", [&](auto z) { aa_fwd<decltype(z)>(out, input, g); });
}
void aa_backward_cpu(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g) {
  float_or_double(grad_out, "upsample_antialias_backward",
                  [&](auto z) { aa_bwd<decltype(z)>(grad_input, grad_out, g); });
}

SL_REGISTER_KERNEL(upsample_cubic_forward_kernel, DeviceKind::cpu, &cubic_forward_cpu);
SL_REGISTER_KERNEL(upsample_cubic_backward_kernel, DeviceKind::cpu, &cubic_backward_cpu);
SL_REGISTER_KERNEL(upsample_aa_forward_kernel, DeviceKind::cpu, &aa_forward_cpu);
SL_REGISTER_KERNEL(upsample_aa_backward_kernel, DeviceKind::cpu, &aa_backward_cpu);

}  // namespace
}  // namespace sl::cpu
