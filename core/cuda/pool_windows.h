// Which output windows of a 2-d pooling geometry contain an input position, one dimension at a
// time: the rule by which the pool family's backward kernels (core/cuda/pool.cu) gather, for each
// input element, the gradients of the windows over it. Plain integer functions, host and device
// (internal header; no CUDA types), so tests/cuda/test_pool_windows.cpp checks them against brute
// force over many geometries in every build.
//
// Along one dimension, output o's window has taps at o * stride - pad + i * dilation, i < k: its
// span is [o * stride - pad, o * stride - pad + (k - 1) * dilation], extent (k - 1) * dilation + 1
// positions. Geometries are those of ops::pool2d_geometry: k, stride, dilation >= 1, pad >= 0.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SL_POOL_HD __host__ __device__ __forceinline__
#else
#define SL_POOL_HD inline
#endif

namespace sl::cuda {

/// Number of input positions a window spans along one dimension: (k - 1) * dilation + 1.
SL_POOL_HD int64_t window_extent(int64_t k, int64_t dilation) {
  return (k - 1) * dilation + 1;
}

/// Outputs o in [lo, hi] (none when hi < lo), among `out` outputs, whose span
/// [o * stride - pad, o * stride - pad + extent) contains input position x >= 0:
/// o >= ceil((x + pad - extent + 1) / stride) and o <= floor((x + pad) / stride). With
/// extent = k this is average pooling's window; with window_extent(k, dilation), every window
/// with a tap at x lies in the range (window_has_tap tells which do).
SL_POOL_HD void window_range(int64_t x, int64_t extent, int64_t stride, int64_t pad, int64_t out,
                             int64_t& lo, int64_t& hi) {
  const int64_t num = x + pad - extent + 1;
  lo = num <= 0 ? 0 : (num + stride - 1) / stride;
  hi = (x + pad) / stride;
  if (hi > out - 1) hi = out - 1;
}

/// Whether output o, from window_range(x, window_extent(k, dilation), ...), has a tap at x: the
/// offset of x from the window's first position is a multiple of the dilation.
SL_POOL_HD bool window_has_tap(int64_t x, int64_t o, int64_t stride, int64_t pad,
                               int64_t dilation) {
  return dilation == 1 || (x + pad - o * stride) % dilation == 0;
}

/// Calls f(o) for each output o = oh * g.out_w + ow whose window has a tap at input position
/// (h, w), in ascending o (rows, then columns). G is any geometry with Pool2dGeometry's field
/// names (kh, kw, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, out_h, out_w):
/// PoolGeom on the device, Pool2dGeometry in the tests.
template <class G, class F>
SL_POOL_HD void for_each_window_with_tap(int64_t h, int64_t w, const G& g, F&& f) {
  int64_t oh0, oh1, ow0, ow1;
  window_range(h, window_extent(g.kh, g.dilation_h), g.stride_h, g.pad_h, g.out_h, oh0, oh1);
  window_range(w, window_extent(g.kw, g.dilation_w), g.stride_w, g.pad_w, g.out_w, ow0, ow1);
  for (int64_t oh = oh0; oh <= oh1; ++oh) {
    if (!window_has_tap(h, oh, g.stride_h, g.pad_h, g.dilation_h)) continue;
    for (int64_t ow = ow0; ow <= ow1; ++ow) {
      if (!window_has_tap(w, ow, g.stride_w, g.pad_w, g.dilation_w)) continue;
      f(oh * g.out_w + ow);
    }
  }
}

}  // namespace sl::cuda
