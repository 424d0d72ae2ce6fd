// CUDA kernels of the upsample family's bicubic and antialias modes, with the CPU kernels' index
// rules (core/ops/upsample_index.h): one thread per output element forward; backward gathers, one
// thread per input element, the outputs that read it in ascending output order and each output's
// taps in the CPU's order (Note [Upsample backward order]), so no atomics. 16-bit storage is
// computed in float (comp_t) and rounded once.
#include "core/cuda/float_kernels.cuh"
#include "core/cuda/kernels_upsample.h"
#include "core/cuda/loops.cuh"
#include "core/ops/upsample_index.h"

namespace sl::cuda {
namespace {

using upsample::AaWindow;
using upsample::CubicTaps;

template <class T>
__global__ void cubic_fwd_kernel(T* y, const T* x, UpsampleGeom g) {
  using C = comp_t<T>;
  const C rh = upsample::linear_ratio<C>(g.H, g.out_h, g.align_corners, g.scale_h);
  const C rw = upsample::linear_ratio<C>(g.W, g.out_w, g.align_corners, g.scale_w);
  grid_stride(g.P * g.out_h * g.out_w, [&](int64_t t) {
    const int64_t ow = t % g.out_w, oh = (t / g.out_w) % g.out_h, p = t / (g.out_w * g.out_h);
    const CubicTaps<C> h = upsample::cubic_source<C>(oh, g.H, rh, g.align_corners);
    const CubicTaps<C> w = upsample::cubic_source<C>(ow, g.W, rw, g.align_corners);
    const T* xp = x + p * g.H * g.W;
    C acc = 0;
    for (int kh = 0; kh < 4; ++kh) {
      const T* r = xp + h.i[kh] * g.W;
      const C row = to_comp(r[w.i[0]]) * w.w[0] + to_comp(r[w.i[1]]) * w.w[1] +
                    to_comp(r[w.i[2]]) * w.w[2] + to_comp(r[w.i[3]]) * w.w[3];
      acc += row * h.w[kh];
    }
    y[t] = convert<T>(acc);
  });
}

template <class T>
__global__ void cubic_bwd_kernel(T* gi, const T* go, UpsampleGeom g) {
  using C = comp_t<T>;
  const C rh = upsample::linear_ratio<C>(g.H, g.out_h, g.align_corners, g.scale_h);
  const C rw = upsample::linear_ratio<C>(g.W, g.out_w, g.align_corners, g.scale_w);
  grid_stride(g.P * g.H * g.W, [&](int64_t t) {
    const int64_t w = t % g.W, h = (t / g.W) % g.H, p = t / (g.W * g.H);
    int64_t oh0, oh1, ow0, ow1;
    upsample::cubic_readers<C>(h, g.H, g.out_h, rh, g.align_corners, oh0, oh1);
    upsample::cubic_readers<C>(w, g.W, g.out_w, rw, g.align_corners, ow0, ow1);
    const T* gp = go + p * g.out_h * g.out_w;
    C s = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const CubicTaps<C> a = upsample::cubic_source<C>(oh, g.H, rh, g.align_corners);
      if (a.i[0] != h && a.i[1] != h && a.i[2] != h && a.i[3] != h) continue;
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const CubicTaps<C> b = upsample::cubic_source<C>(ow, g.W, rw, g.align_corners);
        if (b.i[0] != w && b.i[1] != w && b.i[2] != w && b.i[3] != w) continue;
        const C v = to_comp(gp[oh * g.out_w + ow]);
        for (int kh = 0; kh < 4; ++kh) {
          if (a.i[kh] != h) continue;
          for (int kw = 0; kw < 4; ++kw) {
            if (b.i[kw] == w) s += v * (a.w[kh] * b.w[kw]);
          }
        }
      }
    }
    gi[t] = convert<T>(s);
  });
}

template <class T>
__global__ void aa_fwd_kernel(T* y, const T* x, UpsampleGeom g) {
  using C = comp_t<T>;
  const C rh = upsample::linear_ratio<C>(g.H, g.out_h, g.align_corners, g.scale_h);
  const C rw = upsample::linear_ratio<C>(g.W, g.out_w, g.align_corners, g.scale_w);
  grid_stride(g.P * g.out_h * g.out_w, [&](int64_t t) {
    const int64_t ow = t % g.out_w, oh = (t / g.out_w) % g.out_h, p = t / (g.out_w * g.out_h);
    const AaWindow<C> h = upsample::aa_window<C>(oh, g.H, rh, g.cubic);
    const AaWindow<C> w = upsample::aa_window<C>(ow, g.W, rw, g.cubic);
    const T* xp = x + p * g.H * g.W;
    // the CPU's order: each row's window along W, then the rows along H
    C acc = 0;
    for (int64_t i = 0; i < h.size; ++i) {
      const T* r = xp + (h.lo + i) * g.W + w.lo;
      C row = 0;
      for (int64_t j = 0; j < w.size; ++j) row += to_comp(r[j]) * w.weight(j);
      acc += row * h.weight(i);
    }
    y[t] = convert<T>(acc);
  });
}

template <class T>
__global__ void aa_bwd_kernel(T* gi, const T* go, UpsampleGeom g) {
  using C = comp_t<T>;
  const C rh = upsample::linear_ratio<C>(g.H, g.out_h, g.align_corners, g.scale_h);
  const C rw = upsample::linear_ratio<C>(g.W, g.out_w, g.align_corners, g.scale_w);
  grid_stride(g.P * g.H * g.W, [&](int64_t t) {
    const int64_t w = t % g.W, h = (t / g.W) % g.H, p = t / (g.W * g.H);
    int64_t oh0, oh1, ow0, ow1;
    upsample::aa_readers<C>(h, g.H, g.out_h, rh, g.cubic, oh0, oh1);
    upsample::aa_readers<C>(w, g.W, g.out_w, rw, g.cubic, ow0, ow1);
    const T* gp = go + p * g.out_h * g.out_w;
    C s = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const AaWindow<C> a = upsample::aa_window<C>(oh, g.H, rh, g.cubic);
      const C wh = a.weight(h - a.lo);
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const AaWindow<C> b = upsample::aa_window<C>(ow, g.W, rw, g.cubic);
        s += to_comp(gp[oh * g.out_w + ow]) * (wh * b.weight(w - b.lo));
      }
    }
    gi[t] = convert<T>(s);
  });
}

}  // namespace

void launch_upsample_cubic_forward(DType dt, bool antialias, void* out, const void* x,
                                   const UpsampleGeom& g, cudaStream_t s) {
  visit_float(dt, antialias ? "upsample_antialias" : "upsample_bicubic", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = g.P * g.out_h * g.out_w;
    if (n == 0) return;
    if (antialias) {
      aa_fwd_kernel<T><<<grid_for(n), kBlockThreads, 0, s>>>(static_cast<T*>(out),
                                                             static_cast<const T*>(x), g);
    } else {
      cubic_fwd_kernel<T><<<grid_for(n), kBlockThreads, 0, s>>>(static_cast<T*>(out),
                                                                static_cast<const T*>(x), g);
    }
    CUDA_CHECK_LAUNCH();
  });
}

void launch_upsample_cubic_backward(DType dt, bool antialias, void* grad_in, const void* grad_out,
                                    const UpsampleGeom& g, cudaStream_t s) {
  visit_float(dt, antialias ? "upsample_antialias_backward" : "upsample_bicubic_backward",
              [&](auto tag) {
                using T = typename decltype(tag)::type;
                const int64_t n = g.P * g.H * g.W;
                if (n == 0) return;
                if (antialias) {
                  aa_bwd_kernel<T><<<grid_for(n), kBlockThreads, 0, s>>>(
                      static_cast<T*>(grad_in), static_cast<const T*>(grad_out), g);
                } else {
                  cubic_bwd_kernel<T><<<grid_for(n), kBlockThreads, 0, s>>>(
                      static_cast<T*>(grad_in), static_cast<const T*>(grad_out), g);
                }
                CUDA_CHECK_LAUNCH();
              });
}

}  // namespace sl::cuda
