// CPU kernels of the upsample family (nearest in 1-d to 3-d, linear, bilinear, trilinear; bicubic
// and antialias in upsample_cubic.cpp): the per-dimension taps (core/ops/upsample_index.h) are
// computed once per call, then planes are split over the OpenMP pool. Backward kernels own whole
// input planes and scatter in ascending output order (Note [Upsample backward order]).
#include <algorithm>
#include <vector>

#include "core/cpu/loops.h"
#include "core/ops/upsample.h"
#include "core/ops/upsample_index.h"

namespace sl::cpu {
namespace {

using upsample::LinearTaps;

/// Planes per parallel task so that each task does at least ~16k element visits.
int64_t plane_grain(int64_t work_per_plane) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, work_per_plane));
}

template <class T>
std::vector<int64_t> nearest_table(int64_t in, int64_t out, double scale, bool exact) {
  std::vector<int64_t> t(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) t[o] = upsample::nearest_source<T>(o, in, out, scale, exact);
  return t;
}

template <class T>
std::vector<LinearTaps<T>> linear_table(int64_t in, int64_t out, bool align_corners, double scale) {
  const T ratio = upsample::linear_ratio<T>(in, out, align_corners, scale);
  std::vector<LinearTaps<T>> t(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    t[o] = upsample::linear_source<T>(o, in, out, ratio, align_corners);
  }
  return t;
}

/// Nearest covers [P, H, W] planes and [P, D, H, W] volumes: (D, H, W) of a 3- or 4-d tensor.
void spatial(const Tensor& t, int64_t& D, int64_t& H, int64_t& W) {
  D = t.dim() == 4 ? t.size(1) : 1;
  H = t.size(-2);
  W = t.size(-1);
}

template <class T>
void nearest_fwd(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  int64_t D, H, W;
  spatial(input, D, H, W);
  const int64_t P = input.size(0), Do = input.dim() == 4 ? g.out_d : 1, Ho = g.out_h, Wo = g.out_w;
  const auto td = nearest_table<T>(D, Do, g.scale_d, g.exact);
  const auto th = nearest_table<T>(H, Ho, g.scale_h, g.exact);
  const auto tw = nearest_table<T>(W, Wo, g.scale_w, g.exact);
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  parallel_for(0, P, plane_grain(Do * Ho * Wo), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * D * H * W;
      T* yp = y + p * Do * Ho * Wo;
      for (int64_t od = 0; od < Do; ++od) {
        for (int64_t oh = 0; oh < Ho; ++oh) {
          const T* xr = xp + (td[od] * H + th[oh]) * W;
          T* yr = yp + (od * Ho + oh) * Wo;
          for (int64_t ow = 0; ow < Wo; ++ow) yr[ow] = xr[tw[ow]];
        }
      }
    }
  });
}

template <class T>
void nearest_bwd(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g) {
  int64_t D, H, W;
  spatial(grad_input, D, H, W);
  const int64_t P = grad_input.size(0), Do = grad_input.dim() == 4 ? g.out_d : 1;
  const int64_t Ho = g.out_h, Wo = g.out_w;
  const auto td = nearest_table<T>(D, Do, g.scale_d, g.exact);
  const auto th = nearest_table<T>(H, Ho, g.scale_h, g.exact);
  const auto tw = nearest_table<T>(W, Wo, g.scale_w, g.exact);
  T* gi = grad_input.data_ptr<T>();
  const T* go = grad_out.data_ptr<T>();
  parallel_for(0, P, plane_grain(D * H * W + Do * Ho * Wo), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gip = gi + p * D * H * W;
      const T* gop = go + p * Do * Ho * Wo;
      std::fill(gip, gip + D * H * W, T(0));
      for (int64_t od = 0; od < Do; ++od) {
        for (int64_t oh = 0; oh < Ho; ++oh) {
          T* gr = gip + (td[od] * H + th[oh]) * W;
          const T* gor = gop + (od * Ho + oh) * Wo;
          for (int64_t ow = 0; ow < Wo; ++ow) gr[tw[ow]] += gor[ow];
        }
      }
    }
  });
}

template <class T>
void linear_fwd(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  const int64_t P = input.size(0), H = input.size(1), W = input.size(2);
  const int64_t Ho = g.out_h, Wo = g.out_w;
  const auto th = linear_table<T>(H, Ho, g.align_corners, g.scale_h);
  const auto tw = linear_table<T>(W, Wo, g.align_corners, g.scale_w);
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  parallel_for(0, P, plane_grain(4 * Ho * Wo), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * H * W;
      T* yp = y + p * Ho * Wo;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const LinearTaps<T> h = th[oh];
        const T* r0 = xp + h.i0 * W;
        const T* r1 = xp + h.i1 * W;
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const LinearTaps<T> w = tw[ow];
          // PyTorch's order: the inner dimension first, then the outer
          yp[oh * Wo + ow] = (r0[w.i0] * w.l0 + r0[w.i1] * w.l1) * h.l0 +
                             (r1[w.i0] * w.l0 + r1[w.i1] * w.l1) * h.l1;
        }
      }
    }
  });
}

template <class T>
void linear_bwd(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g) {
  const int64_t P = grad_input.size(0), H = grad_input.size(1), W = grad_input.size(2);
  const int64_t Ho = g.out_h, Wo = g.out_w;
  const auto th = linear_table<T>(H, Ho, g.align_corners, g.scale_h);
  const auto tw = linear_table<T>(W, Wo, g.align_corners, g.scale_w);
  T* gi = grad_input.data_ptr<T>();
  const T* go = grad_out.data_ptr<T>();
  parallel_for(0, P, plane_grain(H * W + 4 * Ho * Wo), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gip = gi + p * H * W;
      const T* gop = go + p * Ho * Wo;
      std::fill(gip, gip + H * W, T(0));
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const LinearTaps<T> h = th[oh];
        T* r0 = gip + h.i0 * W;
        T* r1 = gip + h.i1 * W;
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const LinearTaps<T> w = tw[ow];
          const T v = gop[oh * Wo + ow];
          r0[w.i0] += v * (h.l0 * w.l0);
          r0[w.i1] += v * (h.l0 * w.l1);
          r1[w.i0] += v * (h.l1 * w.l0);
          r1[w.i1] += v * (h.l1 * w.l1);
        }
      }
    }
  });
}

template <class T>
void trilinear_fwd(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  const int64_t P = input.size(0), D = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t Do = g.out_d, Ho = g.out_h, Wo = g.out_w;
  const auto td = linear_table<T>(D, Do, g.align_corners, g.scale_d);
  const auto th = linear_table<T>(H, Ho, g.align_corners, g.scale_h);
  const auto tw = linear_table<T>(W, Wo, g.align_corners, g.scale_w);
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  parallel_for(0, P, plane_grain(8 * Do * Ho * Wo), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * D * H * W;
      T* yp = y + p * Do * Ho * Wo;
      for (int64_t od = 0; od < Do; ++od) {
        const LinearTaps<T> d = td[od];
        for (int64_t oh = 0; oh < Ho; ++oh) {
          const LinearTaps<T> h = th[oh];
          const T* r00 = xp + (d.i0 * H + h.i0) * W;
          const T* r01 = xp + (d.i0 * H + h.i1) * W;
          const T* r10 = xp + (d.i1 * H + h.i0) * W;
          const T* r11 = xp + (d.i1 * H + h.i1) * W;
          for (int64_t ow = 0; ow < Wo; ++ow) {
            const LinearTaps<T> w = tw[ow];
            // PyTorch's order: the innermost dimension first, then outwards
            yp[(od * Ho + oh) * Wo + ow] = ((r00[w.i0] * w.l0 + r00[w.i1] * w.l1) * h.l0 +
                                            (r01[w.i0] * w.l0 + r01[w.i1] * w.l1) * h.l1) *
                                               d.l0 +
                                           ((r10[w.i0] * w.l0 + r10[w.i1] * w.l1) * h.l0 +
                                            (r11[w.i0] * w.l0 + r11[w.i1] * w.l1) * h.l1) *
                                               d.l1;
          }
        }
      }
    }
  });
}

template <class T>
void trilinear_bwd(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g) {
  const int64_t P = grad_input.size(0), D = grad_input.size(1), H = grad_input.size(2),
                W = grad_input.size(3);
  const int64_t Do = g.out_d, Ho = g.out_h, Wo = g.out_w;
  const auto td = linear_table<T>(D, Do, g.align_corners, g.scale_d);
  const auto th = linear_table<T>(H, Ho, g.align_corners, g.scale_h);
  const auto tw = linear_table<T>(W, Wo, g.align_corners, g.scale_w);
  T* gi = grad_input.data_ptr<T>();
  const T* go = grad_out.data_ptr<T>();
  parallel_for(0, P, plane_grain(D * H * W + 8 * Do * Ho * Wo), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gip = gi + p * D * H * W;
      const T* gop = go + p * Do * Ho * Wo;
      std::fill(gip, gip + D * H * W, T(0));
      for (int64_t od = 0; od < Do; ++od) {
        const LinearTaps<T> d = td[od];
        for (int64_t oh = 0; oh < Ho; ++oh) {
          const LinearTaps<T> h = th[oh];
          T* rows[4] = {gip + (d.i0 * H + h.i0) * W, gip + (d.i0 * H + h.i1) * W,
                        gip + (d.i1 * H + h.i0) * W, gip + (d.i1 * H + h.i1) * W};
          const T lrow[4] = {d.l0 * h.l0, d.l0 * h.l1, d.l1 * h.l0, d.l1 * h.l1};
          for (int64_t ow = 0; ow < Wo; ++ow) {
            const LinearTaps<T> w = tw[ow];
            const T v = gop[(od * Ho + oh) * Wo + ow];
            for (int r = 0; r < 4; ++r) {
              rows[r][w.i0] += v * (lrow[r] * w.l0);
              rows[r][w.i1] += v * (lrow[r] * w.l1);
            }
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
