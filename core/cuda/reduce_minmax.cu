// CUDA kernels of the reduce family: max, min and the arg-reductions.
#include "core/cuda/reduce.cuh"

namespace sl::cuda {
namespace {

template <class O>
struct ValueStore {
  O* out;
  template <class Acc>
  __device__ void operator()(int64_t i, Acc acc) const {
    out[i] = convert<O>(acc);
  }
};

/// A value and where it was found. Plain struct (it lives in shared memory).
template <class C>
struct ArgAcc {
  C v;
  int64_t i;
};

/// The first extremum; NaN counts as the extremum (the first NaN wins), as on the CPU.
template <class T, bool IsMax>
struct ArgPolicy {
  using C = comp_t<T>;
  using Acc = ArgAcc<C>;
  __device__ Acc identity() const {
    return Acc{MinMaxPolicy<T, IsMax>{}.identity(), std::numeric_limits<int64_t>::max()};
  }
  __device__ Acc map(T v, int64_t r, int64_t) const { return Acc{to_comp(v), r}; }
  __device__ Acc combine(Acc a, Acc b) const {
    if constexpr (std::is_floating_point_v<C>) {
      const bool an = a.v != a.v, bn = b.v != b.v;
      if (an || bn) {
        if (an && bn) return a.i <= b.i ? a : b;
        return an ? a : b;
      }
    }
    if (IsMax ? b.v > a.v : b.v < a.v) return b;
    if (b.v == a.v) return a.i <= b.i ? a : b;
    return a;
  }
};

template <class T>
struct ArgStore {
  T* values;
  int64_t* indices;
  template <class Acc>
  __device__ void operator()(int64_t i, Acc acc) const {
    values[i] = convert<T>(acc.v);
    indices[i] = acc.i;
  }
};

}  // namespace

void launch_reduce_minmax(ReduceCode op, DType dt, const void* in, void* out, int64_t outer,
                          int64_t R, int64_t inner, cudaStream_t s) {
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in);
    ValueStore<T> store{static_cast<T*>(out)};
    if (op == ReduceCode::max) {
      run_reduction(MinMaxPolicy<T, true>{}, x, outer, R, inner, store, s);
    } else {
      run_reduction(MinMaxPolicy<T, false>{}, x, outer, R, inner, store, s);
    }
  });
}

void launch_arg_reduce(bool is_max, DType dt, const void* in, void* values, int64_t* indices,
                       int64_t outer, int64_t R, int64_t inner, cudaStream_t s) {
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in);
    ArgStore<T> store{static_cast<T*>(values), indices};
    if (is_max) {
      run_reduction(ArgPolicy<T, true>{}, x, outer, R, inner, store, s);
    } else {
      run_reduction(ArgPolicy<T, false>{}, x, outer, R, inner, store, s);
    }
  });
}

}  // namespace sl::cuda
