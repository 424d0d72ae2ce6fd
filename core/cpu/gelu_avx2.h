// gelu's fast form on 32 floats at a time, in AVX2 + FMA intrinsics (internal header; the
// -mavx2 -mfma build of Note [CPU ISA dispatch] uses it). The AVX-512 build does not: there the
// compiler's loop over gelu_fast, 16 floats per vector, was faster than this 8-float block
// (62% of memcpy against 54%, bench_core at 1 thread on a Xeon family 6 model 207).
//
// Note [Interleaved gelu]
// The compiler vectorises math::f32::gelu_fast as one 8-float vector per loop iteration, in
// program order. Each vector is a chain of about 30 dependent operations (a^2, exp's range
// reduction and polynomial, then R's division and polynomial), each with a latency of 3-4 cycles,
// which the out-of-order window overlaps only partly with the next iterations. gelu_fast_x32
// issues every step for 4 vectors before the next step, so 4 independent chains are in flight,
// and checks the domain on the vectors it has loaded (Note [Gelu fast domain]) instead of in a
// separate pass. Measured in one process on the development machine (16384 floats, so in L2;
// medians of 200 alternating passes): the kernel's old path, a domain pass then the compiler's
// loop, 1.10 ns per float; the same operations interleaved, 0.97-0.99 plus the pass; with the
// folded 1/2 and the 8-coefficient R of math.h, 0.92-0.95; all of it with the check in here,
// 0.96.
//
// It performs the scalar form's operations in the scalar form's order, with an FMA exactly where
// the scalar form writes one out (math::f32::madd; the scalar form leaves no product next to a
// sum for the compiler to contract, so this holds at every optimisation level: at -O1, where
// contraction is rare, the sanitizer build found the bits apart before that was so). So it gives
// the same bits as gelu_fast, which tests/core/test_cpu_math.cpp checks:
// all-fast blocks run through this function, mixed blocks and strided elements through the scalar
// form, and the results must match bit for bit.
#pragma once

#include <cstddef>

#include "core/cpu/isa.h"

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#include <immintrin.h>

#include "core/cpu/loops.h"
#include "core/cpu/math.h"

namespace sl::cpu {
inline namespace SL_CPU_ISA {  // Note [CPU ISA dispatch]
namespace math::f32 {

/// Vectors of 8 floats that gelu_fast_x32 interleaves.
inline constexpr int kGeluInterleave = 4;
static_assert(kFastDomainBlock == 8 * kGeluInterleave, "the fast block is the loop's block");

/// When |x[i]| <= kGeluFastMax for every i in [0, 32) (NaN is not), sets o[i] = gelu_fast(x[i])
/// and returns true; otherwise writes nothing and returns false. The check costs 4 operations on
/// the loaded vectors, against about 12 for a separate pass that reduces the block's largest |x|
/// to a scalar (10% of the kernel's time when measured). o may equal x; otherwise the ranges must
/// not overlap. No alignment needed.
inline bool gelu_fast_x32(const float* x, float* o) {
  constexpr int K = kGeluInterleave;
  static_assert(K == 4);
#define SL_EACH _Pragma("GCC unroll 4") for (int k = 0; k < K; ++k)
  const auto splat = [](float v) { return _mm256_set1_ps(v); };
  __m256 X[K], A[K], S[K], LO[K], SH[K], N[K], R[K], P[K], G[K], U[K], Q[K];
  SL_EACH X[k] = _mm256_loadu_ps(x + 8 * k);
  SL_EACH A[k] = _mm256_and_ps(X[k], _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
  // the domain: |x| as bits (NaN above inf above kGeluFastMax), largest of each lane, compared
  const auto bits = [](__m256 v) { return _mm256_castps_si256(v); };
  const __m256i top = _mm256_max_epu32(_mm256_max_epu32(bits(A[0]), bits(A[1])),
                                       _mm256_max_epu32(bits(A[2]), bits(A[3])));
  const __m256i bound = _mm256_set1_epi32(static_cast<int32_t>(to_bits(kGeluFastMax)));
  if (!_mm256_testz_si256(_mm256_cmpgt_epi32(top, bound), _mm256_cmpgt_epi32(top, bound))) {
    return false;  // both non-negative as int32 (sign bit cleared), so a signed compare is right
  }
  // square_split(a): s = a^2 rounded, lo its error
  SL_EACH S[k] = _mm256_mul_ps(A[k], A[k]);
  SL_EACH LO[k] = _mm256_fmsub_ps(A[k], A[k], S[k]);
  // twice_exp_neg_half(s, lo)
  SL_EACH SH[k] = _mm256_fmadd_ps(S[k], splat(-0.5f * kLog2e), splat(kRoundShift));
  SL_EACH N[k] = _mm256_sub_ps(SH[k], splat(kRoundShift));
  SL_EACH R[k] = _mm256_fnmsub_ps(N[k], splat(2.0f * kLn2Hi), S[k]);  // -s - n 2 kLn2Hi
  SL_EACH R[k] = _mm256_fnmadd_ps(N[k], splat(2.0f * kLn2Lo), R[k]);  // r - n 2 kLn2Lo
  SL_EACH R[k] = _mm256_sub_ps(R[k], LO[k]);
  SL_EACH P[k] = _mm256_fmadd_ps(splat(kExpPolyHalf[0]), R[k], splat(kExpPolyHalf[1]));
#pragma GCC unroll 8
  for (int j = 2; j < 6; ++j) {
    SL_EACH P[k] = _mm256_fmadd_ps(P[k], R[k], splat(kExpPolyHalf[j]));
  }
  SL_EACH G[k] = _mm256_mul_ps(R[k], R[k]);
  SL_EACH P[k] = _mm256_fmadd_ps(P[k], G[k], R[k]);
  SL_EACH P[k] = _mm256_add_ps(P[k], splat(2.0f));
  SL_EACH G[k] = _mm256_castsi256_ps(_mm256_add_epi32(
      _mm256_castps_si256(P[k]), _mm256_slli_epi32(_mm256_castps_si256(SH[k]), 23)));
  // u = t - 1/2 and R(u) / 2
  SL_EACH U[k] = _mm256_div_ps(_mm256_fmadd_ps(splat(kGeluUNum[0]), A[k], splat(kGeluUNum[1])),
                               _mm256_fmadd_ps(splat(kGeluUDen), A[k], splat(1.0f)));
  SL_EACH Q[k] = _mm256_fmadd_ps(splat(kGeluRHalf[0]), U[k], splat(kGeluRHalf[1]));
#pragma GCC unroll 8
  for (int j = 2; j < 8; ++j) {
    SL_EACH Q[k] = _mm256_fmadd_ps(Q[k], U[k], splat(kGeluRHalf[j]));
  }
  // T(a) = (2 exp(-a^2 / 2)) (R / 2); x T for x <= 0 (sign bit set, -0 included), x - x T above
  SL_EACH Q[k] = _mm256_mul_ps(G[k], Q[k]);
  SL_EACH _mm256_storeu_ps(o + 8 * k, _mm256_blendv_ps(_mm256_fnmadd_ps(X[k], Q[k], X[k]),
                                                       _mm256_mul_ps(X[k], Q[k]), X[k]));
#undef SL_EACH
  return true;
}

/// The fast block that gelu's loop passes to unary_loop_fast_domain (core/cpu/loops.h).
inline constexpr auto kGeluFastBlock = [](const float* x, float* o) { return gelu_fast_x32(x, o); };

}  // namespace math::f32
}  // namespace SL_CPU_ISA
}  // namespace sl::cpu
#else
namespace sl::cpu {
inline namespace SL_CPU_ISA {  // Note [CPU ISA dispatch]
namespace math::f32 {
/// Without AVX2 + FMA, or with AVX-512, there is no fast block: unary_loop_fast_domain's own
/// domain pass and the compiler's vectorised loop run instead.
inline constexpr std::nullptr_t kGeluFastBlock = nullptr;
}  // namespace math::f32
}  // namespace SL_CPU_ISA
}  // namespace sl::cpu
#endif
