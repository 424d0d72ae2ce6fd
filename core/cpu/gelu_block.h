// gelu's fast form on a block of floats at a time, in AVX2 + FMA or AVX-512 intrinsics (internal
// header; the -mavx2 -mfma and AVX-512 builds of Note [CPU ISA dispatch] use it).
//
// Note [Interleaved gelu]
// The compiler vectorises math::f32::gelu_fast as one vector per loop iteration, in program
// order. Each vector is a chain of about 30 dependent operations (a^2, exp's range reduction and
// polynomial, then R's division and polynomial), each with a latency of 3-4 cycles, which the
// out-of-order window overlaps only partly with the next iterations. gelu_fast_block issues every
// step for 4 vectors before the next step, so 4 independent chains are in flight, and checks the
// domain on the vectors it has loaded (Note [Gelu fast domain]) instead of in a separate pass.
// - AVX2 (8-float vectors, 32-float blocks), measured in one process on a Zen 3 (16384 floats,
//   so in L2; medians of 200 alternating passes): a domain pass then the compiler's loop, 1.10 ns
//   per float; the same operations interleaved, 0.97-0.99 plus the pass; with the folded 1/2 and
//   the 8-coefficient R of math.h, 0.92-0.95; all of it with the check in here, 0.96.
// - AVX-512 (16-float vectors, 64-float blocks, the check on mask registers), measured on a Xeon
//   family 6 model 207 the same way: the compiler's loop 0.82 ns per float in L2, interleaved
//   by 4 0.75, by 2 (a 32-float block) 0.88, by 8 0.78. The division is the costliest step:
//   replaced by a multiplication (wrong, as a bound) the interleaved form took 0.63.
// Out of cache, the loop around the block prefetches its input (Note [Elementwise prefetch] in
// core/cpu/loops.h).
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
#include <cstdint>

#include "core/cpu/isa.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "core/cpu/loops.h"
#include "core/cpu/math.h"

namespace sl::cpu {
inline namespace SL_CPU_ISA {  // Note [CPU ISA dispatch]
namespace math::f32 {

/// The operations both widths spell alike, from the intrinsics' prefix (_mm256 or _mm512).
// clang-format off
#define SL_GELU_VEC_COMMON_OPS(P)                                           \
  static V splat(float v) { return P##_set1_ps(v); }                        \
  static V load(const float* p) { return P##_loadu_ps(p); }                 \
  static void store(float* p, V v) { P##_storeu_ps(p, v); }                 \
  static V mul(V a, V b) { return P##_mul_ps(a, b); }                       \
  static V add(V a, V b) { return P##_add_ps(a, b); }                       \
  static V sub(V a, V b) { return P##_sub_ps(a, b); }                       \
  static V div(V a, V b) { return P##_div_ps(a, b); }                       \
  static V fmadd(V a, V b, V c) { return P##_fmadd_ps(a, b, c); }           \
  static V fmsub(V a, V b, V c) { return P##_fmsub_ps(a, b, c); }           \
  static V fnmadd(V a, V b, V c) { return P##_fnmadd_ps(a, b, c); }         \
  static V fnmsub(V a, V b, V c) { return P##_fnmsub_ps(a, b, c); }
// clang-format on

/// The vector operations gelu_fast_block needs, for one vector width: each is one instruction
/// and rounds as its scalar counterpart in math.h does (fmadd(a, b, c) = madd(a, b, c)).
#if defined(__AVX512F__)
struct GeluVec {
  using V = __m512;
  static constexpr int kLanes = 16;
  SL_GELU_VEC_COMMON_OPS(_mm512)
  static V abs(V v) { return _mm512_abs_ps(v); }
  /// True when some lane of some vector has |x| > bound or is NaN (a = |x|).
  template <int K>
  static bool any_outside(const V (&a)[K], float bound) {
    __mmask16 out = 0;
    for (int k = 0; k < K; ++k) out |= _mm512_cmp_ps_mask(a[k], splat(bound), _CMP_NLE_UQ);
    return out != 0;
  }
  /// The bits of p plus those of sh shifted left by 23 (2^n scaling, as from_bits in math.h).
  static V add_shifted_exponent(V p, V sh) {
    // a vector shift, not _mm512_slli_epi32, whose "undefined" pass-through operand draws
    // GCC 12's -Wmaybe-uninitialized; the same instruction either way
    const __v16su shifted = reinterpret_cast<__v16su>(_mm512_castps_si512(sh)) << 23;
    return _mm512_castsi512_ps(
        _mm512_add_epi32(_mm512_castps_si512(p), reinterpret_cast<__m512i>(shifted)));
  }
  /// if_neg where x's sign bit is set, otherwise if_pos.
  static V select_sign(V x, V if_neg, V if_pos) {
    return _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(x)), if_pos, if_neg);
  }
};
#else
struct GeluVec {
  using V = __m256;
  static constexpr int kLanes = 8;
  SL_GELU_VEC_COMMON_OPS(_mm256)
  static V abs(V v) { return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
  /// True when some lane of some vector has |x| > bound or is NaN (a = |x|): |x| as bits orders
  /// NaN above inf above the bound; the lanes' largest is compared as signed int32, right since
  /// the sign bits are clear.
  template <int K>
  static bool any_outside(const V (&a)[K], float bound) {
    __m256i top = _mm256_castps_si256(a[0]);
    for (int k = 1; k < K; ++k) top = _mm256_max_epu32(top, _mm256_castps_si256(a[k]));
    const __m256i gt =
        _mm256_cmpgt_epi32(top, _mm256_set1_epi32(static_cast<int32_t>(to_bits(bound))));
    return !_mm256_testz_si256(gt, gt);
  }
  static V add_shifted_exponent(V p, V sh) {
    return _mm256_castsi256_ps(
        _mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_castps_si256(sh), 23)));
  }
  static V select_sign(V x, V if_neg, V if_pos) { return _mm256_blendv_ps(if_pos, if_neg, x); }
};
#endif
#undef SL_GELU_VEC_COMMON_OPS

/// Vectors that gelu_fast_block interleaves.
inline constexpr int kGeluInterleave = 4;
static_assert(kFastDomainBlock == GeluVec::kLanes * kGeluInterleave,
              "the fast block is the loop's block");

/// When |x[i]| <= kGeluFastMax for every i in [0, kFastDomainBlock) (NaN is not), sets o[i] =
/// gelu_fast(x[i]) and returns true; otherwise writes nothing and returns false. The check costs a
/// few operations on the loaded vectors, against about 12 for a separate pass that reduces the
/// block's largest |x| to a scalar (10% of the kernel's time when measured). o may equal x;
/// otherwise the ranges must not overlap. No alignment needed.
inline bool gelu_fast_block(const float* x, float* o) {
  using G = GeluVec;
  using V = G::V;
  constexpr int K = kGeluInterleave;
  constexpr int L = G::kLanes;
#define SL_EACH _Pragma("GCC unroll 4") for (int k = 0; k < K; ++k)
  V X[K], A[K], S[K], LO[K], SH[K], N[K], R[K], P[K], Q[K], U[K];
  SL_EACH X[k] = G::load(x + L * k);
  SL_EACH A[k] = G::abs(X[k]);
  if (G::any_outside(A, kGeluFastMax)) return false;
  // square_split(a): s = a^2 rounded, lo its error
  SL_EACH S[k] = G::mul(A[k], A[k]);
  SL_EACH LO[k] = G::fmsub(A[k], A[k], S[k]);
  // twice_exp_neg_half(s, lo)
  SL_EACH SH[k] = G::fmadd(S[k], G::splat(-0.5f * kLog2e), G::splat(kRoundShift));
  SL_EACH N[k] = G::sub(SH[k], G::splat(kRoundShift));
  SL_EACH R[k] = G::fnmsub(N[k], G::splat(2.0f * kLn2Hi), S[k]);  // -s - n 2 kLn2Hi
  SL_EACH R[k] = G::fnmadd(N[k], G::splat(2.0f * kLn2Lo), R[k]);  // r - n 2 kLn2Lo
  SL_EACH R[k] = G::sub(R[k], LO[k]);
  SL_EACH P[k] = G::fmadd(G::splat(kExpPolyHalf[0]), R[k], G::splat(kExpPolyHalf[1]));
#pragma GCC unroll 8
  for (int j = 2; j < 6; ++j) {
    SL_EACH P[k] = G::fmadd(P[k], R[k], G::splat(kExpPolyHalf[j]));
  }
  SL_EACH P[k] = G::fmadd(P[k], G::mul(R[k], R[k]), R[k]);
  SL_EACH P[k] = G::add(P[k], G::splat(2.0f));
  SL_EACH P[k] = G::add_shifted_exponent(P[k], SH[k]);  // 2 exp(-a^2 / 2)
  // u = t - 1/2 and R(u) / 2
  SL_EACH U[k] = G::div(G::fmadd(G::splat(kGeluUNum[0]), A[k], G::splat(kGeluUNum[1])),
                        G::fmadd(G::splat(kGeluUDen), A[k], G::splat(1.0f)));
  SL_EACH Q[k] = G::fmadd(G::splat(kGeluRHalf[0]), U[k], G::splat(kGeluRHalf[1]));
#pragma GCC unroll 8
  for (int j = 2; j < 8; ++j) {
    SL_EACH Q[k] = G::fmadd(Q[k], U[k], G::splat(kGeluRHalf[j]));
  }
  // T(a) = (2 exp(-a^2 / 2)) (R / 2); x T for x <= 0 (sign bit set, -0 included), x - x T above
  SL_EACH Q[k] = G::mul(P[k], Q[k]);
  SL_EACH G::store(o + L * k,
                   G::select_sign(X[k], G::mul(X[k], Q[k]), G::fnmadd(X[k], Q[k], X[k])));
#undef SL_EACH
  return true;
}

/// The fast block that gelu's loop passes to unary_loop_fast_domain (core/cpu/loops.h).
inline constexpr auto kGeluFastBlock = [](const float* x, float* o) {
  return gelu_fast_block(x, o);
};

}  // namespace math::f32
}  // namespace SL_CPU_ISA
}  // namespace sl::cpu
#else
namespace sl::cpu {
inline namespace SL_CPU_ISA {  // Note [CPU ISA dispatch]
namespace math::f32 {
/// Without AVX2 + FMA there is no fast block: unary_loop_fast_domain's own domain pass and the
/// compiler's vectorised loop run instead.
inline constexpr std::nullptr_t kGeluFastBlock = nullptr;
}  // namespace math::f32
}  // namespace SL_CPU_ISA
}  // namespace sl::cpu
#endif
