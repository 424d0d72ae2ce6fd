// CPU kernels of the upsample family's bicubic and antialias modes (the others in upsample.cpp):
// the per-dimension taps or windows (core/ops/upsample_index.h) are computed once per call, then
// planes are split over the OpenMP pool (upsample_planes.h). Backward kernels own whole input
// planes and scatter in ascending output order (Note [Upsample backward order]).
#include "core/cpu/upsample_planes.h"
#include "core/ops/upsample.h"
#include "core/ops/upsample_index.h"

namespace sl::cpu {
namespace {

using upsample::CubicTaps;

template <class T>
std::vector<CubicTaps<T>> cubic_table(int64_t in, int64_t out, bool align_corners, double scale) {
  const T ratio = upsample::linear_ratio<T>(in, out, align_corners, scale);
  return upsample_planes::table(
      out, [&](int64_t o) { return upsample::cubic_source<T>(o, in, ratio, align_corners); });
}

template <class T>
void cubic_fwd(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  const int64_t H = input.size(1), W = input.size(2), Ho = g.out_h, Wo = g.out_w;
  const auto th = cubic_table<T>(H, Ho, g.align_corners, g.scale_h);
  const auto tw = cubic_table<T>(W, Wo, g.align_corners, g.scale_w);
  upsample_planes::forward<T>(out, input, 16 * Ho * Wo, [&](const T* xp, T* yp) {
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
  });
}

template <class T>
void cubic_bwd(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g) {
  const int64_t H = grad_input.size(1), W = grad_input.size(2), Ho = g.out_h, Wo = g.out_w;
  const auto th = cubic_table<T>(H, Ho, g.align_corners, g.scale_h);
  const auto tw = cubic_table<T>(W, Wo, g.align_corners, g.scale_w);
  upsample_planes::backward<T>(grad_input, grad_out, 16 * Ho * Wo, [&](T* gip, const T* gop) {
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
  const int64_t H = input.size(1), W = input.size(2), Ho = g.out_h, Wo = g.out_w;
  const auto th = aa_table<T>(H, Ho, g.align_corners, g.scale_h, g.cubic);
  const auto tw = aa_table<T>(W, Wo, g.align_corners, g.scale_w, g.cubic);
  const int64_t work = H * Wo * tw.taps + Ho * Wo * th.taps;
  upsample_planes::forward<T>(out, input, work, [&](const T* xp, T* yp) {
    std::vector<T> tmp(static_cast<size_t>(H * Wo));  // the W pass of the plane
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
  });
}

template <class T>
void aa_bwd(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g) {
  const int64_t H = grad_input.size(1), W = grad_input.size(2), Ho = g.out_h, Wo = g.out_w;
  const auto th = aa_table<T>(H, Ho, g.align_corners, g.scale_h, g.cubic);
  const auto tw = aa_table<T>(W, Wo, g.align_corners, g.scale_w, g.cubic);
  const int64_t work = Ho * Wo * th.taps * tw.taps;
  upsample_planes::backward<T>(grad_input, grad_out, work, [&](T* gip, const T* gop) {
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
  });
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
