// gelu's fast form on 32 floats at a time, in AVX2 + FMA intrinsics (internal header; only the
// -mavx2 -mfma build of Note [CPU ISA dispatch] includes it).
//
// Note [Interleaved gelu]
// The compiler vectorises math::f32::gelu_fast as one 8-float vector per loop iteration, in
// program order. Each vector is a chain of about 30 dependent operations (a^2 / 2, exp's range
// reduction and polynomial, then R's division and polynomial), each with a latency of 3-4 cycles,
// and the out-of-order window does not reach far enough into the next iterations to keep both FMA
// units busy: in cache it took 0.90-0.98 ns per float on the development machine, where its ~25
// multiplies and FMAs per vector need about 0.55. gelu_fast_x32 issues every step for 4 vectors
// before the next step, so 4 independent chains are always in flight: 0.78-0.87 ns per float in
// the same standalone loop, median of 100,000 passes over 4096 floats.
//
// It performs the scalar form's operations in the scalar form's order, with an FMA exactly where
// the scalar form, compiled with -ffp-contract=fast, contracts one (a * b + c, and -a - b * c as
// one fnmsub). So it gives the same bits as gelu_fast, which tests/core/test_cpu_math.cpp checks:
// all-fast blocks run through this function, mixed blocks and strided elements through the scalar
// form, and the results must match bit for bit.
#pragma once

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "core/cpu/math.h"

namespace sl::cpu {
inline namespace SL_CPU_ISA {  // Note [CPU ISA dispatch]
namespace math::f32 {

/// Vectors of 8 floats that gelu_fast_x32 interleaves.
inline constexpr int kGeluInterleave = 4;

/// o[i] = gelu_fast(x[i]) for i in [0, 32): every x[i] must satisfy |x[i]| <= kGeluFastMax.
/// o may equal x; otherwise the ranges must not overlap. No alignment needed.
inline void gelu_fast_x32(const float* x, float* o) {
  constexpr int K = kGeluInterleave;
#define SL_EACH _Pragma("GCC unroll 4") for (int k = 0; k < K; ++k)
  const auto splat = [](float v) { return _mm256_set1_ps(v); };
  __m256 X[K], A[K], HI[K], LO[K], SH[K], N[K], R[K], P[K], G[K], U[K], Q[K];
  SL_EACH X[k] = _mm256_loadu_ps(x + 8 * k);
  SL_EACH A[k] = _mm256_and_ps(X[k], _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
  // two_prod(0.5 a, a): hi = a^2 / 2 rounded, lo its error
  SL_EACH P[k] = _mm256_mul_ps(splat(0.5f), A[k]);
  SL_EACH HI[k] = _mm256_mul_ps(P[k], A[k]);
  SL_EACH LO[k] = _mm256_fmsub_ps(P[k], A[k], HI[k]);
  // exp_neg_normal(hi, lo)
  SL_EACH SH[k] = _mm256_fmadd_ps(HI[k], splat(-kLog2e), splat(kRoundShift));
  SL_EACH N[k] = _mm256_sub_ps(SH[k], splat(kRoundShift));
  SL_EACH R[k] = _mm256_fnmsub_ps(N[k], splat(kLn2Hi), HI[k]);  // -hi - n kLn2Hi
  SL_EACH R[k] = _mm256_fnmadd_ps(N[k], splat(kLn2Lo), R[k]);   // r - n kLn2Lo
  SL_EACH R[k] = _mm256_sub_ps(R[k], LO[k]);
  SL_EACH P[k] = _mm256_fmadd_ps(splat(kExpPoly[0]), R[k], splat(kExpPoly[1]));
#pragma GCC unroll 8
  for (int j = 2; j < 6; ++j) {
    SL_EACH P[k] = _mm256_fmadd_ps(P[k], R[k], splat(kExpPoly[j]));
  }
  SL_EACH G[k] = _mm256_mul_ps(R[k], R[k]);
  SL_EACH P[k] = _mm256_fmadd_ps(P[k], G[k], R[k]);
  SL_EACH P[k] = _mm256_add_ps(P[k], splat(1.0f));
  SL_EACH G[k] = _mm256_castsi256_ps(_mm256_add_epi32(
      _mm256_castps_si256(P[k]), _mm256_slli_epi32(_mm256_castps_si256(SH[k]), 23)));
  // u = t - 0.59 and R(u)
  SL_EACH U[k] = _mm256_div_ps(_mm256_fmadd_ps(splat(kGeluUNum[0]), A[k], splat(kGeluUNum[1])),
                               _mm256_fmadd_ps(splat(kGeluUDen), A[k], splat(1.0f)));
  SL_EACH Q[k] = _mm256_fmadd_ps(splat(kGeluR[0]), U[k], splat(kGeluR[1]));
#pragma GCC unroll 8
  for (int j = 2; j < 9; ++j) {
    SL_EACH Q[k] = _mm256_fmadd_ps(Q[k], U[k], splat(kGeluR[j]));
  }
  // x T(a); x T for x <= 0 (sign bit set, -0 included), x - x T above
  SL_EACH Q[k] = _mm256_mul_ps(X[k], _mm256_mul_ps(G[k], Q[k]));
  SL_EACH _mm256_storeu_ps(o + 8 * k, _mm256_blendv_ps(_mm256_sub_ps(X[k], Q[k]), Q[k], X[k]));
#undef SL_EACH
}

}  // namespace math::f32
}  // namespace SL_CPU_ISA
}  // namespace sl::cpu
#endif
