// CPU kernels of the reduce family over contiguous [outer, R, inner] inputs
// (Note [Reduction layout]). Floating values accumulate in double, integers in uint64 and give
// their int64 result modulo 2^64 (Note [Integer wraparound]). Sums over
// a reduced dim with inner > 1 (column sums, e.g. bias gradients) walk the rows in order over
// tiles of adjacent columns instead of one strided column at a time (sum_columns); so do running
// sums (cumsum_columns).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/loops.h"
#include "core/int_wrap.h"
#include "core/ops/reduce.h"

namespace sl::cpu {
namespace {

/// R is cut into blocks of this many elements whatever the thread count (determinism).
constexpr int64_t kReduceBlock = 16384;

/// double for floating T; uint64_t for integers and bool, read back with acc_value.
template <class T>
using acc_t = sum_acc_wrap_t<std::is_floating_point_v<compute_t<T>>>;

/// Sum of f(x[k*stride]) for k in [0, n), with 8 independent accumulators combined in a fixed
/// order (vectorisable, deterministic).
template <class A, class T, class F>
inline A strided_sum(const T* x, int64_t n, int64_t stride, const F& f) {
  A acc[8] = {};
  int64_t k = 0;
  if (stride == 1) {
    for (; k + 8 <= n; k += 8) {
      for (int j = 0; j < 8; ++j) acc[j] += f(x[k + j]);
    }
  }
  for (; k < n; ++k) acc[k & 7] += f(x[k * stride]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <class T>
struct Reducer {
  using C = compute_t<T>;
  using A = acc_t<T>;
  const T* in;
  int64_t R, inner;

  /// Sum over r of f(in[o, r, i]) with fixed blocks.
  template <class F>
  A sum_of(int64_t o, int64_t i, const F& f) const {
    const T* base = in + o * R * inner + i;
    auto map = [&](int64_t b, int64_t e) { return strided_sum<A>(base + b * inner, e - b, inner, f); };
    if (R <= kReduceBlock) return map(0, R);
    return parallel_reduce<A>(0, R, kReduceBlock, A(0), map, [](A a, A b) { return a + b; });
  }
};

/// Column tile of sum_columns: this many adjacent outputs (inner positions) are summed together.
constexpr int64_t kColumnTile = 64;

/// y[o, i] = sum over r of in[o, r, i] (divided by R for a mean) for inner > 1 and
/// R <= kReduceBlock. Reduced rows are read in order, a tile of kColumnTile adjacent columns at a
/// time (walking one column at a time strides through memory and, for tensors beyond the cache,
/// refetches every line once per column: bias gradients of [2048, 2304] took 10x the time of
/// reading them once). Each column keeps the 8 accumulators of strided_sum, fed and combined in
/// its order, so the bits are those of Reducer::sum_of; tiles are split over the pool, a column
/// is summed by one thread.
template <class T, class O>
void sum_columns(O* y, const T* x, int64_t outer, int64_t R, int64_t inner, bool mean) {
  using A = acc_t<T>;
  using C = compute_t<T>;
  const int64_t tiles = (inner + kColumnTile - 1) / kColumnTile;
  const int64_t grain =
      std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(R * kColumnTile, 1));
  parallel_for(0, outer * tiles, grain, [&](int64_t t0, int64_t t1) {
    A acc[8][kColumnTile];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / tiles, i0 = t % tiles * kColumnTile;
      const int64_t w = std::min(kColumnTile, inner - i0);
      for (auto& a : acc) std::fill(a, a + w, A(0));
      const T* base = x + o * R * inner + i0;
      for (int64_t r = 0; r < R; ++r) {
        A* a = acc[r & 7];
        const T* row = base + r * inner;
        for (int64_t c = 0; c < w; ++c) a[c] += static_cast<A>(static_cast<C>(row[c]));
      }
      O* yt = y + o * inner + i0;
      for (int64_t c = 0; c < w; ++c) {
        A s = ((acc[0][c] + acc[1][c]) + (acc[2][c] + acc[3][c])) +
              ((acc[4][c] + acc[5][c]) + (acc[6][c] + acc[7][c]));
        yt[c] = mean ? static_cast<O>(static_cast<double>(acc_value(s)) / static_cast<double>(R))
                     : static_cast<O>(acc_value(s));
      }
    }
  });
}

template <class T>
void reduce_typed(ReduceOp op, const Tensor& out, const Tensor& in, const ReduceParams& params) {
  using C = compute_t<T>;
  using A = acc_t<T>;
  const int64_t outer = in.size(0), R = in.size(1), inner = in.size(2);
  const T* x = in.data_ptr<T>();
  Reducer<T> red{x, R, inner};
  const int64_t nout = outer * inner;
  // Parallelise over outputs when there are several; a single output parallelises over R.
  auto for_outputs = [&](const auto& body) {
    int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(R, 1));
    parallel_for(0, nout, grain, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) body(j / inner, j % inner, j);
    });
  };
  auto ident = [](C v) { return static_cast<A>(v); };
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean: {
      visit_dtype(out.dtype(), [&](auto ot) {
        using O = typename decltype(ot)::type;
        O* y = out.data_ptr<O>();
        if (inner > 1 && R <= kReduceBlock) {
          sum_columns<T, O>(y, x, outer, R, inner, op == ReduceOp::mean);
          return;
        }
        for_outputs([&](int64_t o, int64_t i, int64_t j) {
          A s = red.sum_of(o, i, ident);
          if (op == ReduceOp::mean) {
            y[j] = static_cast<O>(static_cast<double>(acc_value(s)) / static_cast<double>(R));
          } else {
            y[j] = static_cast<O>(acc_value(s));
          }
        });
      });
      return;
    }
    case ReduceOp::prod: {
      visit_dtype(out.dtype(), [&](auto ot) {
        using O = typename decltype(ot)::type;
        O* y = out.data_ptr<O>();
        for_outputs([&](int64_t o, int64_t i, int64_t j) {
          A p = 1;
          const T* base = x + o * R * inner + i;
          for (int64_t r = 0; r < R; ++r) p *= static_cast<A>(static_cast<C>(base[r * inner]));
          y[j] = static_cast<O>(acc_value(p));
        });
      });
      return;
    }
    case ReduceOp::max:
    case ReduceOp::min: {
      T* y = out.data_ptr<T>();
      bool is_max = op == ReduceOp::max;
      for_outputs([&](int64_t o, int64_t i, int64_t j) {
        const T* base = x + o * R * inner + i;
        C best = static_cast<C>(base[0]);
        for (int64_t r = 1; r < R; ++r) {
          C v = static_cast<C>(base[r * inner]);
          if constexpr (std::is_floating_point_v<C>) {
            if (best != best) break;  // NaN wins
            if (v != v) {
              best = v;
              break;
            }
          }
          if (is_max ? v > best : v < best) best = v;
        }
        y[j] = static_cast<T>(best);
      });
      return;
    }
    case ReduceOp::var: {
      if constexpr (std::is_floating_point_v<C>) {
        T* y = out.data_ptr<T>();
        for_outputs([&](int64_t o, int64_t i, int64_t j) {
          double mean = static_cast<double>(red.sum_of(o, i, ident)) / static_cast<double>(R);
          double ss = red.sum_of(o, i, [mean](C v) {
            double d = static_cast<double>(v) - mean;
            return d * d;
          });
          // PyTorch divides by max(0, R - correction): a correction >= R gives inf (or NaN when
          // every value is equal, 0/0), not NaN regardless.
          double denom = std::max(0.0, static_cast<double>(R - params.correction));
          y[j] = static_cast<T>(ss / denom);
        });
      }
      return;
    }
    case ReduceOp::norm: {
      if constexpr (std::is_floating_point_v<C>) {
        T* y = out.data_ptr<T>();
        double p = params.p;
        for_outputs([&](int64_t o, int64_t i, int64_t j) {
          double r;
          if (R == 0) {
            r = 0;  // every order, as PyTorch (even -inf and p < 0)
          } else if (std::isinf(p)) {
            // max |x| (p = inf) or min |x| (p = -inf); NaN wins
            const T* base = x + o * R * inner + i;
            double m = p > 0 ? 0.0 : std::numeric_limits<double>::infinity();
            for (int64_t k = 0; k < R; ++k) {
              double v = std::fabs(static_cast<double>(static_cast<C>(base[k * inner])));
              if (v != v) {
                m = v;
                break;
              }
              m = (p > 0 ? v > m : v < m) ? v : m;
            }
            r = m;
          } else if (p == 0.0) {
            // the number of nonzero elements (NaN counts)
            r = red.sum_of(o, i, [](C v) { return v != C(0) ? 1.0 : 0.0; });
          } else if (p == 2.0) {
            r = std::sqrt(red.sum_of(o, i, [](C v) { return static_cast<double>(v) * v; }));
          } else if (p == 1.0) {
            r = red.sum_of(o, i, [](C v) { return std::fabs(static_cast<double>(v)); });
          } else {
            double s = red.sum_of(o, i, [p](C v) { return std::pow(std::fabs(static_cast<double>(v)), p); });
            r = std::pow(s, 1.0 / p);
          }
          y[j] = static_cast<T>(r);
        });
      }
      return;
    }
    case ReduceOp::logsumexp: {
      if constexpr (std::is_floating_point_v<C>) {
        T* y = out.data_ptr<T>();
        for_outputs([&](int64_t o, int64_t i, int64_t j) {
          const T* base = x + o * R * inner + i;
          // Note [Logsumexp NaN]: a NaN anywhere in the slice makes the result NaN, as in
          // PyTorch (its shift is amax, which propagates NaN) and in the CUDA kernel (a
          // NaN-propagating max). std::max(m, NaN) returns m, so a plain max dropped the NaN:
          // logsumexp([inf, nan]) was inf and logsumexp([nan]) -inf.
          double m = -std::numeric_limits<double>::infinity();
          for (int64_t k = 0; k < R; ++k) {
            double v = static_cast<double>(static_cast<C>(base[k * inner]));
            if (v != v) {
              m = v;
              break;
            }
            m = std::max(m, v);
          }
          if (m != m || std::isinf(m)) {
            y[j] = static_cast<T>(R == 0 ? -std::numeric_limits<double>::infinity() : m);
            return;
          }
          double s = red.sum_of(o, i, [m](C v) { return std::exp(static_cast<double>(v) - m); });
          y[j] = static_cast<T>(m + std::log(s));
        });
      }
      return;
    }
    case ReduceOp::all:
    case ReduceOp::any: {
      bool* y = out.data_ptr<bool>();
      bool want_all = op == ReduceOp::all;
      for_outputs([&](int64_t o, int64_t i, int64_t j) {
        const T* base = x + o * R * inner + i;
        bool r = want_all;
        for (int64_t k = 0; k < R; ++k) {
          bool v = static_cast<C>(base[k * inner]) != C(0);
          if (want_all && !v) {
            r = false;
            break;
          }
          if (!want_all && v) {
            r = true;
            break;
          }
        }
        y[j] = r;
      });
      return;
    }
    case ReduceOp::count_:
      break;
  }
}

void reduce_cpu(ReduceOp op, const Tensor& out, const Tensor& in, const ReduceParams& params) {
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_typed<T>(op, out, in, params);
  });
}

void arg_reduce_cpu(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in) {
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const int64_t outer = in.size(0), R = in.size(1), inner = in.size(2);
    const T* x = in.data_ptr<T>();
    T* v = values.data_ptr<T>();
    int64_t* idx = indices.data_ptr<int64_t>();
    int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(R, 1));
    parallel_for(0, outer * inner, grain, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) {
        const T* base = x + (j / inner) * R * inner + (j % inner);
        C best = static_cast<C>(base[0]);
        int64_t at = 0;
        for (int64_t r = 1; r < R; ++r) {
          C cur = static_cast<C>(base[r * inner]);
          if constexpr (std::is_floating_point_v<C>) {
            if (best != best) break;
            if (cur != cur) {
              best = cur;
              at = r;
              break;
            }
          }
          if (is_max ? cur > best : cur < best) {
            best = cur;
            at = r;
          }
        }
        v[j] = static_cast<T>(best);
        idx[j] = at;
      }
    });
  });
}

/// y[o, r, i] = sum over r' <= r of x[o, r', i] for inner > 1, a tile of kColumnTile adjacent
/// columns at a time with the rows in order (as sum_columns: one strided column at a time
/// refetches every line once per column). Each column keeps one running sum, fed in row order as
/// cumsum_cpu's loop for inner == 1 does, so the bits are the same; a column is summed by one
/// thread.
template <class T>
void cumsum_columns(T* y, const T* x, int64_t outer, int64_t R, int64_t inner) {
  using A = acc_t<T>;
  using C = compute_t<T>;
  const int64_t tiles = (inner + kColumnTile - 1) / kColumnTile;
  const int64_t grain =
      std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(R * kColumnTile, 1));
  parallel_for(0, outer * tiles, grain, [&](int64_t t0, int64_t t1) {
    A s[kColumnTile];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / tiles, i0 = t % tiles * kColumnTile;
      const int64_t w = std::min(kColumnTile, inner - i0);
      std::fill(s, s + w, A(0));
      const int64_t base = o * R * inner + i0;
      for (int64_t r = 0; r < R; ++r) {
        const T* row = x + base + r * inner;
        T* out = y + base + r * inner;
        for (int64_t c = 0; c < w; ++c) {
          s[c] += static_cast<A>(static_cast<C>(row[c]));
          out[c] = static_cast<T>(acc_value(s[c]));
        }
      }
    }
  });
}

void cumsum_cpu(const Tensor& out, const Tensor& in) {
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const int64_t outer = in.size(0), R = in.size(1), inner = in.size(2);
    const T* x = in.data_ptr<T>();
    T* y = out.data_ptr<T>();
    if (inner > 1) {
      cumsum_columns(y, x, outer, R, inner);
      return;
    }
    parallel_for(0, outer * inner, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(R, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t j = b; j < e; ++j) {
                     int64_t base = (j / inner) * R * inner + (j % inner);
                     A s = 0;
                     for (int64_t r = 0; r < R; ++r) {
                       s += static_cast<A>(static_cast<compute_t<T>>(x[base + r * inner]));
                       y[base + r * inner] = static_cast<T>(acc_value(s));
                     }
                   }
                 });
  });
}

SL_REGISTER_KERNEL(reduce_kernel, DeviceKind::cpu, &reduce_cpu);
SL_REGISTER_KERNEL(arg_reduce_kernel, DeviceKind::cpu, &arg_reduce_cpu);
SL_REGISTER_KERNEL(cumsum_kernel, DeviceKind::cpu, &cumsum_cpu);

}  // namespace
}  // namespace sl::cpu
