// CUDA kernels of the reduce family: var, norm, logsumexp (two passes where the CPU makes two),
// all and any.
#include <cmath>

#include "core/cuda/reduce.cuh"

namespace sl::cuda {
namespace {

/// buf[i] = acc / R (the mean) or acc as double (the max).
struct DoubleStore {
  double* buf;
  bool divide;
  int64_t R;
  template <class Acc>
  __device__ void operator()(int64_t i, Acc acc) const {
    buf[i] = divide ? static_cast<double>(acc) / static_cast<double>(R) : static_cast<double>(acc);
  }
};

/// Sum of squared deviations from mean[out_index].
template <class T>
struct SqDevPolicy {
  using Acc = double;
  const double* mean;
  __device__ Acc identity() const { return 0.0; }
  __device__ Acc map(T v, int64_t, int64_t o) const {
    double d = static_cast<double>(to_comp(v)) - mean[o];
    return d * d;
  }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
};

template <class T>
struct VarStore {
  T* out;
  int64_t R, correction;
  __device__ void operator()(int64_t i, double ss) const {
    // max(0, R - correction) as PyTorch: inf for a correction >= R (0/0 = NaN when ss is 0).
    double denom = fmax(0.0, static_cast<double>(R - correction));
    out[i] = convert<T>(ss / denom);
  }
};

/// p-norm: sum of |v|^p (p = +-inf: max / min of |v|, NaN propagating; p = 0: count of
/// nonzero v).
template <class T>
struct NormPolicy {
  using Acc = double;
  double p;
  bool inf;
  __device__ Acc identity() const {
    return inf && p < 0 ? __longlong_as_double(0x7ff0000000000000LL) : 0.0;
  }
  __device__ Acc map(T v, int64_t, int64_t) const {
    double x = ::fabs(static_cast<double>(to_comp(v)));
    if (inf || p == 1.0) return x;
    if (p == 0.0) return x != 0.0 ? 1.0 : 0.0;  // NaN counts
    if (p == 2.0) return x * x;
    return ::pow(x, p);
  }
  __device__ Acc combine(Acc a, Acc b) const {
    if (inf) {
      if (a != a) return a;
      if (b != b) return b;
      return (p > 0 ? b > a : b < a) ? b : a;
    }
    return a + b;
  }
};

template <class T>
struct NormStore {
  T* out;
  double p;
  bool inf;
  int64_t R;
  __device__ void operator()(int64_t i, double acc) const {
    double r = R == 0                        ? 0.0  // every order, as PyTorch
               : inf || p == 1.0 || p == 0.0 ? acc
               : p == 2.0                    ? ::sqrt(acc)
                                             : ::pow(acc, 1.0 / p);
    out[i] = convert<T>(r);
  }
};

template <class T>
struct ExpShiftPolicy {
  using Acc = double;
  const double* m;
  __device__ Acc identity() const { return 0.0; }
  __device__ Acc map(T v, int64_t, int64_t o) const {
    return ::exp(static_cast<double>(to_comp(v)) - m[o]);
  }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
};

template <class T>
struct LseStore {
  T* out;
  const double* m;
  int64_t R;
  __device__ void operator()(int64_t i, double s) const {
    double mi = m[i];
    double r =
        ::isinf(mi) ? (R == 0 ? -__longlong_as_double(0x7ff0000000000000LL) : mi) : mi + ::log(s);
    out[i] = convert<T>(r);
  }
};

template <class T, bool IsAll>
struct AllAnyPolicy {
  using Acc = bool;
  __device__ Acc identity() const { return IsAll; }
  __device__ Acc map(T v, int64_t, int64_t) const { return to_comp(v) != comp_t<T>(0); }
  __device__ Acc combine(Acc a, Acc b) const { return IsAll ? (a && b) : (a || b); }
};

struct BoolStore {
  bool* out;
  __device__ void operator()(int64_t i, bool v) const { out[i] = v; }
};

}  // namespace

void launch_reduce_stats(ReduceCode op, DType dt, const void* in, void* out, int64_t outer,
                         int64_t R, int64_t inner, int64_t correction, double p, cudaStream_t s) {
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in);
    if (op == ReduceCode::all) {
      return run_reduction(AllAnyPolicy<T, true>{}, x, outer, R, inner,
                           BoolStore{static_cast<bool*>(out)}, s);
    }
    if (op == ReduceCode::any) {
      return run_reduction(AllAnyPolicy<T, false>{}, x, outer, R, inner,
                           BoolStore{static_cast<bool*>(out)}, s);
    }
    if constexpr (!is_float_v<T>) {
      ::sl::detail::throw_error<DTypeError>(
          "reduce: var/norm/logsumexp expect a floating "
          "input on CUDA");
    } else {
      T* y = static_cast<T*>(out);
      const size_t nout = static_cast<size_t>(outer * inner);
      if (op == ReduceCode::var) {
        DeviceScratch mean(nout * sizeof(double));
        run_reduction(SumPolicy<T>{}, x, outer, R, inner, DoubleStore{mean.as<double>(), true, R},
                      s);
        run_reduction(SqDevPolicy<T>{mean.as<double>()}, x, outer, R, inner,
                      VarStore<T>{y, R, correction}, s);
      } else if (op == ReduceCode::norm) {
        const bool inf = std::isinf(p);
        run_reduction(NormPolicy<T>{p, inf}, x, outer, R, inner, NormStore<T>{y, p, inf, R}, s);
      } else if (op == ReduceCode::logsumexp) {
        DeviceScratch m(nout * sizeof(double));
        run_reduction(MinMaxPolicy<T, true>{}, x, outer, R, inner,
                      DoubleStore{m.as<double>(), false, R}, s);
        run_reduction(ExpShiftPolicy<T>{m.as<double>()}, x, outer, R, inner,
                      LseStore<T>{y, m.as<double>(), R}, s);
      } else {
        ::sl::detail::throw_error<ValueError>("reduce: unknown op code ", static_cast<int>(op));
      }
    }
  });
}

}  // namespace sl::cuda
