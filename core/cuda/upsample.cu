// CUDA kernels of the upsample family's nearest (1-d to 3-d), linear, bilinear and trilinear modes (bicubic and
// antialias in upsample_cubic.cu), with the CPU kernels' index rules (core/ops/
// upsample_index.h): one thread per output element forward; backward gathers, one thread per
// input element, the outputs that read it in ascending output order (Note [Upsample backward
// order]). 16-bit storage is computed in float (comp_t) and rounded once.
#include "core/cuda/float_kernels.cuh"
#include "core/cuda/kernels_upsample.h"
#include "core/cuda/loops.cuh"
#include "core/ops/upsample_index.h"

namespace sl::cuda {
namespace {

using upsample::LinearTaps;

// nearest covers [P, H, W] planes (D = out_d = 1) and [P, D, H, W] volumes alike
template <class T>
__global__ void nearest_fwd_kernel(T* y, const T* x, UpsampleGeom g) {
  grid_stride(g.P * g.out_d * g.out_h * g.out_w, [&](int64_t t) {
    const int64_t ow = t % g.out_w, oh = (t / g.out_w) % g.out_h;
    const int64_t od = (t / (g.out_w * g.out_h)) % g.out_d;
    const int64_t p = t / (g.out_w * g.out_h * g.out_d);
    const int64_t d = upsample::nearest_source<comp_t<T>>(od, g.D, g.out_d, g.scale_d, g.exact);
    const int64_t h = upsample::nearest_source<comp_t<T>>(oh, g.H, g.out_h, g.scale_h, g.exact);
    const int64_t w = upsample::nearest_source<comp_t<T>>(ow, g.W, g.out_w, g.scale_w, g.exact);
    y[t] = x[((p * g.D + d) * g.H + h) * g.W + w];
  });
}

template <class T>
__global__ void nearest_bwd_kernel(T* gi, const T* go, UpsampleGeom g) {
  using C = comp_t<T>;
  grid_stride(g.P * g.D * g.H * g.W, [&](int64_t t) {
    const int64_t w = t % g.W, h = (t / g.W) % g.H, d = (t / (g.W * g.H)) % g.D;
    const int64_t p = t / (g.W * g.H * g.D);
    int64_t od0, od1, oh0, oh1, ow0, ow1;
    upsample::nearest_readers<C>(d, g.D, g.out_d, g.scale_d, g.exact, od0, od1);
    upsample::nearest_readers<C>(h, g.H, g.out_h, g.scale_h, g.exact, oh0, oh1);
    upsample::nearest_readers<C>(w, g.W, g.out_w, g.scale_w, g.exact, ow0, ow1);
    const T* gp = go + p * g.out_d * g.out_h * g.out_w;
    C s = 0;
    for (int64_t od = od0; od < od1; ++od) {
      for (int64_t oh = oh0; oh < oh1; ++oh) {
        const T* gr = gp + (od * g.out_h + oh) * g.out_w;
        for (int64_t ow = ow0; ow < ow1; ++ow) s += to_comp(gr[ow]);
      }
    }
    gi[t] = convert<T>(s);
  });
}

template <class T>
__global__ void linear_fwd_kernel(T* y, const T* x, UpsampleGeom g) {
  using C = comp_t<T>;
  const C rh = upsample::linear_ratio<C>(g.H, g.out_h, g.align_corners, g.scale_h);
  const C rw = upsample::linear_ratio<C>(g.W, g.out_w, g.align_corners, g.scale_w);
  grid_stride(g.P * g.out_h * g.out_w, [&](int64_t t) {
    const int64_t ow = t % g.out_w, oh = (t / g.out_w) % g.out_h, p = t / (g.out_w * g.out_h);
    const LinearTaps<C> h = upsample::linear_source<C>(oh, g.H, g.out_h, rh, g.align_corners);
    const LinearTaps<C> w = upsample::linear_source<C>(ow, g.W, g.out_w, rw, g.align_corners);
    const T* r0 = x + (p * g.H + h.i0) * g.W;
    const T* r1 = x + (p * g.H + h.i1) * g.W;
    const C v = (to_comp(r0[w.i0]) * w.l0 + to_comp(r0[w.i1]) * w.l1) * h.l0 +
                (to_comp(r1[w.i0]) * w.l0 + to_comp(r1[w.i1]) * w.l1) * h.l1;
    y[t] = convert<T>(v);
  });
}

template <class T>
__global__ void linear_bwd_kernel(T* gi, const T* go, UpsampleGeom g) {
  using C = comp_t<T>;
  const C rh = upsample::linear_ratio<C>(g.H, g.out_h, g.align_corners, g.scale_h);
  const C rw = upsample::linear_ratio<C>(g.W, g.out_w, g.align_corners, g.scale_w);
  grid_stride(g.P * g.H * g.W, [&](int64_t t) {
    const int64_t w = t % g.W, h = (t / g.W) % g.H, p = t / (g.W * g.H);
    int64_t oh0, oh1, ow0, ow1;
    upsample::linear_readers<C>(h, g.H, g.out_h, rh, g.align_corners, oh0, oh1);
    upsample::linear_readers<C>(w, g.W, g.out_w, rw, g.align_corners, ow0, ow1);
    const T* gp = go + p * g.out_h * g.out_w;
    C s = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const LinearTaps<C> a = upsample::linear_source<C>(oh, g.H, g.out_h, rh, g.align_corners);
      if (a.i0 != h && a.i1 != h) continue;
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const LinearTaps<C> b = upsample::linear_source<C>(ow, g.W, g.out_w, rw, g.align_corners);
        if (b.i0 != w && b.i1 != w) continue;
        const C v = to_comp(gp[oh * g.out_w + ow]);
        // the CPU's tap order: (i0, i0), (i0, i1), (i1, i0), (i1, i1)
        if (a.i0 == h && b.i0 == w) s += v * (a.l0 * b.l0);
        if (a.i0 == h && b.i1 == w) s += v * (a.l0 * b.l1);
        if (a.i1 == h && b.i0 == w) s += v * (a.l1 * b.l0);
        if (a.i1 == h && b.i1 == w) s += v * (a.l1 * b.l1);
      }
    }
    gi[t] = convert<T>(s);
  });
}

template <class T>
__global__ void trilinear_fwd_kernel(T* y, const T* x, UpsampleGeom g) {
  using C = comp_t<T>;
  const C rd = upsample::linear_ratio<C>(g.D, g.out_d, g.align_corners, g.scale_d);
  const C rh = upsample::linear_ratio<C>(g.H, g.out_h, g.align_corners, g.scale_h);
  const C rw = upsample::linear_ratio<C>(g.W, g.out_w, g.align_corners, g.scale_w);
  grid_stride(g.P * g.out_d * g.out_h * g.out_w, [&](int64_t t) {
    const int64_t ow = t % g.out_w, oh = (t / g.out_w) % g.out_h;
    const int64_t od = (t / (g.out_w * g.out_h)) % g.out_d;
    const int64_t p = t / (g.out_w * g.out_h * g.out_d);
    const LinearTaps<C> d = upsample::linear_source<C>(od, g.D, g.out_d, rd, g.align_corners);
    const LinearTaps<C> h = upsample::linear_source<C>(oh, g.H, g.out_h, rh, g.align_corners);
    const LinearTaps<C> w = upsample::linear_source<C>(ow, g.W, g.out_w, rw, g.align_corners);
    const T* xp = x + p * g.D * g.H * g.W;
    auto row = [&](int64_t id, int64_t ih) {
      const T* r = xp + (id * g.H + ih) * g.W;
      return to_comp(r[w.i0]) * w.l0 + to_comp(r[w.i1]) * w.l1;
    };
    const C v = (row(d.i0, h.i0) * h.l0 + row(d.i0, h.i1) * h.l1) * d.l0 +
                (row(d.i1, h.i0) * h.l0 + row(d.i1, h.i1) * h.l1) * d.l1;
    y[t] = convert<T>(v);
  });
}

template <class T>
__global__ void trilinear_bwd_kernel(T* gi, const T* go, UpsampleGeom g) {
  using C = comp_t<T>;
  const C rd = upsample::linear_ratio<C>(g.D, g.out_d, g.align_corners, g.scale_d);
  const C rh = upsample::linear_ratio<C>(g.H, g.out_h, g.align_corners, g.scale_h);
  const C rw = upsample::linear_ratio<C>(g.W, g.out_w, g.align_corners, g.scale_w);
  grid_stride(g.P * g.D * g.H * g.W, [&](int64_t t) {
    const int64_t w = t % g.W, h = (t / g.W) % g.H, d = (t / (g.W * g.H)) % g.D;
    const int64_t p = t / (g.W * g.H * g.D);
    int64_t od0, od1, oh0, oh1, ow0, ow1;
    upsample::linear_readers<C>(d, g.D, g.out_d, rd, g.align_corners, od0, od1);
    upsample::linear_readers<C>(h, g.H, g.out_h, rh, g.align_corners, oh0, oh1);
    upsample::linear_readers<C>(w, g.W, g.out_w, rw, g.align_corners, ow0, ow1);
    const T* gp = go + p * g.out_d * g.out_h * g.out_w;
    C s = 0;
    for (int64_t od = od0; od < od1; ++od) {
      const LinearTaps<C> a = upsample::linear_source<C>(od, g.D, g.out_d, rd, g.align_corners);
      if (a.i0 != d && a.i1 != d) continue;
      for (int64_t oh = oh0; oh < oh1; ++oh) {
        const LinearTaps<C> b = upsample::linear_source<C>(oh, g.H, g.out_h, rh, g.align_corners);
        if (b.i0 != h && b.i1 != h) continue;
        // the CPU's row weights, (d.l * h.l), in its row order (d0 h0, d0 h1, d1 h0, d1 h1)
        const int64_t ri[4][2] = {{a.i0, b.i0}, {a.i0, b.i1}, {a.i1, b.i0}, {a.i1, b.i1}};
        const C rl[4] = {a.l0 * b.l0, a.l0 * b.l1, a.l1 * b.l0, a.l1 * b.l1};
        for (int64_t ow = ow0; ow < ow1; ++ow) {
          const LinearTaps<C> c = upsample::linear_source<C>(ow, g.W, g.out_w, rw, g.align_corners);
          if (c.i0 != w && c.i1 != w) continue;
          const C v = to_comp(gp[(od * g.out_h + oh) * g.out_w + ow]);
          for (int r = 0; r < 4; ++r) {
            if (ri[r][0] != d || ri[r][1] != h) continue;
            if (c.i0 == w) s += v * (rl[r] * c.l0);
            if (c.i1 == w) s += v * (rl[r] * c.l1);
          }
        }
      }
    }
    gi[t] = convert<T>(s);
  });
}

}  // namespace

void launch_upsample_forward(DType dt, UpsampleRule rule, void* out, const void* x,
                             const UpsampleGeom& g, cudaStream_t s) {
  visit_float(dt, "upsample", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = g.P * g.out_d * g.out_h * g.out_w;
    if (n == 0) return;
    if (rule == UpsampleRule::trilinear) {
      trilinear_fwd_kernel<T><<<grid_for(n), kBlockThreads, 0, s>>>(static_cast<T*>(out),
                                                                    static_cast<const T*>(x), g);
    } else if (rule == UpsampleRule::linear) {
      linear_fwd_kernel<T><<<grid_for(n), kBlockThreads, 0, s>>>(static_cast<T*>(out),
                                                                 static_cast<const T*>(x), g);
    } else {
      nearest_fwd_kernel<T><<<grid_for(n), kBlockThreads, 0, s>>>(static_cast<T*>(out),
                                                                  static_cast<const T*>(x), g);
    }
    CUDA_CHECK_LAUNCH();
  });
}

void launch_upsample_backward(DType dt, UpsampleRule rule, void* grad_in, const void* grad_out,
                              const UpsampleGeom& g, cudaStream_t s) {
  visit_float(dt, "upsample_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = g.P * g.D * g.H * g.W;
    if (n == 0) return;
    if (rule == UpsampleRule::trilinear) {
      trilinear_bwd_kernel<T><<<grid_for(n), kBlockThreads, 0, s>>>(
          static_cast<T*>(grad_in), static_cast<const T*>(grad_out), g);
    } else if (rule == UpsampleRule::linear) {
      linear_bwd_kernel<T><<<grid_for(n), kBlockThreads, 0, s>>>(
          static_cast<T*>(grad_in), static_cast<const T*>(grad_out), g);
    } else {
      nearest_bwd_kernel<T><<<grid_for(n), kBlockThreads, 0, s>>>(
          static_cast<T*>(grad_in), static_cast<const T*>(grad_out), g);
    }
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sl::cuda
