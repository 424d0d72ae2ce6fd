// CUDA kernels of the pool family, with the CPU kernels' window rules (core/cpu/pool.cpp): one
// thread per output element forward; backward kernels gather, one thread per input element, the
// windows that contain it (core/cuda/pool_windows.h) in a fixed order, so results do not vary
// from run to run. Max-pool backward adds the gradients of the windows whose saved index is the
// element in ascending output order, the order in which the CPU's scatter adds them, so f32 and
// f64 gradients are the CPU's bits.
// Element types: float32, float64, and 16-bit storage (float16 / bfloat16) whose arithmetic is
// done in float (comp_t): maxima are compared in float, window sums and gathered gradients are
// accumulated in float and rounded to 16 bits once (the float32 kernel's values, then a cast).
#include <cmath>

#include "core/cuda/float_kernels.cuh"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/loops.cuh"
#include "core/cuda/pool_windows.h"

namespace sl::cuda {
namespace {

template <class T>
__global__ void max_pool_fwd_kernel(T* y, int64_t* ind, const T* x, int64_t P, int64_t H, int64_t W,
                                    PoolGeom g) {
  using C = comp_t<T>;
  const int64_t total = P * g.out_h * g.out_w;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t ow = t % g.out_w, oh = (t / g.out_w) % g.out_h, p = t / (g.out_w * g.out_h);
    const T* xp = x + p * H * W;
    const int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
    C best = -INFINITY;
    int64_t best_i = -1;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t h = h0 + i * g.dilation_h;
      if (h < 0 || h >= H) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t w = w0 + j * g.dilation_w;
        if (w < 0 || w >= W) continue;
        const C v = to_comp(xp[h * W + w]);
        if (best_i < 0 || v > best || v != v) {
          best = v;
          best_i = h * W + w;
        }
      }
    }
    y[t] = convert<T>(best);
    ind[t] = best_i;
  }
}

/// gi[p, h, w] = sum of go[p, o] over the outputs o (ascending) with ind[p, o] == h * W + w: the
/// windows with a tap at (h, w) hold every such o, since the forward's index is one of its
/// window's taps (Note [Max-pool backward order]).
template <class T>
__global__ void max_pool_bwd_kernel(T* gi, const T* go, const int64_t* ind, int64_t P, int64_t H,
                                    int64_t W, PoolGeom g) {
  using C = comp_t<T>;
  const int64_t total = P * H * W, HWo = g.out_h * g.out_w;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t w = t % W, h = (t / W) % H, p = t / (W * H);
    const int64_t at = h * W + w;
    const int64_t* indp = ind + p * HWo;
    const T* gop = go + p * HWo;
    C s = 0;
    for_each_window_with_tap(h, w, g, [&](int64_t o) {
      if (indp[o] == at) s += to_comp(gop[o]);
    });
    gi[t] = convert<T>(s);
  }
}

struct AvgWindow {
  int64_t hs, he, ws, we, divisor;
};

__device__ __forceinline__ AvgWindow avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W,
                                                const PoolGeom& g) {
  int64_t hs = oh * g.stride_h - g.pad_h, ws = ow * g.stride_w - g.pad_w;
  int64_t he = min(hs + g.kh, H + g.pad_h), we = min(ws + g.kw, W + g.pad_w);
  const int64_t pool_size = (he - hs) * (we - ws);
  hs = max(hs, int64_t{0});
  ws = max(ws, int64_t{0});
  he = min(he, H);
  we = min(we, W);
  const int64_t div = g.divisor_override    ? g.divisor_override
                      : g.count_include_pad ? pool_size
                                            : (he - hs) * (we - ws);
  return {hs, he, ws, we, div};
}

template <class T>
__global__ void avg_pool_fwd_kernel(T* y, const T* x, int64_t P, int64_t H, int64_t W, PoolGeom g) {
  using C = comp_t<T>;
  const int64_t total = P * g.out_h * g.out_w;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t ow = t % g.out_w, oh = (t / g.out_w) % g.out_h, p = t / (g.out_w * g.out_h);
    const T* xp = x + p * H * W;
    const AvgWindow a = avg_window(oh, ow, H, W, g);
    C s = 0;
    for (int64_t h = a.hs; h < a.he; ++h) {
      for (int64_t w = a.ws; w < a.we; ++w) s += to_comp(xp[h * W + w]);
    }
    y[t] = convert<T>(a.divisor > 0 ? s / static_cast<C>(a.divisor) : C(0));
  }
}

template <class T>
__global__ void avg_pool_bwd_kernel(T* gi, const T* go, int64_t P, int64_t H, int64_t W,
                                    PoolGeom g) {
  using C = comp_t<T>;
  const int64_t total = P * H * W;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t w = t % W, h = (t / W) % H, p = t / (W * H);
    int64_t oh0, oh1, ow0, ow1;
    // average windows ignore dilation: their extent is k
    window_range(h, g.kh, g.stride_h, g.pad_h, g.out_h, oh0, oh1);
    window_range(w, g.kw, g.stride_w, g.pad_w, g.out_w, ow0, ow1);
    C s = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const AvgWindow a = avg_window(oh, ow, H, W, g);
        if (a.divisor <= 0 || h < a.hs || h >= a.he || w < a.ws || w >= a.we) continue;
        s += to_comp(go[(p * g.out_h + oh) * g.out_w + ow]) / static_cast<C>(a.divisor);
      }
    }
    gi[t] = convert<T>(s);
  }
}

__device__ __forceinline__ int64_t adaptive_start(int64_t o, int64_t in, int64_t out) {
  return (o * in) / out;
}
__device__ __forceinline__ int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

template <class T>
__global__ void adaptive_fwd_kernel(T* y, const T* x, int64_t P, int64_t H, int64_t W, int64_t Ho,
                                    int64_t Wo) {
  using C = comp_t<T>;
  const int64_t total = P * Ho * Wo;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t ow = t % Wo, oh = (t / Wo) % Ho, p = t / (Wo * Ho);
    const int64_t hs = adaptive_start(oh, H, Ho), he = adaptive_end(oh, H, Ho);
    const int64_t ws = adaptive_start(ow, W, Wo), we = adaptive_end(ow, W, Wo);
    const T* xp = x + p * H * W;
    C s = 0;
    for (int64_t h = hs; h < he; ++h) {
      for (int64_t w = ws; w < we; ++w) s += to_comp(xp[h * W + w]);
    }
    y[t] = convert<T>(s / static_cast<C>((he - hs) * (we - ws)));
  }
}

template <class T>
__global__ void adaptive_bwd_kernel(T* gi, const T* go, int64_t P, int64_t H, int64_t W, int64_t Ho,
                                    int64_t Wo) {
  using C = comp_t<T>;
  const int64_t total = P * H * W;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t w = t % W, h = (t / W) % H, p = t / (W * H);
    C s = 0;
    // output rows oh whose window [start, end) contains h: scan the few candidates
    for (int64_t oh = (h * Ho) / H; oh < Ho && adaptive_start(oh, H, Ho) <= h; ++oh) {
      const int64_t hs = adaptive_start(oh, H, Ho), he = adaptive_end(oh, H, Ho);
      if (h < hs || h >= he) continue;
      for (int64_t ow = (w * Wo) / W; ow < Wo && adaptive_start(ow, W, Wo) <= w; ++ow) {
        const int64_t ws = adaptive_start(ow, W, Wo), we = adaptive_end(ow, W, Wo);
        if (w < ws || w >= we) continue;
        s += to_comp(go[(p * Ho + oh) * Wo + ow]) / static_cast<C>((he - hs) * (we - ws));
      }
    }
    gi[t] = convert<T>(s);
  }
}

/// One thread per output: the max over its adaptive window with the CPU's rule (first position
/// starts at -inf, a strictly greater value or a NaN takes over), compared in comp_t.
template <class T>
__global__ void adaptive_max_fwd_kernel(T* y, int64_t* ind, const T* x, int64_t P, int64_t H,
                                        int64_t W, int64_t Ho, int64_t Wo) {
  using C = comp_t<T>;
  const int64_t total = P * Ho * Wo;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t ow = t % Wo, oh = (t / Wo) % Ho, p = t / (Wo * Ho);
    const int64_t hs = adaptive_start(oh, H, Ho), he = adaptive_end(oh, H, Ho);
    const int64_t ws = adaptive_start(ow, W, Wo), we = adaptive_end(ow, W, Wo);
    const T* xp = x + p * H * W;
    C best = -INFINITY;
    int64_t best_i = hs * W + ws;
    for (int64_t h = hs; h < he; ++h) {
      for (int64_t w = ws; w < we; ++w) {
        const C v = to_comp(xp[h * W + w]);
        if (v > best || v != v) {
          best = v;
          best_i = h * W + w;
        }
      }
    }
    y[t] = convert<T>(best);
    ind[t] = best_i;
  }
}

/// gi[p, h, w] = the sum of go[p, o] over the outputs o whose window holds (h, w) and whose index
/// is h * W + w, in ascending o (the CPU scatter's order), accumulated in comp_t.
template <class T>
__global__ void adaptive_max_bwd_kernel(T* gi, const T* go, const int64_t* ind, int64_t P,
                                        int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  using C = comp_t<T>;
  const int64_t total = P * H * W;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t w = t % W, h = (t / W) % H, p = t / (W * H);
    const int64_t at = h * W + w;
    const int64_t* indp = ind + p * Ho * Wo;
    const T* gop = go + p * Ho * Wo;
    C s = 0;
    for (int64_t oh = (h * Ho) / H; oh < Ho && adaptive_start(oh, H, Ho) <= h; ++oh) {
      if (h >= adaptive_end(oh, H, Ho)) continue;
      for (int64_t ow = (w * Wo) / W; ow < Wo && adaptive_start(ow, W, Wo) <= w; ++ow) {
        if (w >= adaptive_end(ow, W, Wo)) continue;
        const int64_t o = oh * Wo + ow;
        if (indp[o] == at) s += to_comp(gop[o]);
      }
    }
    gi[t] = convert<T>(s);
  }
}

}  // namespace

void launch_max_pool2d_forward(DType dt, void* out, int64_t* indices, const void* x, int64_t P,
                               int64_t H, int64_t W, const PoolGeom& g, cudaStream_t s) {
  visit_float(dt, "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool_fwd_kernel<T><<<grid_for(P * g.out_h * g.out_w), kBlockThreads, 0, s>>>(
        static_cast<T*>(out), indices, static_cast<const T*>(x), P, H, W, g);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_max_pool2d_backward(DType dt, void* grad_in, const void* grad_out,
                                const int64_t* indices, int64_t P, int64_t H, int64_t W,
                                const PoolGeom& g, cudaStream_t s) {
  visit_float(dt, "max_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (P * H * W == 0) return;
    max_pool_bwd_kernel<T><<<grid_for(P * H * W), kBlockThreads, 0, s>>>(
        static_cast<T*>(grad_in), static_cast<const T*>(grad_out), indices, P, H, W, g);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_avg_pool2d_forward(DType dt, void* out, const void* x, int64_t P, int64_t H, int64_t W,
                               const PoolGeom& g, cudaStream_t s) {
  visit_float(dt, "avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    avg_pool_fwd_kernel<T><<<grid_for(P * g.out_h * g.out_w), kBlockThreads, 0, s>>>(
        static_cast<T*>(out), static_cast<const T*>(x), P, H, W, g);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_avg_pool2d_backward(DType dt, void* grad_in, const void* grad_out, int64_t P, int64_t H,
                                int64_t W, const PoolGeom& g, cudaStream_t s) {
  visit_float(dt, "avg_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    avg_pool_bwd_kernel<T><<<grid_for(P * H * W), kBlockThreads, 0, s>>>(
        static_cast<T*>(grad_in), static_cast<const T*>(grad_out), P, H, W, g);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_adaptive_avg_pool2d_forward(DType dt, void* out, const void* x, int64_t P, int64_t H,
                                        int64_t W, int64_t Ho, int64_t Wo, cudaStream_t s) {
  visit_float(dt, "adaptive_avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    adaptive_fwd_kernel<T><<<grid_for(P * Ho * Wo), kBlockThreads, 0, s>>>(
        static_cast<T*>(out), static_cast<const T*>(x), P, H, W, Ho, Wo);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_adaptive_avg_pool2d_backward(DType dt, void* grad_in, const void* grad_out, int64_t P,
                                         int64_t H, int64_t W, int64_t Ho, int64_t Wo,
                                         cudaStream_t s) {
  visit_float(dt, "adaptive_avg_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    adaptive_bwd_kernel<T><<<grid_for(P * H * W), kBlockThreads, 0, s>>>(
        static_cast<T*>(grad_in), static_cast<const T*>(grad_out), P, H, W, Ho, Wo);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_adaptive_max_pool2d_forward(DType dt, void* out, int64_t* indices, const void* x,
                                        int64_t P, int64_t H, int64_t W, int64_t Ho, int64_t Wo,
                                        cudaStream_t s) {
  visit_float(dt, "adaptive_max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    adaptive_max_fwd_kernel<T><<<grid_for(P * Ho * Wo), kBlockThreads, 0, s>>>(
        static_cast<T*>(out), indices, static_cast<const T*>(x), P, H, W, Ho, Wo);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_adaptive_max_pool2d_backward(DType dt, void* grad_in, const void* grad_out,
                                         const int64_t* indices, int64_t P, int64_t H, int64_t W,
                                         int64_t Ho, int64_t Wo, cudaStream_t s) {
  visit_float(dt, "adaptive_max_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    adaptive_max_bwd_kernel<T><<<grid_for(P * H * W), kBlockThreads, 0, s>>>(
        static_cast<T*>(grad_in), static_cast<const T*>(grad_out), indices, P, H, W, Ho, Wo);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sl::cuda
