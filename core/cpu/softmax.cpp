// CPU kernels of the softmax family over contiguous [outer, n, inner] tensors. Each slice (one
// (outer, inner) position, n elements apart by `inner`) is handled by one thread in a fixed
// order; exps are computed in the compute type (float for 16-bit floats) and summed in double.
#include <cmath>
#include <limits>

#include "core/cpu/loops.h"
#include "core/ops/softmax.h"

namespace sl::cpu {
namespace {

/// Element r of a slice with a stride known at compile time when it is 1 (vectorisable).
template <int64_t kUnit>
inline int64_t at(int64_t r, int64_t stride) {
  if constexpr (kUnit == 1) {
    (void)stride;
    return r;
  } else {
    return r * stride;
  }
}

template <class T, int64_t kUnit>
void softmax_slice(const T* x, T* y, int64_t n, int64_t stride, bool log) {
  using C = compute_t<T>;
  C m = -std::numeric_limits<C>::infinity();
  for (int64_t r = 0; r < n; ++r) {
    C v = static_cast<C>(x[at<kUnit>(r, stride)]);
    m = (v > m || v != v) ? v : m;  // NaN sticks
    if (m != m) break;
  }
  double sum = 0;
  if constexpr (std::is_same_v<T, C>) {
    if (!log) {  // store the exps, then scale them
      for (int64_t r = 0; r < n; ++r) {
        C e = std::exp(x[at<kUnit>(r, stride)] - m);
        y[at<kUnit>(r, stride)] = e;
        sum += static_cast<double>(e);
      }
      const C inv = static_cast<C>(1.0 / sum);
      for (int64_t r = 0; r < n; ++r) y[at<kUnit>(r, stride)] *= inv;
      return;
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    sum += static_cast<double>(std::exp(static_cast<C>(x[at<kUnit>(r, stride)]) - m));
  }
  if (log) {
    const C shift = m + static_cast<C>(std::log(sum));
    for (int64_t r = 0; r < n; ++r) {
      y[at<kUnit>(r, stride)] = static_cast<T>(static_cast<C>(x[at<kUnit>(r, stride)]) - shift);
    }
  } else {
    const C inv = static_cast<C>(1.0 / sum);
    for (int64_t r = 0; r < n; ++r) {
      y[at<kUnit>(r, stride)] =
          static_cast<T>(std::exp(static_cast<C>(x[at<kUnit>(r, stride)]) - m) * inv);
    }
  }
}

template <class T, int64_t kUnit>
void softmax_backward_slice(T* gi, const T* g, const T* y, int64_t n, int64_t stride, bool log) {
  using C = compute_t<T>;
  double acc = 0;
  if (log) {
    for (int64_t r = 0; r < n; ++r)
      acc += static_cast<double>(static_cast<C>(g[at<kUnit>(r, stride)]));
    const C s = static_cast<C>(acc);
    for (int64_t r = 0; r < n; ++r) {
      int64_t p = at<kUnit>(r, stride);
      gi[p] = static_cast<T>(static_cast<C>(g[p]) - std::exp(static_cast<C>(y[p])) * s);
    }
  } else {
    for (int64_t r = 0; r < n; ++r) {
      int64_t p = at<kUnit>(r, stride);
      acc += static_cast<double>(static_cast<C>(g[p])) * static_cast<double>(static_cast<C>(y[p]));
    }
    const C dot = static_cast<C>(acc);
    for (int64_t r = 0; r < n; ++r) {
      int64_t p = at<kUnit>(r, stride);
      gi[p] = static_cast<T>(static_cast<C>(y[p]) * (static_cast<C>(g[p]) - dot));
    }
  }
}

/// Calls f(slice_offset) for every (outer, inner) slice, in parallel.
template <class F>
void for_each_slice(int64_t outer, int64_t n, int64_t inner, const F& f) {
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
  parallel_for(0, outer * inner, grain, [&](int64_t b, int64_t e) {
    for (int64_t s = b; s < e; ++s) f((s / inner) * n * inner + s % inner);
  });
}

void softmax_cpu(const Tensor& out, const Tensor& in, bool log) {
  visit_floating(in.dtype(), "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t outer = in.size(0), n = in.size(1), inner = in.size(2);
    const T* x = in.data_ptr<T>();
    T* y = out.data_ptr<T>();
    if (inner == 1) {
      for_each_slice(outer, n, 1,
                     [&](int64_t off) { softmax_slice<T, 1>(x + off, y + off, n, 1, log); });
    } else {
      for_each_slice(outer, n, inner,
                     [&](int64_t off) { softmax_slice<T, 0>(x + off, y + off, n, inner, log); });
    }
  });
}

void softmax_backward_cpu(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out,
                          bool log) {
  visit_floating(out.dtype(), "softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t outer = out.size(0), n = out.size(1), inner = out.size(2);
    T* gi = grad_in.data_ptr<T>();
    const T* g = grad_out.data_ptr<T>();
    const T* y = out.data_ptr<T>();
    if (inner == 1) {
      for_each_slice(outer, n, 1, [&](int64_t off) {
        softmax_backward_slice<T, 1>(gi + off, g + off, y + off, n, 1, log);
      });
    } else {
      for_each_slice(outer, n, inner, [&](int64_t off) {
        softmax_backward_slice<T, 0>(gi + off, g + off, y + off, n, inner, log);
      });
    }
  });
}

SL_REGISTER_KERNEL(softmax_kernel, DeviceKind::cpu, &softmax_cpu);
SL_REGISTER_KERNEL(softmax_backward_kernel, DeviceKind::cpu, &softmax_backward_cpu);

}  // namespace
}  // namespace sl::cpu
