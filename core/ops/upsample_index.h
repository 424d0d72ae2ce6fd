// Which input positions an upsampled output position reads, one dimension at a time: PyTorch
// 1.13's index rules (aten/src/ATen/native/UpSample.h), shared by the CPU kernels
// (core/cpu/upsample.cpp, upsample_cubic.cpp) and the CUDA kernels (core/cuda/upsample.cu,
// upsample_cubic.cu) so both devices pick the same taps. Plain integer and floating functions, host
// and device (no Tensor, no CUDA types).
//
// Note [Upsample source index]
// `scale` is the scale_factor the caller gave for the dimension (<= 0: none given). As PyTorch:
//  - nearest (the legacy rule, not "nearest-exact"): src = min(floor(o * s), in - 1) in float,
//    s = 1 / scale when a scale was given, in / out otherwise; so a given scale is used even where
//    the output size makes it look like a copy (5 * 1.1 -> 5 outputs reading 0, 0, 1, 2, 3). This
//    is PyTorch's rule for [N, C, ...] tensors in the default (contiguous) memory format; its
//    channels-last kernel (which 1.13 also picks for some 4-d tensors with C = 1) takes shortcuts
//    instead, copying when out == in and halving when out == 2 * in;
//  - nearest-exact: src = min(floor((o + 0.5) * s), in - 1), the product in A (below) rounded to
//    float before the floor, as PyTorch's floorf. This is PyTorch 1.13's CPU forward; its CUDA
//    kernel and its CPU backward compute in float for f64 too, so for a few f64 sizes they read
//    another position than its CPU forward (2 -> 41: output 20); we keep one rule everywhere;
//  - linear: out == in copies; else with align_corners src = r * o, r = (in - 1) / (out - 1)
//    (0 when out == 1; a given scale is ignored), without it src = max(r * (o + 0.5) - 0.5, 0)
//    with r = 1 / scale or in / out; i0 = min(floor(src), in - 1), i1 = i0 + 1 inside the input
//    (else i0), weights 1 - l and l with l = clamp(src - i0, 0, 1). Trilinear is this rule per
//    dimension;
//  - cubic (bicubic): src = r * o (align_corners) or r * (o + 0.5) - 0.5, NOT clamped at 0, r as
//    linear; f = floor(src) (PyTorch's floorf: src rounded to float first), t = src - f; the four
//    taps f - 1 .. f + 2 are read clamped to [0, in - 1] with Keys' weights for A = -0.75
//    (get_cubic_upsample_coefficients). No out == in shortcut: a given scale is used;
//  - antialias (bilinear / bicubic with antialias=True, PyTorch's _upsample_*_aa): r as linear
//    (so align_corners only changes r), centre c = r * (o + 0.5), support s = n / 2 * max(r, 1)
//    (n = 2 taps bilinear, 4 bicubic); the window is [max(int(c - s + 0.5), 0),
//    min(int(c + s + 0.5), in)) (int truncates); each input j in it weighs
//    filter((j - c + 0.5) / max(r, 1)), normalised to sum 1 over the window; the filter is the
//    triangle (bilinear) or Keys' cubic with A = -0.5 (bicubic, as Pillow).
// The arithmetic type A is float for f32 and the 16-bit types, double for f64 (PyTorch's opmath).
// Every source index (and both ends of an antialias window) is non-decreasing in o, so the outputs
// that read an input position form one range (first_output_reading), which is how the CUDA
// backward gathers.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define SL_UPSAMPLE_HD __host__ __device__ __forceinline__
#else
#define SL_UPSAMPLE_HD inline
#endif

namespace sl::upsample {

/// PyTorch's compute_scales_value: 1 / scale when a scale was given (> 0), else in / out.
template <class A>
SL_UPSAMPLE_HD A source_scale(double scale, int64_t in, int64_t out) {
  return scale > 0 ? static_cast<A>(1.0 / scale) : static_cast<A>(in) / static_cast<A>(out);
}

/// The input index that nearest output o reads (Note [Upsample source index]): the legacy rule,
/// or with `exact` the "nearest-exact" one. A is the arithmetic type of the exact rule.
template <class A>
SL_UPSAMPLE_HD int64_t nearest_source(int64_t o, int64_t in, int64_t out, double scale,
                                      bool exact) {
  float src;
  if (exact) {
    const A s = source_scale<A>(scale, in, out);
    src = static_cast<float>((static_cast<A>(o) + static_cast<A>(0.5)) * s);
  } else {
    src = static_cast<float>(o) * source_scale<float>(scale, in, out);
  }
  const int64_t i = static_cast<int64_t>(floorf(src));
  return i < in - 1 ? i : in - 1;
}

/// PyTorch's area_pixel_compute_scale for linear modes.
template <class A>
SL_UPSAMPLE_HD A linear_ratio(int64_t in, int64_t out, bool align_corners, double scale) {
  if (align_corners) {
    return out > 1 ? static_cast<A>(in - 1) / static_cast<A>(out - 1) : static_cast<A>(0);
  }
  return source_scale<A>(scale, in, out);
}

/// The two taps of a linear output and their weights (l0 for i0, l1 for i1).
template <class A>
struct LinearTaps {
  int64_t i0, i1;
  A l0, l1;
};

/// The taps linear output o reads, ratio from linear_ratio (Note [Upsample source index]).
template <class A>
SL_UPSAMPLE_HD LinearTaps<A> linear_source(int64_t o, int64_t in, int64_t out, A ratio,
                                           bool align_corners) {
  if (out == in) return {o, o, static_cast<A>(1), static_cast<A>(0)};
  A src = align_corners ? ratio * static_cast<A>(o)
                        : ratio * (static_cast<A>(o) + static_cast<A>(0.5)) - static_cast<A>(0.5);
  if (src < static_cast<A>(0)) src = static_cast<A>(0);
  int64_t i0 = static_cast<int64_t>(src);  // src >= 0: truncation is floor
  if (i0 > in - 1) i0 = in - 1;
  A l1 = src - static_cast<A>(i0);
  l1 = l1 < static_cast<A>(0) ? static_cast<A>(0)
                              : (l1 > static_cast<A>(1) ? static_cast<A>(1) : l1);
  const int64_t i1 = i0 < in - 1 ? i0 + 1 : i0;
  return {i0, i1, static_cast<A>(1) - l1, l1};
}

/// Keys' cubic convolution weights of the four taps f - 1 .. f + 2 at fraction t (PyTorch's
/// get_cubic_upsample_coefficients; A = -0.75 for bicubic, -0.5 for the antialias filter).
template <class A>
SL_UPSAMPLE_HD A cubic_near(A x, A a) {  // |x| <= 1
  return ((a + 2) * x - (a + 3)) * x * x + 1;
}
template <class A>
SL_UPSAMPLE_HD A cubic_far(A x, A a) {  // 1 < |x| < 2
  return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

/// The four clamped taps of a bicubic output and their weights.
template <class A>
struct CubicTaps {
  int64_t i[4];
  A w[4];
};

/// floor(src) as PyTorch's floorf (src rounded to float first): the cubic rule's base tap.
template <class A>
SL_UPSAMPLE_HD int64_t cubic_floor(A src) {
  return static_cast<int64_t>(floorf(static_cast<float>(src)));
}

/// The unclamped source position of bicubic output o, ratio from linear_ratio.
template <class A>
SL_UPSAMPLE_HD A cubic_position(int64_t o, A ratio, bool align_corners) {
  return align_corners ? ratio * static_cast<A>(o)
                       : ratio * (static_cast<A>(o) + static_cast<A>(0.5)) - static_cast<A>(0.5);
}

/// The taps bicubic output o reads (Note [Upsample source index]).
template <class A>
SL_UPSAMPLE_HD CubicTaps<A> cubic_source(int64_t o, int64_t in, A ratio, bool align_corners) {
  const A src = cubic_position<A>(o, ratio, align_corners);
  const int64_t f = cubic_floor<A>(src);
  const A t = src - static_cast<A>(f);
  const A a = static_cast<A>(-0.75), one = static_cast<A>(1);
  CubicTaps<A> r;
  r.w[0] = cubic_far<A>(t + one, a);
  r.w[1] = cubic_near<A>(t, a);
  r.w[2] = cubic_near<A>(one - t, a);
  r.w[3] = cubic_far<A>(one - t + one, a);
  for (int k = 0; k < 4; ++k) {
    const int64_t i = f - 1 + k;
    r.i[k] = i < 0 ? 0 : (i > in - 1 ? in - 1 : i);
  }
  return r;
}

/// The antialias filter at x: the triangle, or Keys' cubic with A = -0.5.
template <class A>
SL_UPSAMPLE_HD A aa_filter(A x, bool cubic) {
  if (x < static_cast<A>(0)) x = -x;
  if (!cubic) return x < static_cast<A>(1) ? static_cast<A>(1) - x : static_cast<A>(0);
  const A a = static_cast<A>(-0.5);
  if (x < static_cast<A>(1)) return cubic_near<A>(x, a);
  if (x < static_cast<A>(2)) return cubic_far<A>(x, a);
  return static_cast<A>(0);
}

/// The window of an antialiased output: inputs [lo, lo + size), their weights w(j) / total.
template <class A>
struct AaWindow {
  int64_t lo, size;
  A centre, inv_scale, total;
  bool cubic;
  /// The normalised weight of window element j (input lo + j), as PyTorch's _compute_weights_aa.
  SL_UPSAMPLE_HD A weight(int64_t j) const {
    const A w = raw(j);
    return total != static_cast<A>(0) ? w / total : w;
  }
  SL_UPSAMPLE_HD A raw(int64_t j) const {
    return aa_filter<A>((static_cast<A>(j + lo) - centre + static_cast<A>(0.5)) * inv_scale, cubic);
  }
};

/// The window bounds [lo, hi) of antialiased output o, its centre and support
/// (Note [Upsample source index]); ratio from linear_ratio.
template <class A>
SL_UPSAMPLE_HD void aa_bounds(int64_t o, int64_t in, A ratio, bool cubic, A& centre, int64_t& lo,
                              int64_t& hi) {
  const A one = static_cast<A>(1), half = static_cast<A>(0.5);
  const A support = static_cast<A>(cubic ? 2 : 1) * (ratio >= one ? ratio : one);
  centre = ratio * (static_cast<A>(o) + half);
  const int64_t l = static_cast<int64_t>(centre - support + half);
  const int64_t h = static_cast<int64_t>(centre + support + half);
  lo = l > 0 ? l : 0;
  hi = h < in ? h : in;
}

/// The window antialiased output o reads, with its weights' total.
template <class A>
SL_UPSAMPLE_HD AaWindow<A> aa_window(int64_t o, int64_t in, A ratio, bool cubic) {
  AaWindow<A> w;
  int64_t hi;
  aa_bounds<A>(o, in, ratio, cubic, w.centre, w.lo, hi);
  w.size = hi - w.lo;
  w.cubic = cubic;
  w.inv_scale = ratio >= static_cast<A>(1) ? static_cast<A>(1) / ratio : static_cast<A>(1);
  A total = 0;
  for (int64_t j = 0; j < w.size; ++j) total += w.raw(j);
  w.total = total;
  return w;
}

/// The first output o in [0, out] with key(o) >= v (out when none), for a key non-decreasing in o:
/// a binary search.
template <class Key>
SL_UPSAMPLE_HD int64_t first_output_reading(int64_t v, int64_t out, const Key& key) {
  int64_t lo = 0, hi = out;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (key(mid) >= v) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

/// Outputs [lo, hi) along one dimension whose nearest source is input position i.
template <class A>
SL_UPSAMPLE_HD void nearest_readers(int64_t i, int64_t in, int64_t out, double scale, bool exact,
                                    int64_t& lo, int64_t& hi) {
  auto key = [&](int64_t o) { return nearest_source<A>(o, in, out, scale, exact); };
  lo = first_output_reading(i, out, key);
  hi = first_output_reading(i + 1, out, key);
}

/// Outputs [lo, hi) along one dimension one of whose linear taps may be input position i: those
/// with i0 in {i - 1, i} (i1 is i0 or i0 + 1); the caller checks which taps are i.
template <class A>
SL_UPSAMPLE_HD void linear_readers(int64_t i, int64_t in, int64_t out, A ratio, bool align_corners,
                                   int64_t& lo, int64_t& hi) {
  auto key = [&](int64_t o) { return linear_source<A>(o, in, out, ratio, align_corners).i0; };
  lo = first_output_reading(i - 1, out, key);
  hi = first_output_reading(i + 1, out, key);
}

/// Outputs [lo, hi) along one dimension one of whose bicubic taps may be input position i: base
/// taps f in [i - 2, i + 1], any f at or below 1 for i = 0 and at or above in - 3 for i = in - 1
/// (the clamped reads); the caller checks which taps are i.
template <class A>
SL_UPSAMPLE_HD void cubic_readers(int64_t i, int64_t in, int64_t out, A ratio, bool align_corners,
                                  int64_t& lo, int64_t& hi) {
  auto key = [&](int64_t o) { return cubic_floor<A>(cubic_position<A>(o, ratio, align_corners)); };
  lo = i == 0 ? 0 : first_output_reading(i - 2, out, key);
  hi = i == in - 1 ? out : first_output_reading(i + 2, out, key);
}

/// Outputs [lo, hi) along one dimension whose antialias window holds input position i (both ends
/// of the window are non-decreasing in o).
template <class A>
SL_UPSAMPLE_HD void aa_readers(int64_t i, int64_t in, int64_t out, A ratio, bool cubic, int64_t& lo,
                               int64_t& hi) {
  A c;
  int64_t l, h;
  auto end = [&](int64_t o) {
    aa_bounds<A>(o, in, ratio, cubic, c, l, h);
    return h;
  };
  auto start = [&](int64_t o) {
    aa_bounds<A>(o, in, ratio, cubic, c, l, h);
    return l;
  };
  lo = first_output_reading(i + 1, out, end);
  hi = first_output_reading(i + 1, out, start);
}

}  // namespace sl::upsample
