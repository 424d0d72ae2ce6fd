// CPU kernels of the upsample family (nearest in 1-d to 3-d, linear, bilinear, trilinear; bicubic
// and antialias in upsample_cubic.cpp): the per-dimension taps (core/ops/upsample_index.h) are
// computed once per call, then planes are split over the OpenMP pool (upsample_planes.h).
// Backward kernels own whole input planes and scatter in ascending output order (Note [Upsample
// backward order]).
#include "core/ops/upsample.h"
#include "core/cpu/upsample_planes.h"
#include "core/ops/upsample_index.h"

namespace sl::cpu {
namespace {

using upsample::LinearTaps;
using upsample_planes::table;

template <class T>
std::vector<int64_t> nearest_table(int64_t in, int64_t out, double scale, bool exact) {
  return table(out,
               [&](int64_t o) { return upsample::nearest_source<T>(o, in, out, scale, exact); });
}

template <class T>
std::vector<LinearTaps<T>> linear_table(int64_t in, int64_t out, bool align_corners, double scale) {
  const T ratio = upsample::linear_ratio<T>(in, out, align_corners, scale);
  return table(
      out, [&](int64_t o) { return upsample::linear_source<T>(o, in, out, ratio, align_corners); });
}

/// The sizes of the planes of t ([P, H, W], or [P, D, H, W] for 5-d inputs: D 1 otherwise) and of
/// the matching output planes of g.
struct Dims {
  int64_t D, H, W, Do, Ho, Wo;
};

Dims dims(const Tensor& t, const UpsampleGeometry& g) {
  const bool vol = t.dim() == 4;
  return {vol ? t.size(1) : 1, t.size(-2), t.size(-1), vol ? g.out_d : 1, g.out_h, g.out_w};
}

template <class T>
void nearest_fwd(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  const Dims s = dims(input, g);
  const auto td = nearest_table<T>(s.D, s.Do, g.scale_d, g.exact);
  const auto th = nearest_table<T>(s.H, s.Ho, g.scale_h, g.exact);
  const auto tw = nearest_table<T>(s.W, s.Wo, g.scale_w, g.exact);
  upsample_planes::forward<T>(out, input, s.Do * s.Ho * s.Wo, [&](const T* xp, T* yp) {
    for (int64_t od = 0; od < s.Do; ++od) {
      for (int64_t oh = 0; oh < s.Ho; ++oh) {
        const T* xr = xp + (td[od] * s.H + th[oh]) * s.W;
        T* yr = yp + (od * s.Ho + oh) * s.Wo;
        for (int64_t ow = 0; ow < s.Wo; ++ow) yr[ow] = xr[tw[ow]];
      }
    }
  });
}

template <class T>
void nearest_bwd(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g) {
  const Dims s = dims(grad_input, g);
  const auto td = nearest_table<T>(s.D, s.Do, g.scale_d, g.exact);
  const auto th = nearest_table<T>(s.H, s.Ho, g.scale_h, g.exact);
  const auto tw = nearest_table<T>(s.W, s.Wo, g.scale_w, g.exact);
  upsample_planes::backward<T>(grad_input, grad_out, s.Do * s.Ho * s.Wo, [&](T* gip, const T* gop) {
    for (int64_t od = 0; od < s.Do; ++od) {
      for (int64_t oh = 0; oh < s.Ho; ++oh) {
        T* gr = gip + (td[od] * s.H + th[oh]) * s.W;
        const T* gor = gop + (od * s.Ho + oh) * s.Wo;
        for (int64_t ow = 0; ow < s.Wo; ++ow) gr[tw[ow]] += gor[ow];
      }
    }
  });
}

template <class T>
void linear_fwd(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  const Dims s = dims(input, g);
  const auto th = linear_table<T>(s.H, s.Ho, g.align_corners, g.scale_h);
  const auto tw = linear_table<T>(s.W, s.Wo, g.align_corners, g.scale_w);
  upsample_planes::forward<T>(out, input, 4 * s.Ho * s.Wo, [&](const T* xp, T* yp) {
    for (int64_t oh = 0; oh < s.Ho; ++oh) {
      const LinearTaps<T> h = th[oh];
      const T* r0 = xp + h.i0 * s.W;
      const T* r1 = xp + h.i1 * s.W;
      for (int64_t ow = 0; ow < s.Wo; ++ow) {
        const LinearTaps<T> w = tw[ow];
        // PyTorch's order: the inner dimension first, then the outer
        yp[oh * s.Wo + ow] =
            (r0[w.i0] * w.l0 + r0[w.i1] * w.l1) * h.l0 + (r1[w.i0] * w.l0 + r1[w.i1] * w.l1) * h.l1;
      }
    }
  });
}

template <class T>
void linear_bwd(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g) {
  const Dims s = dims(grad_input, g);
  const auto th = linear_table<T>(s.H, s.Ho, g.align_corners, g.scale_h);
  const auto tw = linear_table<T>(s.W, s.Wo, g.align_corners, g.scale_w);
  upsample_planes::backward<T>(grad_input, grad_out, 4 * s.Ho * s.Wo, [&](T* gip, const T* gop) {
    for (int64_t oh = 0; oh < s.Ho; ++oh) {
      const LinearTaps<T> h = th[oh];
      T* r0 = gip + h.i0 * s.W;
      T* r1 = gip + h.i1 * s.W;
      for (int64_t ow = 0; ow < s.Wo; ++ow) {
        const LinearTaps<T> w = tw[ow];
        const T v = gop[oh * s.Wo + ow];
        r0[w.i0] += v * (h.l0 * w.l0);
        r0[w.i1] += v * (h.l0 * w.l1);
        r1[w.i0] += v * (h.l1 * w.l0);
        r1[w.i1] += v * (h.l1 * w.l1);
      }
    }
  });
}

template <class T>
void trilinear_fwd(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  const Dims s = dims(input, g);
  const auto td = linear_table<T>(s.D, s.Do, g.align_corners, g.scale_d);
  const auto th = linear_table<T>(s.H, s.Ho, g.align_corners, g.scale_h);
  const auto tw = linear_table<T>(s.W, s.Wo, g.align_corners, g.scale_w);
  upsample_planes::forward<T>(out, input, 8 * s.Do * s.Ho * s.Wo, [&](const T* xp, T* yp) {
    for (int64_t od = 0; od < s.Do; ++od) {
      const LinearTaps<T> d = td[od];
      for (int64_t oh = 0; oh < s.Ho; ++oh) {
        const LinearTaps<T> h = th[oh];
        const T* r00 = xp + (d.i0 * s.H + h.i0) * s.W;
        const T* r01 = xp + (d.i0 * s.H + h.i1) * s.W;
        const T* r10 = xp + (d.i1 * s.H + h.i0) * s.W;
        const T* r11 = xp + (d.i1 * s.H + h.i1) * s.W;
        for (int64_t ow = 0; ow < s.Wo; ++ow) {
          const LinearTaps<T> w = tw[ow];
          // PyTorch's order: the innermost dimension first, then outwards
          yp[(od * s.Ho + oh) * s.Wo + ow] = ((r00[w.i0] * w.l0 + r00[w.i1] * w.l1) * h.l0 +
                                              (r01[w.i0] * w.l0 + r01[w.i1] * w.l1) * h.l1) *
                                                 d.l0 +
                                             ((r10[w.i0] * w.l0 + r10[w.i1] * w.l1) * h.l0 +
                                              (r11[w.i0] * w.l0 + r11[w.i1] * w.l1) * h.l1) *
                                                 d.l1;
        }
      }
    }
  });
}

template <class T>
void trilinear_bwd(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g) {
  const Dims s = dims(grad_input, g);
  const auto td = linear_table<T>(s.D, s.Do, g.align_corners, g.scale_d);
  const auto th = linear_table<T>(s.H, s.Ho, g.align_corners, g.scale_h);
  const auto tw = linear_table<T>(s.W, s.Wo, g.align_corners, g.scale_w);
  const int64_t work = 8 * s.Do * s.Ho * s.Wo;
  upsample_planes::backward<T>(grad_input, grad_out, work, [&](T* gip, const T* gop) {
    for (int64_t od = 0; od < s.Do; ++od) {
      const LinearTaps<T> d = td[od];
      for (int64_t oh = 0; oh < s.Ho; ++oh) {
        const LinearTaps<T> h = th[oh];
        T* rows[4] = {gip + (d.i0 * s.H + h.i0) * s.W, gip + (d.i0 * s.H + h.i1) * s.W,
                      gip + (d.i1 * s.H + h.i0) * s.W, gip + (d.i1 * s.H + h.i1) * s.W};
        const T lrow[4] = {d.l0 * h.l0, d.l0 * h.l1, d.l1 * h.l0, d.l1 * h.l1};
        for (int64_t ow = 0; ow < s.Wo; ++ow) {
          const LinearTaps<T> w = tw[ow];
          const T v = gop[(od * s.Ho + oh) * s.Wo + ow];
          for (int r = 0; r < 4; ++r) {
            rows[r][w.i0] += v * (lrow[r] * w.l0);
            rows[r][w.i1] += v * (lrow[r] * w.l1);
          }
        }
      }
    }
  });
}

void nearest_forward_cpu(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  float_or_double(input, "upsample_nearest",
                  [&](auto z) { nearest_fwd<decltype(z)>(out, input, g); });
}
void nearest_backward_cpu(const Tensor& grad_input, const Tensor& grad_out,
                          const UpsampleGeometry& g) {
  float_or_double(grad_out, "upsample_nearest_backward",
                  [&](auto z) { nearest_bwd<decltype(z)>(grad_input, grad_out, g); });
}
void linear_forward_cpu(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  float_or_double(input, "upsample_linear",
                  [&](auto z) { linear_fwd<decltype(z)>(out, input, g); });
}
void linear_backward_cpu(const Tensor& grad_input, const Tensor& grad_out,
                         const UpsampleGeometry& g) {
  float_or_double(grad_out, "upsample_linear_backward",
                  [&](auto z) { linear_bwd<decltype(z)>(grad_input, grad_out, g); });
}

void trilinear_forward_cpu(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  float_or_double(input, "upsample_trilinear",
                  [&](auto z) { trilinear_fwd<decltype(z)>(out, input, g); });
}
void trilinear_backward_cpu(const Tensor& grad_input, const Tensor& grad_out,
                            const UpsampleGeometry& g) {
  float_or_double(grad_out, "upsample_trilinear_backward",
                  [&](auto z) { trilinear_bwd<decltype(z)>(grad_input, grad_out, g); });
}

SL_REGISTER_KERNEL(upsample_nearest_forward_kernel, DeviceKind::cpu, &nearest_forward_cpu);
SL_REGISTER_KERNEL(upsample_nearest_backward_kernel, DeviceKind::cpu, &nearest_backward_cpu);
SL_REGISTER_KERNEL(upsample_linear_forward_kernel, DeviceKind::cpu, &linear_forward_cpu);
SL_REGISTER_KERNEL(upsample_linear_backward_kernel, DeviceKind::cpu, &linear_backward_cpu);
SL_REGISTER_KERNEL(upsample_trilinear_forward_kernel, DeviceKind::cpu, &trilinear_forward_cpu);
SL_REGISTER_KERNEL(upsample_trilinear_backward_kernel, DeviceKind::cpu, &trilinear_backward_cpu);

}  // namespace
}  // namespace sl::cpu
