// CUDA kernels of the reduce family: sum, mean, prod, the dispatch of every reduction, and
// cumsum.
#include "core/cuda/reduce.cuh"

namespace sl::cuda {
namespace {

template <class T>
struct ProdPolicy {
  using Acc = sum_acc_t<T>;
  __device__ Acc identity() const { return Acc(1); }
  __device__ Acc map(T v, int64_t, int64_t) const { return static_cast<Acc>(to_comp(v)); }
  __device__ Acc combine(Acc a, Acc b) const { return a * b; }
};

/// out[i] = acc (sum, prod) or acc / R (mean), converted like the CPU kernel.
template <class Acc, class O>
struct SumStore {
  O* out;
  bool mean;
  int64_t R;
  __device__ void operator()(int64_t i, Acc acc) const {
    if (mean) {
      out[i] = convert<O>(static_cast<double>(acc_value(acc)) / static_cast<double>(R));
    } else {
      out[i] = convert<O>(acc_value(acc));
    }
  }
};

// cumsum: rows (inner == 1) scan in tiles of kBlockThreads * kScanItems elements; columns walk
// R in order, one thread per column.
constexpr int kScanItems = 4;

template <class T, class Acc>
__global__ void __launch_bounds__(kBlockThreads)
    cumsum_rows_kernel(const T* in, T* out, int64_t rows, int64_t R) {
  __shared__ Acc totals[kBlockThreads];
  constexpr int64_t kTile = static_cast<int64_t>(kBlockThreads) * kScanItems;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = in + row * R;
    T* y = out + row * R;
    Acc carry = 0;
    for (int64_t tile = 0; tile < R; tile += kTile) {
      Acc local[kScanItems];
      Acc run = 0;
      const int64_t first = tile + static_cast<int64_t>(threadIdx.x) * kScanItems;
#pragma unroll
      for (int j = 0; j < kScanItems; ++j) {
        int64_t r = first + j;
        if (r < R) run += static_cast<Acc>(to_comp(x[r]));
        local[j] = run;
      }
      totals[threadIdx.x] = run;
      __syncthreads();
      // inclusive Hillis-Steele scan of the per-thread totals
      for (int off = 1; off < kBlockThreads; off *= 2) {
        Acc add = threadIdx.x >= static_cast<unsigned>(off) ? totals[threadIdx.x - off] : Acc(0);
        __syncthreads();
        totals[threadIdx.x] += add;
        __syncthreads();
      }
      const Acc before = carry + (threadIdx.x > 0 ? totals[threadIdx.x - 1] : Acc(0));
#pragma unroll
      for (int j = 0; j < kScanItems; ++j) {
        int64_t r = first + j;
        if (r < R) y[r] = convert<T>(acc_value(static_cast<Acc>(before + local[j])));
      }
      carry += totals[kBlockThreads - 1];
      __syncthreads();
    }
  }
}

template <class T, class Acc>
__global__ void __launch_bounds__(kBlockThreads)
    cumsum_cols_kernel(const T* in, T* out, int64_t outer, int64_t R, int64_t inner) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < outer * inner;
       t += step) {
    const int64_t base = (t / inner) * R * inner + t % inner;
    Acc s = 0;
    for (int64_t r = 0; r < R; ++r) {
      s += static_cast<Acc>(to_comp(in[base + r * inner]));
      out[base + r * inner] = convert<T>(acc_value(s));
    }
  }
}

}  // namespace

DType reduce_out_dtype(ReduceCode op, DType in) {
  if (op == ReduceCode::all || op == ReduceCode::any) return DType::b8;
  if (is_floating(in)) return in;
  if (op == ReduceCode::sum || op == ReduceCode::prod) return DType::i64;
  return in;
}

void launch_reduce(ReduceCode op, DType dt, const void* in, void* out, int64_t outer, int64_t R,
                   int64_t inner, int64_t correction, double p, cudaStream_t s) {
  switch (op) {
    case ReduceCode::sum:
    case ReduceCode::mean:
    case ReduceCode::prod:
      return launch_reduce_sum(op, dt, in, out, outer, R, inner, s);
    case ReduceCode::max:
    case ReduceCode::min:
      return launch_reduce_minmax(op, dt, in, out, outer, R, inner, s);
    default:
      return launch_reduce_stats(op, dt, in, out, outer, R, inner, correction, p, s);
  }
}

void launch_reduce_sum(ReduceCode op, DType dt, const void* in, void* out, int64_t outer, int64_t R,
                       int64_t inner, cudaStream_t s) {
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = sum_acc_t<T>;
    using O = std::conditional_t<is_float_v<T>, T, int64_t>;
    const T* x = static_cast<const T*>(in);
    SumStore<Acc, O> store{static_cast<O*>(out), op == ReduceCode::mean, R};
    if (op == ReduceCode::prod) {
      run_reduction(ProdPolicy<T>{}, x, outer, R, inner, store, s);
    } else {
      if constexpr (!is_float_v<T>) {
        if (op == ReduceCode::mean) {
          ::sl::detail::throw_error<DTypeError>("mean: expected a floating input on CUDA");
        }
      }
      run_reduction(SumPolicy<T>{}, x, outer, R, inner, store, s);
    }
  });
}

void launch_cumsum(DType dt, const void* in, void* out, int64_t outer, int64_t R, int64_t inner,
                   cudaStream_t s) {
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!is_float_v<T> && !std::is_same_v<T, int64_t>) {
      ::sl::detail::throw_error<DTypeError>("cumsum: expected a floating or int64 input on CUDA");
    } else {
      using Acc = sum_acc_t<T>;
      const T* x = static_cast<const T*>(in);
      T* y = static_cast<T*>(out);
      if (inner == 1) {
        int64_t blocks = outer < kMaxBlocks ? outer : kMaxBlocks;
        cumsum_rows_kernel<T, Acc>
            <<<static_cast<unsigned>(blocks), kBlockThreads, 0, s>>>(x, y, outer, R);
      } else {
        cumsum_cols_kernel<T, Acc>
            <<<grid_for(outer * inner), kBlockThreads, 0, s>>>(x, y, outer, R, inner);
      }
      CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace sl::cuda
