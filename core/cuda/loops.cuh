// Elementwise launch machinery for CUDA kernels (internal header; device code only).
//
// launch_elementwise<Out, In...>(L, f, stream) runs out = f(in...) over a StridedLayout. When
// every operand is contiguous and aligned it uses 16-byte vector loads and stores (VEC elements
// per thread, VEC = 16 / the widest element); when the operands are contiguous rows with some
// inputs constant along them (a scalar, a bias: Note [Broadcast rows]), vectors likewise;
// otherwise each thread turns its flat index into per-operand byte offsets (32-bit index math
// when the element count allows). Functors take and return storage types (__half,
// __nv_bfloat16, float, ...); dev_types.cuh converts.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "core/cuda/check.h"
#include "core/cuda/dev_types.cuh"
#include "core/cuda/kernels.h"

namespace sl::cuda {

inline constexpr int kBlockThreads = 256;
/// Grid-stride loops cap the grid here (enough blocks to fill any current GPU several times).
inline constexpr int64_t kMaxBlocks = 8192;

inline unsigned grid_for(int64_t work_items) {
  int64_t b = (work_items + kBlockThreads - 1) / kBlockThreads;
  if (b < 1) b = 1;
  if (b > kMaxBlocks) b = kMaxBlocks;
  return static_cast<unsigned>(b);
}

template <class T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

template <class... T>
constexpr int max_size() {
  int m = 1;
  ((m = static_cast<int>(sizeof(T)) > m ? static_cast<int>(sizeof(T)) : m), ...);
  return m;
}

template <int VEC, class Out, class F, class... V>
__device__ __forceinline__ void apply_vec(Vec<Out, VEC>& o, const F& f, const V&... x) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) o.v[j] = f(x.v[j]...);
}

template <int VEC, class F, class Out, class... In>
__global__ void __launch_bounds__(kBlockThreads)
    contiguous_kernel(int64_t n, F f, Out* out, const In*... in) {
  const int64_t nvec = n / VEC;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t v = tid; v < nvec; v += step) {
    Vec<Out, VEC> o;
    apply_vec<VEC>(o, f, reinterpret_cast<const Vec<In, VEC>*>(in)[v]...);
    reinterpret_cast<Vec<Out, VEC>*>(out)[v] = o;
  }
  const int64_t t = nvec * VEC + tid;  // the tail: fewer than VEC elements
  if (tid < VEC && t < n) out[t] = f(in[t]...);
}

/// Byte offsets of flat element i for every operand of L.
template <int N, class Index>
__device__ __forceinline__ void strided_offsets(const StridedLayout<N>& L, Index i,
                                                int64_t (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = 0; d < L.ndim; ++d) {
    Index idx;
    if (d == L.ndim - 1) {
      idx = i;
    } else {
      Index size = static_cast<Index>(L.sizes[d]);
      Index q = i / size;
      idx = i - q * size;
      i = q;
    }
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(idx) * L.strides[k][d];
  }
}

template <class Out, class... In, class F, size_t... I>
__device__ __forceinline__ void apply_strided(const StridedLayout<1 + sizeof...(In)>& L,
                                              const int64_t* off, const F& f,
                                              std::index_sequence<I...>) {
  *reinterpret_cast<Out*>(L.base[0] + off[0]) =
      f(*reinterpret_cast<const In*>(L.base[I + 1] + off[I + 1])...);
}

template <class F, class Out, class... In>
__global__ void __launch_bounds__(kBlockThreads)
    strided_kernel(const __grid_constant__ StridedLayout<1 + sizeof...(In)> L, F f) {
  constexpr int N = 1 + sizeof...(In);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t off[N];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < L.numel;
       i += step) {
    if (L.numel <= INT32_MAX) {
      strided_offsets<N, uint32_t>(L, static_cast<uint32_t>(i), off);
    } else {
      strided_offsets<N, int64_t>(L, i, off);
    }
    apply_strided<Out, In...>(L, off, f, std::index_sequence_for<In...>{});
  }
}

template <int VEC, class Out, class... In, class F, size_t... I>
void launch_contiguous(const StridedLayout<1 + sizeof...(In)>& L, const F& f, cudaStream_t s,
                       std::index_sequence<I...>) {
  contiguous_kernel<VEC, F, Out, In...>
      <<<grid_for((L.numel + VEC - 1) / VEC), kBlockThreads, 0, s>>>(
          L.numel, f, reinterpret_cast<Out*>(L.base[0]),
          reinterpret_cast<const In*>(L.base[I + 1])...);
  CUDA_CHECK_LAUNCH();
}

// ---- rows: contiguous rows with broadcast operands ---------------------------------------------
// Note [Broadcast rows]: the first GPU run measured a scalar operand (x * 1.5: the scalar is a
// 0-d tensor of stride 0) at 45% of the copy bandwidth in float32 and 25% in bfloat16, and a row
// bias ([65536, 1024] + [1024]) at 36% and 19%: both went through strided_kernel, with a division
// per dim per element. A layout of at most 2 coalesced dims where the output and every input are
// either contiguous along the inner dim or constant along it (inner stride 0: a scalar, a bias
// column) runs here instead: VEC elements per thread, one division per vector, 16-byte loads for
// the contiguous operands and one load, repeated, for the constant ones.

/// Inner dim (of `inner_vecs` vectors) and outer dim of a rows layout, byte strides per operand.
template <int N>
struct RowsLayout {
  int64_t inner_vecs = 0, rows = 0;
  int64_t outer[N];    // byte stride between rows
  bool contiguous[N];  // inner stride = element size (else 0)
  char* base[N];
};

template <int VEC, class T>
__device__ __forceinline__ Vec<T, VEC> load_row_vec(const char* row, int64_t col, bool contiguous) {
  if (contiguous) return reinterpret_cast<const Vec<T, VEC>*>(row)[col];
  Vec<T, VEC> r;
  const T x = *reinterpret_cast<const T*>(row);
#pragma unroll
  for (int j = 0; j < VEC; ++j) r.v[j] = x;
  return r;
}

template <int VEC, class Out, class... In, class F, class Index, size_t... I>
__device__ __forceinline__ void rows_step(const RowsLayout<1 + sizeof...(In)>& L, const F& f,
                                          Index v, std::index_sequence<I...>) {
  const Index r = v / static_cast<Index>(L.inner_vecs);
  const Index c = v - r * static_cast<Index>(L.inner_vecs);
  Vec<Out, VEC> o;
  apply_vec<VEC>(o, f,
                 load_row_vec<VEC, In>(L.base[I + 1] + static_cast<int64_t>(r) * L.outer[I + 1],
                                       static_cast<int64_t>(c), L.contiguous[I + 1])...);
  reinterpret_cast<Vec<Out, VEC>*>(L.base[0] + static_cast<int64_t>(r) * L.outer[0])[c] = o;
}

template <int VEC, class F, class Out, class... In>
__global__ void __launch_bounds__(kBlockThreads)
    rows_kernel(const __grid_constant__ RowsLayout<1 + sizeof...(In)> L, F f) {
  const int64_t total = L.rows * L.inner_vecs;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < total;
       v += step) {
    if (total <= INT32_MAX) {
      rows_step<VEC, Out, In...>(L, f, static_cast<uint32_t>(v), std::index_sequence_for<In...>{});
    } else {
      rows_step<VEC, Out, In...>(L, f, v, std::index_sequence_for<In...>{});
    }
  }
}

/// The rows layout of L when it qualifies (Note [Broadcast rows]): at most 2 dims, the inner one
/// a multiple of VEC; the output contiguous along it; each input contiguous or constant along
/// it; every contiguous operand's base and row stride aligned to VEC elements.
template <int VEC, int N>
inline bool rows_layout(const StridedLayout<N>& L, const int (&elem)[N], RowsLayout<N>& R) {
  if (L.ndim > 2 || L.sizes[0] % VEC != 0) return false;
  R.inner_vecs = L.sizes[0] / VEC;
  R.rows = L.ndim == 2 ? L.sizes[1] : 1;
  for (int k = 0; k < N; ++k) {
    const int64_t inner = L.strides[k][0];
    if (inner != elem[k] && (inner != 0 || k == 0)) return false;
    R.contiguous[k] = inner != 0;
    R.outer[k] = L.ndim == 2 ? L.strides[k][1] : 0;
    R.base[k] = L.base[k];
    const int64_t align = static_cast<int64_t>(elem[k]) * VEC;
    if (R.contiguous[k] &&
        (reinterpret_cast<uintptr_t>(L.base[k]) % align != 0 || R.outer[k] % align != 0)) {
      return false;
    }
  }
  return true;
}

/// True when every operand is contiguous (one coalesced dim with unit element stride).
template <int N>
inline bool all_contiguous(const StridedLayout<N>& L, const int (&elem)[N]) {
  if (L.ndim != 1) return false;
  for (int k = 0; k < N; ++k) {
    if (L.strides[k][0] != elem[k] && L.sizes[0] > 1) return false;
  }
  return true;
}

/// Runs out = f(in...) over L on `stream`.
template <class Out, class... In, class F>
void launch_elementwise(const StridedLayout<1 + sizeof...(In)>& L, const F& f,
                        cudaStream_t stream) {
  constexpr int N = 1 + sizeof...(In);
  if (L.numel <= 0) return;
  constexpr int kVec = 16 / max_size<Out, In...>() > 0 ? 16 / max_size<Out, In...>() : 1;
  const int elem[N] = {static_cast<int>(sizeof(Out)), static_cast<int>(sizeof(In))...};
  if (all_contiguous<N>(L, elem)) {
    bool aligned = true;
    for (int k = 0; k < N; ++k) {
      aligned = aligned && reinterpret_cast<uintptr_t>(L.base[k]) % (elem[k] * kVec) == 0;
    }
    if (aligned) {
      launch_contiguous<kVec, Out, In...>(L, f, stream, std::index_sequence_for<In...>{});
      return;
    }
  }
  RowsLayout<N> R;
  if (rows_layout<kVec, N>(L, elem, R)) {
    rows_kernel<kVec, F, Out, In...>
        <<<grid_for(R.rows * R.inner_vecs), kBlockThreads, 0, stream>>>(R, f);
    CUDA_CHECK_LAUNCH();
    return;
  }
  strided_kernel<F, Out, In...><<<grid_for(L.numel), kBlockThreads, 0, stream>>>(L, f);
  CUDA_CHECK_LAUNCH();
}

}  // namespace sl::cuda
