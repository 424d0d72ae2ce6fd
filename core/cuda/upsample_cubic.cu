// CUDA kernels of the upsample family's bicubic and antialias modes, with the CPU kernels' index
// rules (core/ops/upsample_index.h). Each mode is a Rule of upsample_launch.cuh, which launches
// it: one thread per output element forward; backward gathers, one thread per input element, the
// outputs that read it in ascending output order and each output's taps in the CPU's order (Note
// [Upsample backward order]), so no atomics. 16-bit storage is computed in float (comp_t) and
// rounded once.
#include "core/cuda/upsample_launch.cuh"

namespace sl::cuda {
namespace {

using upsample::AaWindow;
using upsample_launch::Pass;
using upsample_launch::Taps;

template <class C>
struct CubicRule : upsample_launch::PlaneTapRule<C, 4> {
  using upsample_launch::PlaneTapRule<C, 4>::PlaneTapRule;
  template <class T>
  __device__ C forward(const UpsampleGeom& g, const T* x, int64_t, int64_t oh, int64_t ow) const {
    const Taps<4, C> h = this->ah.taps(oh), w = this->aw.taps(ow);
    C acc = 0;
    for (int kh = 0; kh < 4; ++kh) {
      const T* r = x + h.i[kh] * g.W;
      const C row = to_comp(r[w.i[0]]) * w.w[0] + to_comp(r[w.i[1]]) * w.w[1] +
                    to_comp(r[w.i[2]]) * w.w[2] + to_comp(r[w.i[3]]) * w.w[3];
      acc += row * h.w[kh];
    }
    return acc;
  }
};

// The antialias windows vary in size, so the gather finds its one tap in each by position.
template <class C>
struct AaRule {
  C rh, rw;
  bool cubic;
  __device__ explicit AaRule(const UpsampleGeom& g)
      : rh(upsample::linear_ratio<C>(g.H, g.out_h, g.align_corners, g.scale_h)),
        rw(upsample::linear_ratio<C>(g.W, g.out_w, g.align_corners, g.scale_w)),
        cubic(g.cubic) {}
  template <class T>
  __device__ C forward(const UpsampleGeom& g, const T* x, int64_t, int64_t oh, int64_t ow) const {
    const AaWindow<C> h = upsample::aa_window<C>(oh, g.H, rh, cubic);
    const AaWindow<C> w = upsample::aa_window<C>(ow, g.W, rw, cubic);
    // the CPU's order: each row's window along W, then the rows along H
    C acc = 0;
    for (int64_t i = 0; i < h.size; ++i) {
      const T* r = x + (h.lo + i) * g.W + w.lo;
      C row = 0;
      for (int64_t j = 0; j < w.size; ++j) row += to_comp(r[j]) * w.weight(j);
      acc += row * h.weight(i);
    }
    return acc;
  }
  template <class T>
  __device__ C backward(const UpsampleGeom& g, const T* go, int64_t, int64_t h, int64_t w) const {
    int64_t oh0, oh1, ow0, ow1;
    upsample::aa_readers<C>(h, g.H, g.out_h, rh, cubic, oh0, oh1);
    upsample::aa_readers<C>(w, g.W, g.out_w, rw, cubic, ow0, ow1);
    C s = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const AaWindow<C> a = upsample::aa_window<C>(oh, g.H, rh, cubic);
      const C wh = a.weight(h - a.lo);
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const AaWindow<C> b = upsample::aa_window<C>(ow, g.W, rw, cubic);
        s += to_comp(go[oh * g.out_w + ow]) * (wh * b.weight(w - b.lo));
      }
    }
    return s;
  }
};

/// Launches the antialias or the bicubic kernel for `pass`.
template <Pass pass>
void run(DType dt, bool antialias, const char* op, void* dst, const void* src,
         const UpsampleGeom& g, cudaStream_t s) {
  if (antialias) return upsample_launch::launch<AaRule, pass>(dt, op, dst, src, g, s);
  upsample_launch::launch<CubicRule, pass>(dt, op, dst, src, g, s);
}

}  // namespace

void launch_upsample_cubic_forward(DType dt, bool antialias, void* out, const void* x,
                                   const UpsampleGeom& g, cudaStream_t s) {
  run<Pass::forward>(dt, antialias, antialias ? "upsample_antialias" : "upsample_bicubic", out, x,
                     g, s);
}

void launch_upsample_cubic_backward(DType dt, bool antialias, void* grad_in, const void* grad_out,
                                    const UpsampleGeom& g, cudaStream_t s) {
  run<Pass::backward>(dt, antialias,
                      antialias ? "upsample_antialias_backward" : "upsample_bicubic_backward",
                      grad_in, grad_out, g, s);
}

}  // namespace sl::cuda
