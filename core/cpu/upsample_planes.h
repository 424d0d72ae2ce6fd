// The plane loops every CPU upsample kernel shares (upsample.cpp, upsample_cubic.cpp; internal
// header): a dimension's taps are tabulated once per call, then the P planes of [P, ...] tensors
// are split over the OpenMP pool, forward writing each output plane, backward zeroing each input
// gradient plane and scattering into it (Note [Upsample backward order]).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cpu/float_dispatch.h"
#include "core/cpu/loops.h"
#include "core/error.h"
#include "core/tensor.h"

namespace sl::cpu::upsample_planes {

/// Planes per parallel task so that each task does at least ~16k element visits.
inline int64_t grain(int64_t work_per_plane) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, work_per_plane));
}

/// [f(0), ..., f(out - 1)]: one dimension's per-output taps.
template <class F>
auto table(int64_t out, F&& f) {
  std::vector<decltype(f(int64_t{0}))> t;
  t.reserve(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) t.push_back(f(o));
  return t;
}

/// The elements of one plane of t [P, ...]: the product of its sizes after dim 0.
inline int64_t plane_numel(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 1; d < t.dim(); ++d) n *= t.size(d);
  return n;
}

/// f(x, y) for each plane of input [P, ...] (x) and out [P, ...] (y), contiguous; `work`: the
/// element visits of one plane, which size the parallel tasks.
template <class T, class F>
void forward(const Tensor& out, const Tensor& input, int64_t work, F&& f) {
  const int64_t in_n = plane_numel(input), out_n = plane_numel(out);
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  parallel_for(0, input.size(0), grain(work), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) f(x + p * in_n, y + p * out_n);
  });
}

/// f(gi, go) for each plane of grad_input [P, ...] (gi, zeroed first) and grad_out [P, ...] (go),
/// contiguous; `work` as forward's, besides the zeroing.
template <class T, class F>
void backward(const Tensor& grad_input, const Tensor& grad_out, int64_t work, F&& f) {
  const int64_t in_n = plane_numel(grad_input), out_n = plane_numel(grad_out);
  T* gi = grad_input.data_ptr<T>();
  const T* go = grad_out.data_ptr<T>();
  parallel_for(0, grad_input.size(0), grain(in_n + work), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gip = gi + p * in_n;
      std::fill(gip, gip + in_n, T(0));
      f(gip, go + p * out_n);
    }
  });
}

}  // namespace sl::cpu::upsample_planes
