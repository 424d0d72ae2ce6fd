// The fused attention forward kernel: softmax(scale * q k^T + mask) v without the scores ever
// leaving the chip.
//
// Note [Fused attention kernel]
// One block of 128 threads takes kRows = 32 queries of one (a, b) pair. Their rows of q sit in
// shared memory; the keys and values stream through it kCols at a time (32 when the head dims
// fit 64, 16 when they fit 128, so that the block's shared memory stays under 48 KiB). Four
// neighbouring threads own one query row: each computes the scores of every fourth key of the
// tile, and holds every fourth column of the row's output accumulator. The softmax is online
// (Milakov and Gimelshein, arXiv 1805.02867): per row a running maximum m and a running sum l of
// exp(score - m); a tile that raises the maximum first multiplies l and the accumulator by
// exp(m_old - m_new). At the end out = acc / l. Everything is computed in float, whatever the
// storage dtype; each output is rounded once.
//
// Masks follow Note [Attention masks] (core/ops/attention.h): a position that is masked, beyond S,
// or causally after the query scores -inf and gets weight 0. A row with every position masked
// ends with l = 0 and acc = 0 and so gives 0 / 0 = NaN, like PyTorch and the unfused path. With
// is_causal a block stops at the last key its last query may see.
//
// The unfused path (scores, the attention softmax kernel, then a second product) stays the
// reference: the two differ by rounding only (the scores here are not rounded to the storage
// dtype, and the sums run in another order). Not used for float64, or for head dims over 128:
// generic code then computes the same attention in blocks of queries (core/ops/attention_fused.cpp).
#include <cmath>

#include "core/cuda/device_math.cuh"
#include "core/cuda/float_kernels.cuh"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/loops.cuh"

namespace sl::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kRows = 32;                         // queries per block
constexpr int kGroup = kThreads / kRows;          // threads per query row
static_assert(kGroup == 4, "the shuffles below reduce over groups of 4 lanes");

struct MaskArgs {
  const void* ptr;  // null: no mask
  int64_t ma, mb, ml, ms;
};

/// The group-of-4 reductions: lanes 4r .. 4r+3 of a warp own one row.
__device__ __forceinline__ float group4_max(float v) {
  for (int o = 1; o < kGroup; o *= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}
__device__ __forceinline__ float group4_sum(float v) {
  for (int o = 1; o < kGroup; o *= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// D: the padded head dim (64 or 128); C: keys per tile; M: the mask's element type (bool, T or
/// float; ignored without a mask).
template <int D, int C, class T, class M>
__global__ void __launch_bounds__(kThreads)
    fused_attention_fwd(T* __restrict__ out, const T* __restrict__ q, const T* __restrict__ k,
                        const T* __restrict__ v, MaskArgs mk, int64_t B, int64_t L, int64_t S,
                        int E, int Ev, int64_t q_tiles, bool causal, float sc) {
  __shared__ float qs[kRows][D + 1];
  __shared__ float ks[C][D + 1];
  __shared__ float vs[C][D + 1];
  __shared__ float ps[kRows][C + 1];
  constexpr int kKeysPerThread = C / kGroup;
  constexpr int kColsPerThread = D / kGroup;

  const int tid = static_cast<int>(threadIdx.x);
  const int r = tid / kGroup, sub = tid % kGroup;
  const int64_t n = static_cast<int64_t>(blockIdx.x) / q_tiles;
  const int64_t q0 = (static_cast<int64_t>(blockIdx.x) % q_tiles) * kRows;
  const int64_t i = q0 + r;  // this thread's query
  const bool row_valid = i < L;

  const T* qn = q + n * L * E;
  const T* kn = k + n * S * E;
  const T* vn = v + n * S * Ev;
  for (int idx = tid; idx < kRows * E; idx += kThreads) {
    const int rr = idx / E, e = idx % E;
    qs[rr][e] = q0 + rr < L ? to_comp(qn[(q0 + rr) * E + e]) : 0.f;
  }
  const M* mrow = nullptr;
  if (mk.ptr && row_valid) {
    mrow = static_cast<const M*>(mk.ptr) + (n / B) * mk.ma + (n % B) * mk.mb + i * mk.ml;
  }

  float m = -INFINITY, l = 0.f;
  float acc[kColsPerThread];
#pragma unroll
  for (int c = 0; c < kColsPerThread; ++c) acc[c] = 0.f;

  // with is_causal no query of this block sees a key past its last query
  const int64_t q_last = (q0 + kRows < L ? q0 + kRows : L) - 1;
  const int64_t s_end = causal ? (q_last + 1 < S ? q_last + 1 : S) : S;
  for (int64_t j0 = 0; j0 < s_end; j0 += C) {
    __syncthreads();  // the previous tile's keys and values are no longer read
    for (int idx = tid; idx < C * E; idx += kThreads) {
      const int c = idx / E, e = idx % E;
      ks[c][e] = j0 + c < S ? to_comp(kn[(j0 + c) * E + e]) : 0.f;
    }
    for (int idx = tid; idx < C * Ev; idx += kThreads) {
      const int c = idx / Ev, e = idx % Ev;
      vs[c][e] = j0 + c < S ? to_comp(vn[(j0 + c) * Ev + e]) : 0.f;
    }
    __syncthreads();

    float s[kKeysPerThread];
    float tile_max = -INFINITY;
#pragma unroll
    for (int t = 0; t < kKeysPerThread; ++t) {
      const int c = sub + t * kGroup;
      const int64_t j = j0 + c;
      float x = -INFINITY;
      if (row_valid && j < S && !(causal && j > i)) {
        float dot = 0.f;
        for (int e = 0; e < E; ++e) dot = fmaf(qs[r][e], ks[c][e], dot);
        x = dot * sc;
        if (mrow) {
          if constexpr (std::is_same_v<M, bool>) {
            if (!mrow[j * mk.ms]) x = -INFINITY;
          } else {
            x = x + to_comp(mrow[j * mk.ms]);
          }
        }
      }
      s[t] = x;
      tile_max = x > tile_max ? x : tile_max;
    }
    tile_max = group4_max(tile_max);
    const float m_new = tile_max > m ? tile_max : m;
    // while every position so far is masked, m_new is -inf: weights 0, nothing to rescale
    const bool none = m_new == -INFINITY;
    const float corr = none ? 1.f : dmath::exp(m - m_new);
    float psum = 0.f;
#pragma unroll
    for (int t = 0; t < kKeysPerThread; ++t) {
      // a NaN score (NaN input, or a NaN additive mask) makes the row NaN as in the unfused
      // softmax: exp(NaN - m) is NaN, and while m_new is -inf it must not become a 0 weight
      const float p = none ? (s[t] != s[t] ? s[t] : 0.f) : dmath::exp(s[t] - m_new);
      ps[r][sub + t * kGroup] = p;
      psum += p;
    }
    l = l * corr + group4_sum(psum);
    m = m_new;
    __syncwarp();  // a row's weights were written by its own 4 lanes, all in this warp
#pragma unroll
    for (int c = 0; c < kColsPerThread; ++c) {
      const int e = sub + c * kGroup;
      float a = acc[c] * corr;
      if (e < Ev) {
        for (int t = 0; t < C; ++t) a = fmaf(ps[r][t], vs[t][e], a);
      }
      acc[c] = a;
    }
  }
  if (!row_valid) return;
  T* orow = out + (n * L + i) * Ev;
  const float inv = 1.f / l;
#pragma unroll
  for (int c = 0; c < kColsPerThread; ++c) {
    const int e = sub + c * kGroup;
    // l = 0: every position masked, NaN as the unfused path gives
    if (e < Ev) orow[e] = convert<T>(l == 0.f ? NAN : acc[c] * inv);
  }
}

template <class T, class M>
void run(void* out, const void* q, const void* k, const void* v, const MaskArgs& mk, int64_t A,
         int64_t B, int64_t L, int64_t S, int64_t E, int64_t Ev, bool causal, double scale,
         cudaStream_t s) {
  const int64_t q_tiles = (L + kRows - 1) / kRows;
  const int64_t blocks = A * B * q_tiles;
  SL_CHECK_SHAPE(blocks <= 0x7fffffff, "fused attention: ", A * B, " x ", q_tiles,
                 " query tiles exceed the grid's limit");
  const auto grid = static_cast<unsigned>(blocks);
  T* o = static_cast<T*>(out);
  const T* qp = static_cast<const T*>(q);
  const T* kp = static_cast<const T*>(k);
  const T* vp = static_cast<const T*>(v);
  const float sc = static_cast<float>(scale);
  const int e = static_cast<int>(E), ev = static_cast<int>(Ev);
  if (E <= 64 && Ev <= 64) {
    fused_attention_fwd<64, 32, T, M>
        <<<grid, kThreads, 0, s>>>(o, qp, kp, vp, mk, B, L, S, e, ev, q_tiles, causal, sc);
  } else {
    fused_attention_fwd<128, 16, T, M>
        <<<grid, kThreads, 0, s>>>(o, qp, kp, vp, mk, B, L, S, e, ev, q_tiles, causal, sc);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_attention_fused_forward(DType dt, void* out, const void* q, const void* k,
                                    const void* v, const void* mask, DType mask_dt, int64_t A,
                                    int64_t B, int64_t L, int64_t S, int64_t E, int64_t Ev,
                                    int64_t ma, int64_t mb, int64_t ml, int64_t ms, bool causal,
                                    double scale, cudaStream_t s) {
  const char* op = "fused attention";
  SL_CHECK_DTYPE(dt == DType::f32 || dt == DType::f16 || dt == DType::bf16, op,
                 ": expected float32, float16 or bfloat16, got ", dtype_name(dt));
  SL_CHECK_SHAPE(E >= 1 && Ev >= 1 && E <= kFusedAttentionMaxHeadDim &&
                     Ev <= kFusedAttentionMaxHeadDim,
                 op, ": head dims E = ", E, " and Ev = ", Ev, " must be in [1, ",
                 kFusedAttentionMaxHeadDim, "]");
  const bool half = dt == DType::f16 || dt == DType::bf16;
  SL_CHECK_DTYPE(!mask || mask_dt == DType::b8 || mask_dt == dt || (half && mask_dt == DType::f32),
                 op, ": mask of dtype ", dtype_name(mask_dt), " beside inputs of dtype ",
                 dtype_name(dt), " (expected bool, ", dtype_name(dt),
                 ", or float32 beside 16-bit inputs)");
  const MaskArgs mk{mask, ma, mb, ml, ms};
  visit_float(dt, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      SL_ASSERT(false);  // excluded above
    } else {
      if (mask && mask_dt == DType::b8) {
        run<T, bool>(out, q, k, v, mk, A, B, L, S, E, Ev, causal, scale, s);
      } else if (mask && mask_dt == DType::f32) {
        run<T, float>(out, q, k, v, mk, A, B, L, S, E, Ev, causal, scale, s);
      } else {
        run<T, T>(out, q, k, v, mk, A, B, L, S, E, Ev, causal, scale, s);
      }
    }
  });
}

}  // namespace sl::cuda
