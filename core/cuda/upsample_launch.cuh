// The launch and loop shape every upsample kernel shares (upsample.cu, upsample_cubic.cu; internal
// header, device code only): one thread per output element forward, one thread per input element
// backward (the gather of Note [Upsample backward order]), 16-bit storage computed in float
// (comp_t) and rounded once. A mode is a Rule<C> (C = comp_t<T>), built in each thread from the
// geometry, with
//   template <class T> C forward(const UpsampleGeom& g, const T* x, int64_t od, int64_t oh,
//                                int64_t ow) const;  // x: one input plane [D, H, W]
//   template <class T> C backward(const UpsampleGeom& g, const T* go, int64_t d, int64_t h,
//                                 int64_t w) const;  // go: one output plane [out_d, out_h, out_w]
// The index rules they use are core/ops/upsample_index.h's (Note [Upsample source index]). 2-d
// modes see D = out_d = 1 (od, d are 0).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/float_kernels.cuh"
#include "core/cuda/kernels_upsample.h"
#include "core/cuda/loops.cuh"
#include "core/ops/upsample_index.h"

namespace sl::cuda::upsample_launch {

/// A flat index t of [P, D, H, W] split into its coordinates.
struct Coord {
  int64_t p, d, h, w;
};

__device__ __forceinline__ Coord split(int64_t t, int64_t D, int64_t H, int64_t W) {
  return Coord{t / (W * H * D), (t / (W * H)) % D, (t / W) % H, t % W};
}

/// The taps one output reads along one dimension: input positions i[k] with weights w[k].
template <int K, class C>
struct Taps {
  static constexpr int kTaps = K;
  int64_t i[K];
  C w[K];
};

template <int K, class C>
__device__ __forceinline__ bool reads(const Taps<K, C>& t, int64_t i) {
  for (int k = 0; k < K; ++k) {
    if (t.i[k] == i) return true;
  }
  return false;
}

// An axis is one dimension's index rule: taps(o), the taps of output o, and readers(i, lo, hi),
// a range of outputs [lo, hi) holding every output one of whose taps is input i (it may hold
// others, which gather_taps skips).

/// The D axis of the 2-d rules, which do not resample it (D = out_d = 1): one tap of weight 1.
template <class C>
struct UnitAxis {
  __device__ Taps<1, C> taps(int64_t) const { return {{0}, {C(1)}}; }
  __device__ void readers(int64_t, int64_t& lo, int64_t& hi) const {
    lo = 0;
    hi = 1;
  }
};

/// Nearest and nearest-exact (exact): one tap of weight 1, the nearest source.
template <class C>
struct NearestAxis {
  int64_t in, out;
  double scale;
  bool exact;
  __device__ int64_t source(int64_t o) const {
    return upsample::nearest_source<C>(o, in, out, scale, exact);
  }
  __device__ Taps<1, C> taps(int64_t o) const { return {{source(o)}, {C(1)}}; }
  __device__ void readers(int64_t i, int64_t& lo, int64_t& hi) const {
    upsample::nearest_readers<C>(i, in, out, scale, exact, lo, hi);
  }
};

/// The axes whose source position is the output's scaled by linear_ratio: linear (K = 2 taps) and
/// bicubic (K = 4).
template <class C, int K>
struct ScaledAxis {
  static_assert(K == 2 || K == 4, "linear or bicubic taps");
  int64_t in, out;
  C ratio;
  bool align_corners;
  __device__ static ScaledAxis make(int64_t in, int64_t out, double scale, bool align_corners) {
    return {in, out, upsample::linear_ratio<C>(in, out, align_corners, scale), align_corners};
  }
  __device__ Taps<K, C> taps(int64_t o) const {
    if constexpr (K == 2) {
      const upsample::LinearTaps<C> t =
          upsample::linear_source<C>(o, in, out, ratio, align_corners);
      return {{t.i0, t.i1}, {t.l0, t.l1}};
    } else {
      const upsample::CubicTaps<C> t = upsample::cubic_source<C>(o, in, ratio, align_corners);
      return {{t.i[0], t.i[1], t.i[2], t.i[3]}, {t.w[0], t.w[1], t.w[2], t.w[3]}};
    }
  }
  __device__ void readers(int64_t i, int64_t& lo, int64_t& hi) const {
    if constexpr (K == 2) {
      upsample::linear_readers<C>(i, in, out, ratio, align_corners, lo, hi);
    } else {
      upsample::cubic_readers<C>(i, in, out, ratio, align_corners, lo, hi);
    }
  }
};

template <class C>
using LinearAxis = ScaledAxis<C, 2>;

/// The gather backward of a separable tap rule at input (d, h, w) of one plane: the sum over the
/// outputs that read it, in ascending (od, oh, ow) order, and over each output's taps (kd, kh, kw)
/// in row-major order, of go[od, oh, ow] * ((wd[kd] * wh[kh]) * ww[kw]) where the taps are
/// (d, h, w): the CPU's scatter order (Note [Upsample backward order]). go: [out_d, out_h, out_w].
template <class C, class T, class AD, class AH, class AW>
__device__ C gather_taps(const T* go, const UpsampleGeom& g, const AD& ad, const AH& ah,
                         const AW& aw, int64_t d, int64_t h, int64_t w) {
  int64_t od0, od1, oh0, oh1, ow0, ow1;
  ad.readers(d, od0, od1);
  ah.readers(h, oh0, oh1);
  aw.readers(w, ow0, ow1);
  C s = 0;
  for (int64_t od = od0; od < od1; ++od) {
    const auto a = ad.taps(od);
    if (!reads(a, d)) continue;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const auto b = ah.taps(oh);
      if (!reads(b, h)) continue;
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const auto c = aw.taps(ow);
        if (!reads(c, w)) continue;
        const C v = to_comp(go[(od * g.out_h + oh) * g.out_w + ow]);
        for (int kd = 0; kd < a.kTaps; ++kd) {
          if (a.i[kd] != d) continue;
          for (int kh = 0; kh < b.kTaps; ++kh) {
            if (b.i[kh] != h) continue;
            for (int kw = 0; kw < c.kTaps; ++kw) {
              if (c.i[kw] == w) s += v * ((a.w[kd] * b.w[kh]) * c.w[kw]);
            }
          }
        }
      }
    }
  }
  return s;
}

/// The axes and the gather backward of a 2-d separable tap rule (bilinear: K = 2, bicubic: K = 4);
/// the rule adds its forward.
template <class C, int K>
struct PlaneTapRule {
  UnitAxis<C> ad;
  ScaledAxis<C, K> ah, aw;
  __device__ explicit PlaneTapRule(const UpsampleGeom& g)
      : ah(ScaledAxis<C, K>::make(g.H, g.out_h, g.scale_h, g.align_corners)),
        aw(ScaledAxis<C, K>::make(g.W, g.out_w, g.scale_w, g.align_corners)) {}
  template <class T>
  __device__ C backward(const UpsampleGeom& g, const T* go, int64_t d, int64_t h, int64_t w) const {
    return gather_taps<C>(go, g, ad, ah, aw, d, h, w);
  }
};

/// Which way a kernel runs: forward writes one output element per thread from the input planes,
/// backward one input-gradient element per thread from the output-gradient planes.
enum class Pass { forward, backward };

/// dst [P, *] from src [P, *]: forward, dst's planes are [out_d, out_h, out_w] and src's
/// [D, H, W]; backward the other way round.
template <class T, template <class> class Rule, Pass pass>
__global__ void kernel(T* dst, const T* src, UpsampleGeom g) {
  const Rule<comp_t<T>> rule(g);
  const bool fwd = pass == Pass::forward;
  const int64_t d = fwd ? g.out_d : g.D, h = fwd ? g.out_h : g.H, w = fwd ? g.out_w : g.W;
  const int64_t src_plane = fwd ? g.D * g.H * g.W : g.out_d * g.out_h * g.out_w;
  grid_stride(g.P * d * h * w, [&](int64_t t) {
    const Coord c = split(t, d, h, w);
    const T* sp = src + c.p * src_plane;
    if constexpr (pass == Pass::forward) {
      dst[t] = convert<T>(rule.forward(g, sp, c.d, c.h, c.w));
    } else {
      dst[t] = convert<T>(rule.backward(g, sp, c.d, c.h, c.w));
    }
  });
}

/// Runs Rule one way for the floating dtype dt (DTypeError naming op for another): forward, dst
/// [P, out_d, out_h, out_w] = Rule's forward of src [P, D, H, W]; backward, dst [P, D, H, W]
/// (overwritten) = Rule's gather of src [P, out_d, out_h, out_w]. Nothing is launched when dst is
/// empty.
template <template <class> class Rule, Pass pass>
void launch(DType dt, const char* op, void* dst, const void* src, const UpsampleGeom& g,
            cudaStream_t s) {
  visit_float(dt, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n =
        pass == Pass::forward ? g.P * g.out_d * g.out_h * g.out_w : g.P * g.D * g.H * g.W;
    if (n == 0) return;
    kernel<T, Rule, pass>
        <<<grid_for(n), kBlockThreads, 0, s>>>(static_cast<T*>(dst), static_cast<const T*>(src), g);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sl::cuda::upsample_launch
