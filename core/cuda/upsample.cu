// CUDA kernels of the upsample family's nearest (1-d to 3-d), linear, bilinear and trilinear modes
// (bicubic and antialias in upsample_cubic.cu), with the CPU kernels' index rules (core/ops/
// upsample_index.h). Each mode is a Rule of upsample_launch.cuh, which launches it: one thread per
// output element forward; backward gathers, one thread per input element, the outputs that read
// it in ascending output order (Note [Upsample backward order]). 16-bit storage is computed in
// float (comp_t) and rounded once.
#include "core/cuda/upsample_launch.cuh"

namespace sl::cuda {
namespace {

using upsample_launch::gather_taps;
using upsample_launch::LinearAxis;
using upsample_launch::NearestAxis;
using upsample_launch::Pass;
using upsample_launch::Taps;

// nearest covers [P, H, W] planes (D = out_d = 1) and [P, D, H, W] volumes alike
template <class C>
struct NearestRule {
  NearestAxis<C> ad, ah, aw;
  __device__ explicit NearestRule(const UpsampleGeom& g)
      : ad{g.D, g.out_d, g.scale_d, g.exact},
        ah{g.H, g.out_h, g.scale_h, g.exact},
        aw{g.W, g.out_w, g.scale_w, g.exact} {}
  template <class T>
  __device__ C forward(const UpsampleGeom& g, const T* x, int64_t od, int64_t oh,
                       int64_t ow) const {
    return to_comp(x[(ad.source(od) * g.H + ah.source(oh)) * g.W + aw.source(ow)]);
  }
  template <class T>
  __device__ C backward(const UpsampleGeom& g, const T* go, int64_t d, int64_t h, int64_t w) const {
    return gather_taps<C>(go, g, ad, ah, aw, d, h, w);
  }
};

template <class C>
struct LinearRule : upsample_launch::PlaneTapRule<C, 2> {
  using upsample_launch::PlaneTapRule<C, 2>::PlaneTapRule;
  template <class T>
  __device__ C forward(const UpsampleGeom& g, const T* x, int64_t, int64_t oh, int64_t ow) const {
    const Taps<2, C> h = this->ah.taps(oh), w = this->aw.taps(ow);
    const T* r0 = x + h.i[0] * g.W;
    const T* r1 = x + h.i[1] * g.W;
    return (to_comp(r0[w.i[0]]) * w.w[0] + to_comp(r0[w.i[1]]) * w.w[1]) * h.w[0] +
           (to_comp(r1[w.i[0]]) * w.w[0] + to_comp(r1[w.i[1]]) * w.w[1]) * h.w[1];
  }
};

template <class C>
struct TrilinearRule {
  LinearAxis<C> ad, ah, aw;
  __device__ explicit TrilinearRule(const UpsampleGeom& g)
      : ad(LinearAxis<C>::make(g.D, g.out_d, g.scale_d, g.align_corners)),
        ah(LinearAxis<C>::make(g.H, g.out_h, g.scale_h, g.align_corners)),
        aw(LinearAxis<C>::make(g.W, g.out_w, g.scale_w, g.align_corners)) {}
  template <class T>
  __device__ C forward(const UpsampleGeom& g, const T* x, int64_t od, int64_t oh,
                       int64_t ow) const {
    const Taps<2, C> d = ad.taps(od), h = ah.taps(oh), w = aw.taps(ow);
    auto row = [&](int64_t id, int64_t ih) {
      const T* r = x + (id * g.H + ih) * g.W;
      return to_comp(r[w.i[0]]) * w.w[0] + to_comp(r[w.i[1]]) * w.w[1];
    };
    return (row(d.i[0], h.i[0]) * h.w[0] + row(d.i[0], h.i[1]) * h.w[1]) * d.w[0] +
           (row(d.i[1], h.i[0]) * h.w[0] + row(d.i[1], h.i[1]) * h.w[1]) * d.w[1];
  }
  template <class T>
  __device__ C backward(const UpsampleGeom& g, const T* go, int64_t d, int64_t h, int64_t w) const {
    return gather_taps<C>(go, g, ad, ah, aw, d, h, w);
  }
};

/// Launches `rule`'s kernel for `pass`.
template <Pass pass>
void run(DType dt, UpsampleRule rule, const char* op, void* dst, const void* src,
         const UpsampleGeom& g, cudaStream_t s) {
  switch (rule) {
    case UpsampleRule::nearest:
      return upsample_launch::launch<NearestRule, pass>(dt, op, dst, src, g, s);
    case UpsampleRule::linear:
      return upsample_launch::launch<LinearRule, pass>(dt, op, dst, src, g, s);
    case UpsampleRule::trilinear:
      return upsample_launch::launch<TrilinearRule, pass>(dt, op, dst, src, g, s);
  }
}

}  // namespace

void launch_upsample_forward(DType dt, UpsampleRule rule, void* out, const void* x,
                             const UpsampleGeom& g, cudaStream_t s) {
  run<Pass::forward>(dt, rule, "upsample", out, x, g, s);
}

void launch_upsample_backward(DType dt, UpsampleRule rule, void* grad_in, const void* grad_out,
                              const UpsampleGeom& g, cudaStream_t s) {
  run<Pass::backward>(dt, rule, "upsample_backward", grad_in, grad_out, g, s);
}

}  // namespace sl::cuda
