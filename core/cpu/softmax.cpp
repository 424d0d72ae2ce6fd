// CPU kernels of the softmax family over contiguous [outer, n, inner] tensors. Each slice (one
// (outer, inner) position, n elements apart by `inner`) is handled by one thread in a fixed
// order; exps are computed in the compute type (float for 16-bit floats) and summed in double.
//
// Note [Softmax over a non-last dim]
// With inner > 1 a slice is a strided gather (stride `inner`), so one slice at a time touches a
// cache line per element and does not vectorise: softmax over dim 0 of [1024, 1024] float32 was
// ~4x slower than PyTorch. As PyTorch's _vec_softmax, such tensors are instead processed in
// blocks of up to kInnerBlock adjacent slices (columns of one outer index): each pass over the n
// rows reads a contiguous run of the block's columns, keeping one running max / sum per column.
// Every column sees the same operations in the same order as softmax_slice (std::exp in
// the compute type, a double sum in row order), so both paths give the same bits per slice and
// the result does not depend on the block width or thread split.
#include <cmath>
#include <limits>

#include "core/cpu/loops.h"
#include "core/ops/softmax.h"

namespace sl::cpu {
namespace {

/// Softmax (log_softmax when `log`) of the n contiguous elements at x into y.
template <class T>
void softmax_slice(const T* x, T* y, int64_t n, bool log) {
  using C = compute_t<T>;
  C m = -std::numeric_limits<C>::infinity();
  for (int64_t r = 0; r < n; ++r) {
    C v = static_cast<C>(x[r]);
    m = (v > m || v != v) ? v : m;  // NaN sticks
    if (m != m) break;
  }
  double sum = 0;
  if constexpr (std::is_same_v<T, C>) {
    if (!log) {  // store the exps, then scale them
      for (int64_t r = 0; r < n; ++r) {
        C e = std::exp(x[r] - m);
        y[r] = e;
        sum += static_cast<double>(e);
      }
      const C inv = static_cast<C>(1.0 / sum);
      for (int64_t r = 0; r < n; ++r) y[r] *= inv;
      return;
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    sum += static_cast<double>(std::exp(static_cast<C>(x[r]) - m));
  }
  if (log) {
    const C shift = m + static_cast<C>(std::log(sum));
    for (int64_t r = 0; r < n; ++r) {
      y[r] = static_cast<T>(static_cast<C>(x[r]) - shift);
    }
  } else {
    const C inv = static_cast<C>(1.0 / sum);
    for (int64_t r = 0; r < n; ++r) {
      y[r] = static_cast<T>(std::exp(static_cast<C>(x[r]) - m) * inv);
    }
  }
}

/// The input gradient of n contiguous elements (softmax_backward_kernel's formulas).
template <class T>
void softmax_backward_slice(T* gi, const T* g, const T* y, int64_t n, bool log) {
  using C = compute_t<T>;
  double acc = 0;
  if (log) {
    for (int64_t r = 0; r < n; ++r) acc += static_cast<double>(static_cast<C>(g[r]));
    const C s = static_cast<C>(acc);
    for (int64_t r = 0; r < n; ++r) {
      gi[r] = static_cast<T>(static_cast<C>(g[r]) - std::exp(static_cast<C>(y[r])) * s);
    }
  } else {
    for (int64_t r = 0; r < n; ++r) {
      acc += static_cast<double>(static_cast<C>(g[r])) * static_cast<double>(static_cast<C>(y[r]));
    }
    const C dot = static_cast<C>(acc);
    for (int64_t r = 0; r < n; ++r) {
      gi[r] = static_cast<T>(static_cast<C>(y[r]) * (static_cast<C>(g[r]) - dot));
    }
  }
}

/// Adjacent slices handled together by the blocked kernels (Note [Softmax over a non-last dim]).
inline constexpr int64_t kInnerBlock = 64;

/// softmax_slice for the w <= kInnerBlock adjacent slices starting at x / y (columns of a
/// [n, inner] row-major block), all passes running along the rows.
template <class T>
void softmax_block(const T* x, T* y, int64_t n, int64_t inner, int64_t w, bool log) {
  using C = compute_t<T>;
  C m[kInnerBlock];
  double sum[kInnerBlock];
  for (int64_t j = 0; j < w; ++j) {
    m[j] = -std::numeric_limits<C>::infinity();
    sum[j] = 0;
  }
  for (int64_t r = 0; r < n; ++r) {
    const T* xr = x + r * inner;
    for (int64_t j = 0; j < w; ++j) {
      C v = static_cast<C>(xr[j]);
      m[j] = (v > m[j] || v != v) ? v : m[j];  // NaN sticks
    }
  }
  if constexpr (std::is_same_v<T, C>) {
    if (!log) {  // store the exps, then scale them
      for (int64_t r = 0; r < n; ++r) {
        const T* xr = x + r * inner;
        T* yr = y + r * inner;
        for (int64_t j = 0; j < w; ++j) {
          C e = std::exp(xr[j] - m[j]);
          yr[j] = e;
          sum[j] += static_cast<double>(e);
        }
      }
      C inv[kInnerBlock];
      for (int64_t j = 0; j < w; ++j) inv[j] = static_cast<C>(1.0 / sum[j]);
      for (int64_t r = 0; r < n; ++r) {
        T* yr = y + r * inner;
        for (int64_t j = 0; j < w; ++j) yr[j] *= inv[j];
      }
      return;
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    const T* xr = x + r * inner;
    for (int64_t j = 0; j < w; ++j)
      sum[j] += static_cast<double>(std::exp(static_cast<C>(xr[j]) - m[j]));
  }
  if (log) {
    C shift[kInnerBlock];
    for (int64_t j = 0; j < w; ++j) shift[j] = m[j] + static_cast<C>(std::log(sum[j]));
    for (int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * inner;
      T* yr = y + r * inner;
      for (int64_t j = 0; j < w; ++j) yr[j] = static_cast<T>(static_cast<C>(xr[j]) - shift[j]);
    }
  } else {
    C inv[kInnerBlock];
    for (int64_t j = 0; j < w; ++j) inv[j] = static_cast<C>(1.0 / sum[j]);
    for (int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * inner;
      T* yr = y + r * inner;
      for (int64_t j = 0; j < w; ++j) {
        yr[j] = static_cast<T>(std::exp(static_cast<C>(xr[j]) - m[j]) * inv[j]);
      }
    }
  }
}

/// softmax_backward_slice for w <= kInnerBlock adjacent slices, as softmax_block.
template <class T>
void softmax_backward_block(T* gi, const T* g, const T* y, int64_t n, int64_t inner, int64_t w,
                            bool log) {
  using C = compute_t<T>;
  double acc[kInnerBlock];
  C s[kInnerBlock];
  for (int64_t j = 0; j < w; ++j) acc[j] = 0;
  if (log) {
    for (int64_t r = 0; r < n; ++r) {
      const T* gr = g + r * inner;
      for (int64_t j = 0; j < w; ++j) acc[j] += static_cast<double>(static_cast<C>(gr[j]));
    }
    for (int64_t j = 0; j < w; ++j) s[j] = static_cast<C>(acc[j]);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t p = r * inner;
      for (int64_t j = 0; j < w; ++j) {
        gi[p + j] =
            static_cast<T>(static_cast<C>(g[p + j]) - std::exp(static_cast<C>(y[p + j])) * s[j]);
      }
    }
  } else {
    for (int64_t r = 0; r < n; ++r) {
      const int64_t p = r * inner;
      for (int64_t j = 0; j < w; ++j) {
        acc[j] += static_cast<double>(static_cast<C>(g[p + j])) *
                  static_cast<double>(static_cast<C>(y[p + j]));
      }
    }
    for (int64_t j = 0; j < w; ++j) s[j] = static_cast<C>(acc[j]);  // the dot products
    for (int64_t r = 0; r < n; ++r) {
      const int64_t p = r * inner;
      for (int64_t j = 0; j < w; ++j) {
        gi[p + j] = static_cast<T>(static_cast<C>(y[p + j]) * (static_cast<C>(g[p + j]) - s[j]));
      }
    }
  }
}

/// Calls f(block_offset, width) for blocks of up to kInnerBlock adjacent slices covering every
/// (outer, inner) slice, in parallel. Blocks are narrowed (to 8 columns at least) while there
/// are fewer of them than threads.
template <class F>
void for_each_block(int64_t outer, int64_t n, int64_t inner, const F& f) {
  int64_t bw = kInnerBlock;
  const int64_t threads = get_num_threads();
  while (bw > 8 && outer * ((inner + bw - 1) / bw) < threads) bw /= 2;
  const int64_t per_outer = (inner + bw - 1) / bw;
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n * bw, 1));
  parallel_for(0, outer * per_outer, grain, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t o = k / per_outer, j0 = (k % per_outer) * bw;
      f(o * n * inner + j0, std::min(bw, inner - j0));
    }
  });
}

/// Calls f(slice_offset) for every slice of a contiguous [outer, n] tensor, in parallel.
template <class F>
void for_each_row(int64_t outer, int64_t n, const F& f) {
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
  parallel_for(0, outer, grain, [&](int64_t b, int64_t e) {
    for (int64_t s = b; s < e; ++s) f(s * n);
  });
}

void softmax_cpu(const Tensor& out, const Tensor& in, bool log) {
  visit_floating(in.dtype(), "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t outer = in.size(0), n = in.size(1), inner = in.size(2);
    const T* x = in.data_ptr<T>();
    T* y = out.data_ptr<T>();
    if (inner == 1) {
      for_each_row(outer, n, [&](int64_t off) { softmax_slice<T>(x + off, y + off, n, log); });
    } else {
      for_each_block(outer, n, inner, [&](int64_t off, int64_t w) {
        softmax_block<T>(x + off, y + off, n, inner, w, log);
      });
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
      for_each_row(outer, n, [&](int64_t off) {
        softmax_backward_slice<T>(gi + off, g + off, y + off, n, log);
      });
    } else {
      for_each_block(outer, n, inner, [&](int64_t off, int64_t w) {
        softmax_backward_block<T>(gi + off, g + off, y + off, n, inner, w, log);
      });
    }
  });
}

SL_REGISTER_KERNEL(softmax_kernel, DeviceKind::cpu, &softmax_cpu);
SL_REGISTER_KERNEL(softmax_backward_kernel, DeviceKind::cpu, &softmax_backward_cpu);

}  // namespace
}  // namespace sl::cpu
