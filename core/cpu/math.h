// Scalar math used by CPU kernels (internal header).
//
// Note [Vectorisable float math]
// libm's expf/tanhf/erff are function calls the compiler cannot vectorise (without
// -ffast-math), so the float versions here are written as straight-line code: range reduction,
// a polynomial, and bit manipulation for 2^n, with every branch computed and selected, so a loop
// calling them vectorises. Accuracy, checked against std:: in double over the whole float range
// by tests/core/test_cpu_math.cpp (both builds of Note [CPU ISA dispatch]): exp within 2 ulp;
// sigmoid, tanh, erf within 4; gelu, its tanh form and both gradients within 8 ulp of the
// result (tails included: erfc and x^2 are computed so that no cancellation or rounding of x^2
// is amplified; gradients in ulps of their larger term where they cross zero). The same bits
// come out of the vector loop, its epilogue and scalar code (no data-dependent branches; FMA
// contraction is the same in each; the one branch, the gelu kernels' choice of form per block in
// Note [Gelu fast domain], picks between forms that agree element by element), so results do
// not depend on the thread split. Double keeps
// the C library's functions (it is the reference precision, and f64 kernels are rarely hot).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/cpu/isa.h"

namespace sl::cpu {
inline namespace SL_CPU_ISA {  // Note [CPU ISA dispatch]
namespace math {

namespace f32 {

inline float from_bits(uint32_t u) {
  return std::bit_cast<float>(u);
}
inline uint32_t to_bits(float f) {
  return std::bit_cast<uint32_t>(f);
}
/// |x| with the sign of s.
inline float with_sign_of(float x, float s) {
  return from_bits((to_bits(x) & 0x7fffffffu) | (to_bits(s) & 0x80000000u));
}
inline float abs(float x) {
  return from_bits(to_bits(x) & 0x7fffffffu);
}

/// exp(r) for |r| <= ln2 / 2 (plus a small rounding excess) by Cephes' degree-6 polynomial:
/// 1 + r + r^2 p(r), p's coefficients in kExpPoly (highest degree first). The polynomial step of
/// exp_reduced and exp_neg_normal.
inline constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                      4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
inline float exp_poly(float r) {
  float p = kExpPoly[0];
#pragma GCC unroll 8
  for (int k = 1; k < 6; ++k) p = p * r + kExpPoly[k];
  return p * (r * r) + r + 1.0f;
}

/// The range reduction of exp: log2(e); 1.5 * 2^23, which rounds a float below 2^22 in magnitude
/// to an integer when added and subtracted; ln 2 = kLn2Hi - kLn2Lo, kLn2Hi with 9 significant
/// bits so that n * kLn2Hi is exact for |n| < 2^15.
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kRoundShift = 12582912.0f;
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;

/// exp(a + b) = y * 2^n, where a is exact and |b| is small next to 1 (b carries the rounding
/// error of a product, see square_split), for finite a + b in [-120, 88]: returns y and sets n
/// (an integer-valued float). Cephes-style: n = round((a + b) / ln 2), r = a - n ln2 (two-part
/// constant, exact first step) + b, y = exp(r) by a degree-6 polynomial on |r| <= ln2 / 2.
inline float exp_reduced(float a, float b, float& n) {
  const float x = a + b;
  // round to nearest integer with the 1.5 * 2^23 trick (no libm call)
  n = (x * kLog2e + kRoundShift) - kRoundShift;
  float r = a - n * kLn2Hi;  // exact: n has <= 9 bits, kLn2Hi 9
  r = r - n * kLn2Lo;
  r = r + b;
  return exp_poly(r);
}

/// exp(a + b) as exp_reduced describes, for finite a + b in [-120, 88], no clamping or NaN
/// handling (callers that bound their argument use this directly; exp_sum adds the guards).
/// 2^n is applied in two halves so that results in the subnormal range and overflow come out
/// right.
inline float exp_sum_bounded(float a, float b) {
  float n;
  const float y = exp_reduced(a, b, n);
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t n1 = ni / 2;
  const int32_t n2 = ni - n1;
  const float s1 = from_bits(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = from_bits(static_cast<uint32_t>(n2 + 127) << 23);
  return (y * s1) * s2;
}

inline constexpr float kTwoPow64 = 18446744073709551616.0f;
inline constexpr float kTwoPowM64 = 1.0f / kTwoPow64;

/// exp(a + b) * 2^64 for finite a + b in [-130, 0] (as exp_reduced): the scaled result is a
/// normal float, so a caller that multiplies it into a product and applies 2^-64 last rounds a
/// tiny (subnormal) result once, and 2^n is one multiplication.
inline float exp_sum_scaled64(float a, float b) {
  float n;
  const float y = exp_reduced(a, b, n);
  return y * from_bits(static_cast<uint32_t>(static_cast<int32_t>(n) + 127 + 64) << 23);
}

/// exp(a + b) as exp_sum_bounded, for any a and b: inf, NaN and out-of-range sums included.
inline float exp_sum(float a, float b) {
  // Selects only, each on its own comparison (no bool variables: GCC will not vectorise a loop
  // mixing bool masks of different widths). Clamp to where the result is 0 or inf anyway, which
  // keeps n in [-150, 129]; NaN is replaced by 0 here and restored at the end.
  const float x = a + b;
  float ac = x > 89.0f ? 89.0f : a;
  ac = x < -104.0f ? -104.0f : ac;
  ac = x == x ? ac : 0.0f;
  float bc = x > 89.0f ? 0.0f : b;
  bc = x < -104.0f ? 0.0f : bc;
  bc = x == x ? bc : 0.0f;
  const float out = exp_sum_bounded(ac, bc);
  return x == x ? out : x;
}

inline float exp(float x) {
  return exp_sum(x, 0.0f);
}

/// x*x as hi + lo, hi + lo exact, so that exp(-x*x) can be evaluated without the rounding of
/// x*x (relative error x^2 * 2^-24). With FMA: hi = x*x rounded, lo its exact error; without:
/// x split into 12 + 12 significant bits (Dekker), hi exact, lo rounded.
inline void square_split(float x, float& hi, float& lo) {
#ifdef __FMA__
  hi = x * x;
  lo = std::fma(x, x, -hi);
#else
  const float xh = from_bits(to_bits(x) & 0xfffff000u);
  const float xl = x - xh;
  hi = xh * xh;
  lo = (2.0f * xh + xl) * xl;
#endif
}

/// a * b as hi + lo, exactly (no overflow or underflow assumed): with FMA, lo is the rounding
/// error of hi = a * b; without, Dekker's product of a and b split into 12 + 12 significant bits.
inline void two_prod(float a, float b, float& hi, float& lo) {
  hi = a * b;
#ifdef __FMA__
  lo = std::fma(a, b, -hi);
#else
  const float ah = from_bits(to_bits(a) & 0xfffff000u), al = a - ah;
  const float bh = from_bits(to_bits(b) & 0xfffff000u), bl = b - bh;
  lo = (((ah * bh - hi) + ah * bl) + al * bh) + al * bl;
#endif
}

/// a * b + c: one fused multiply-add, rounded once, where the build has FMA; two operations
/// otherwise. The forms that an intrinsics version reproduces bit for bit (Note [Interleaved
/// gelu]) write every FMA out with it and leave no product next to a sum, so that their bits do
/// not depend on the compiler's contraction, which differs between optimisation levels (-O1
/// contracts almost nothing).
inline float madd(float a, float b, float c) {
#ifdef __FMA__
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

/// exp(-(hi + lo)) for hi in [0, 87] and |lo| small next to 1 (as exp_reduced's b): the fast
/// forms of Note [Gelu fast domain], no clamps. n = round(-hi / ln 2) is taken from hi alone
/// (|r| stays below ln2 / 2 + |lo|), and 2^n is added to the exponent bits of exp(r) straight
/// from the rounding constant's low bits (the result is a normal float).
inline float exp_neg_normal(float hi, float lo) {
  const float shifted = hi * -kLog2e + kRoundShift;  // 1.5 * 2^23 + n
  const float n = shifted - kRoundShift;
  float r = -hi - n * kLn2Hi;  // exact: n has <= 7 bits, kLn2Hi 9
  r = r - n * kLn2Lo;
  r = r - lo;
  const float y = exp_poly(r);
  // + n << 23: the bits of 1.5 * 2^23 shift out
  return from_bits(to_bits(y) + (to_bits(shifted) << 23));
}

/// 1 / (1 + e^-x) for x >= 0 and e^x / (1 + e^x) below, so that the result never overflows
/// to 0 where it is a tiny positive number.
inline float sigmoid(float x) {
  const float a = abs(x);
  const float e = exp_sum_bounded(-(a < 120.0f ? a : 120.0f), 0.0f);  // exp(-120) is 0
  const float s = 1.0f / (1.0f + e);
  const float r = x >= 0.0f ? s : e * s;
  return x == x ? r : x;
}

inline float tanh(float x) {
  const float a = abs(x);
  // |x| < 0.625: x + x^3 P(x^2) (Cephes tanhf)
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = a + a * z * p;
  // otherwise (1 - e) / (1 + e), e = exp(-2|x|) <= 0.29
  const float e = exp_sum_bounded(-2.0f * (a < 60.0f ? a : 60.0f), 0.0f);
  const float large = (1.0f - e) / (1.0f + e);
  // both for |x|, then x's sign (tanh(-0) is -0 whatever the rounding of the zero terms)
  const float r = with_sign_of(a < 0.625f ? small : large, x);
  return x == x ? r : x;
}

/// erf(u) / u for |u| < 0.75, as a polynomial in u^2 (fitted by tools/fit_math_f32.py).
inline float erf_small_ratio(float u2) {
  float p = -6.749613342e-04f;
  p = p * u2 + 5.114361198e-03f;
  p = p * u2 - 2.683463347e-02f;
  p = p * u2 + 1.128337680e-01f;
  p = p * u2 - 3.761261878e-01f;
  p = p * u2 + 1.128379166e+00f;
  return p;
}

/// erfc(u) * exp(u^2) for 0.75 <= u <= 10, a polynomial in t = 1 / (1 + u / 2) (fitted by
/// tools/fit_math_f32.py; relative error about 2^-30 before float rounding).
inline float erfc_scaled(float u) {
  const float t = 1.0f / (1.0f + 0.5f * u);
  float p = -7.171030686e-02f;
  p = p * t + 3.412537903e-01f;
  p = p * t - 5.950634989e-01f;
  p = p * t + 3.921086961e-01f;
  p = p * t - 1.002014533e-01f;
  p = p * t + 2.326158192e-01f;
  p = p * t + 2.354561037e-01f;
  p = p * t + 2.835550572e-01f;
  p = p * t + 2.819869951e-01f;
  p = p * t + 3.480246220e-06f;
  return p;
}

inline float erf(float x) {
  const float a = abs(x);
  const float small = x * erf_small_ratio(x * x);
  float hi, lo;
  square_split(a < 10.0f ? a : 10.0f, hi, lo);  // erfc(10) underflows: also keeps inf out
  const float tail = exp_sum_bounded(-hi, -lo) * erfc_scaled(a);  // erfc(|x|)
  const float large = with_sign_of(1.0f - tail, x);
  const float r = a < 0.75f ? small : large;
  return x == x ? r : x;
}

/// The standard normal tail T(a) = Phi(-a) = erfc(a / sqrt 2) / 2 for a = |x|, as its two
/// factors T = gauss * R: gauss_s = exp(-a^2 / 2) * 2^64 (accurate in relative terms: a^2 is
/// never rounded inside the exponent; scaled so that it is never subnormal; 0 where a >= 15,
/// beyond which T underflows, and for NaN) and R(a) = erfc(u) exp(u^2) / 2, u = a / sqrt 2,
/// a polynomial in t = 1 / (1 + u / 2) over a in [0, 14.15] (fitted by tools/fit_math_f32.py;
/// relative error 2^-29.2 before float rounding). One formula for every a: Phi(x) is T for
/// x <= 0 and 1 - T >= 1/2 for x > 0, so nothing cancels.
struct NormalTail {
  float gauss_s;
  float r;
};
inline NormalTail normal_tail(float a) {
  NormalTail p;
  const float ac = a < 15.0f ? a : 15.0f;  // keeps inf and NaN out of exp
  float hi, lo;
  square_split(ac, hi, lo);
  const float g = exp_sum_scaled64(-0.5f * hi, -0.5f * lo);  // halving is exact
  p.gauss_s = a < 15.0f ? g : 0.0f;
  const float t = 1.0f / (1.0f + 0.35355339059327376f * a);  // NaN stays NaN; t = 0 at inf
  float r = 1.196726317e-02f;
  r = r * t - 5.872031340e-02f;
  r = r * t + 8.952001891e-02f;
  r = r * t + 1.727440103e-02f;
  r = r * t - 1.785929728e-01f;
  r = r * t + 1.349657029e-01f;
  r = r * t - 2.906379758e-02f;
  r = r * t + 1.115096798e-01f;
  r = r * t + 1.184232526e-01f;
  r = r * t + 1.417193229e-01f;
  r = r * t + 1.409957129e-01f;
  r = r * t + 1.730449229e-06f;
  p.r = r;
  return p;
}

/// x Phi(x) for every x: x (1 - T) for x > 0, x T otherwise, evaluated as ((x R) gauss_s) 2^-64
/// so that a tiny result is rounded once. -inf gives NaN, as in PyTorch (-inf * 0).
inline float gelu_any(float x) {
  const NormalTail p = normal_tail(abs(x));
  const float pos = x * (1.0f - (p.r * p.gauss_s) * kTwoPowM64);
  const float neg = ((x * p.r) * p.gauss_s) * kTwoPowM64;
  return x > 0.0f ? pos : neg;
}

// Note [Gelu fast domain]
// Nearly all inputs of gelu are small (|x| < 5 for all but ~6e-7 of normally distributed values),
// and there the general forms above and below carry clamps, 2^64 scalings and wide polynomials
// they do not need. gelu_fast and gelu_tanh_fast are shorter forms, valid (same error bounds)
// for |x| <= kGeluFastMax and |x| <= kGeluTanhFastMax; gelu and gelu_tanh select between the
// fast and general forms per element, so each x always gives the same bits. The float kernels
// (core/cpu/elementwise_kernels.h, unary_loop_fast_domain in core/cpu/loops.h) run whole blocks
// through the fast form when every element of the block is in its domain (NaN never is), and
// the selecting form otherwise, so that the common case costs only the fast form.
inline constexpr float kGeluFastMax = 5.0f;
inline constexpr float kGeluTanhFastMax = 4.5f;

/// 2 exp(-(s + lo) / 2) for s in [0, 25] and |lo| small next to 1: exp_neg_normal(s / 2, lo / 2)
/// with the halving folded into the steps (gelu_fast saves the multiplication by 1/2 of
/// a^2 / 2), its FMAs written out (madd). Every step computes exactly twice exp_neg_normal's value
/// (the reduction constants and the final 1 doubled, the polynomial's coefficients scaled by powers
/// of 2 so that each Horner step carries the right power; scaling by 2 commutes with rounding), so
/// the result is exactly twice exp_neg_normal's wherever that one makes the same FMAs (the
/// optimised AVX2 build). n = round(-s / (2 ln 2)) is at most 18 in magnitude.
inline constexpr float kExpPolyHalf[6] = {kExpPoly[0] / 64, kExpPoly[1] / 32, kExpPoly[2] / 16,
                                          kExpPoly[3] / 8,  kExpPoly[4] / 4,  kExpPoly[5] / 2};
inline float twice_exp_neg_half(float s, float lo) {
  const float shifted = madd(s, -0.5f * kLog2e, kRoundShift);  // 1.5 * 2^23 + n
  const float n = shifted - kRoundShift;
  float r2 = madd(-n, 2.0f * kLn2Hi, -s);  // exact, as in exp_neg_normal
  r2 = madd(-n, 2.0f * kLn2Lo, r2);
  r2 = r2 - lo;
  float p = kExpPolyHalf[0];
#pragma GCC unroll 8
  for (int k = 1; k < 6; ++k) p = madd(p, r2, kExpPolyHalf[k]);
  const float y = madd(p, r2 * r2, r2) + 2.0f;
  return from_bits(to_bits(y) + (to_bits(shifted) << 23));
}

/// x Phi(x) for |x| <= kGeluFastMax: T(a) = exp(-a^2 / 2) R(a) as in normal_tail, exp without
/// clamps (a^2 / 2 <= 12.5), and R by 8 coefficients in u = t - 1/2 = (1 - a / sqrt 8) /
/// (2 + a / sqrt 2), t = 1 / (1 + a / sqrt 8) (fitted on a in [0, 5] by tools/fit_math_f32.py;
/// relative error 2^-23.1 before rounding). twice_exp_neg_half gives 2 exp(-a^2 / 2), and the
/// coefficients are those of R / 2 (kGeluRHalf), so their product is T with no multiplication
/// by 1/2 anywhere.
inline constexpr float kGeluUNum[2] = {-0.17677669529663688f, 0.5f};  // -t0 / sqrt 8, 1 - t0
inline constexpr float kGeluUDen = 0.35355339059327376f;              // 1 / sqrt 8
inline constexpr float kGeluR[8] = {3.729447291e-02f, -1.296124417e-02f, -1.135548966e-01f,
                                    2.947434198e-02f, 3.159770529e-01f,  4.833198695e-01f,
                                    4.271854529e-01f, 1.276978300e-01f};
inline constexpr float kGeluRHalf[8] = {kGeluR[0] / 2, kGeluR[1] / 2, kGeluR[2] / 2, kGeluR[3] / 2,
                                        kGeluR[4] / 2, kGeluR[5] / 2, kGeluR[6] / 2, kGeluR[7] / 2};
inline float gelu_fast(float x) {
  const float a = abs(x);
  float s, s_lo;
  square_split(a, s, s_lo);  // a^2
  const float g2 = twice_exp_neg_half(s, s_lo);
  const float u = madd(kGeluUNum[0], a, kGeluUNum[1]) / madd(kGeluUDen, a, 1.0f);
  float r = kGeluRHalf[0];
#pragma GCC unroll 8
  for (int k = 1; k < 8; ++k) r = madd(r, u, kGeluRHalf[k]);
  const float t = g2 * r;  // T(a)
  // x T for x <= 0, x - x T (one rounding) above: selected on the sign bit (an integer compare;
  // -0 gives -0)
  return static_cast<int32_t>(to_bits(x)) < 0 ? x * t : madd(-x, t, x);
}

/// x Phi(x): gelu_fast where |x| <= kGeluFastMax (NaN is not), gelu_any elsewhere.
inline float gelu(float x) {
  return abs(x) <= kGeluFastMax ? gelu_fast(x) : gelu_any(x);
}

/// Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi) = gauss / sqrt(2 pi):
/// 1 + (x / sqrt(2 pi) - R) gauss for x > 0, (R + x / sqrt(2 pi)) gauss otherwise.
inline float gelu_grad(float x) {
  const NormalTail p = normal_tail(abs(x));
  // gauss_s is 0 beyond |x| = 15: clamping x there avoids inf * 0 at x = +-inf (limits 1, 0)
  const float xc = (abs(x) < 15.0f ? x : 15.0f) * 0.39894228040143267794f;
  const float pos = 1.0f + (xc - p.r) * (p.gauss_s * kTwoPowM64);
  const float neg = ((p.r + xc) * p.gauss_s) * kTwoPowM64;
  return x > 0.0f ? pos : neg;  // NaN: R is NaN
}

/// The pieces of the tanh form of gelu, 0.5 x (1 + tanh(z / 2)) = x sigmoid(z) for
/// z = 2 sqrt(2/pi) (x + 0.044715 x^3), which avoids the cancellation of 1 + tanh for negative
/// x: e_s = exp(-|z|) 2^64 (as exp_sum_scaled64, so that a product ending in the subnormal range
/// is rounded once; 0 where |z| >= 120, beyond which every result underflows) and
/// s = 1 / (1 + exp(-|z|)). sigmoid(z) is s for z >= 0 and e s below; sigmoid'(z) = e s^2.
/// z is formed in double and passed to exp as hi + lo: in float its rounding error, multiplied
/// by |z| in exp, would cost ~|z| ulp in the tails.
struct GeluTanhParts {
  float e_s;
  float s;
};
inline GeluTanhParts gelu_tanh_parts(float x) {
  const double xd = x;
  const double z = 1.5957691216057307118 * (xd + 0.044715 * xd * xd * xd);
  const double az = std::fabs(z);
  const float hi = static_cast<float>(az);
  const float lo = static_cast<float>(az - static_cast<double>(hi));
  // the clamps in float (masks of one width vectorise best): keep inf and NaN out of exp
  const bool in_range = hi < 120.0f;
  GeluTanhParts p;
  const float e_s = exp_sum_scaled64(in_range ? -hi : -120.0f, in_range ? -lo : 0.0f);
  p.e_s = in_range ? e_s : 0.0f;
  p.s = 1.0f / (1.0f + p.e_s * kTwoPowM64);
  return p;
}

/// z has the sign of x, for every x. -inf gives NaN, as in PyTorch (-inf * 0).
inline float gelu_tanh_any(float x) {
  const GeluTanhParts p = gelu_tanh_parts(x);
  const float neg = ((x * p.e_s) * p.s) * kTwoPowM64;
  return x >= 0.0f ? x * p.s : neg;
}

/// gelu_tanh for |x| <= kGeluTanhFastMax (Note [Gelu fast domain]), all in float: with a = |x|,
/// |z| = a (K + Kc a^2) = a w + a w_err, where w = K + Kc a^2 rounded and w_err its error (K and
/// Kc carried as float + correction; the sum is a Fast2Sum, exact since Kc a^2 <= K for
/// a <= 4.72). a w is split exactly into hi + lo, so exp(-|z|) sees |z| to ~2^-40 relative (as
/// the double z of gelu_tanh_parts); |z| <= 14.8, so exp needs no clamps.
inline float gelu_tanh_fast(float x) {
  constexpr float kK = 1.5957691669e+00f, kKLo = -4.5340680543e-08f;   // 2 sqrt(2 / pi)
  constexpr float kKc = 7.1354813874e-02f, kKcLo = 2.3988324660e-09f;  // 0.044715 K
  const float a = abs(x);
  float s, s_lo, p, p_lo;
  square_split(a, s, s_lo);
  two_prod(kKc, s, p, p_lo);
  const float w = kK + p;
  const float w_err = ((kK - w) + p) + (p_lo + (kKc * s_lo + (kKcLo * s + kKLo)));
  float z, z_lo;
  two_prod(a, w, z, z_lo);
  const float e = exp_neg_normal(z, z_lo + a * w_err);  // exp(-|z|)
  const float xs = x * (1.0f / (1.0f + e));             // x sigmoid(|z|)
  return static_cast<int32_t>(to_bits(x)) < 0 ? xs * e : xs;
}

/// gelu_tanh_fast where |x| <= kGeluTanhFastMax (NaN is not), gelu_tanh_any elsewhere.
inline float gelu_tanh(float x) {
  return abs(x) <= kGeluTanhFastMax ? gelu_tanh_fast(x) : gelu_tanh_any(x);
}

/// d/dx x sigmoid(z) = sigmoid(z) + x sigmoid'(z) dz/dx.
inline float gelu_tanh_grad(float x) {
  const GeluTanhParts p = gelu_tanh_parts(x);
  const float sig = x >= 0.0f ? p.s : (p.e_s * p.s) * kTwoPowM64;
  // sigmoid'(z) is exactly 0 beyond |x| ~ 12: clamp x so that no product overflows into 0 * inf
  const float xc = abs(x) < 1e4f ? x : 1e4f;
  const float dz = 1.5957691216057307118f * (1.0f + 3.0f * 0.044715f * xc * xc);
  const float r = sig + (((xc * dz) * (p.s * p.s)) * p.e_s) * kTwoPowM64;
  return x == x ? r : x;
}

}  // namespace f32

// ---- generic entry points: float uses the vectorisable versions, double the C library's -----

template <class C>
inline C exp(C x) {
  if constexpr (std::is_same_v<C, float>)
    return f32::exp(x);
  else
    return std::exp(x);
}
template <class C>
inline C tanh(C x) {
  if constexpr (std::is_same_v<C, float>)
    return f32::tanh(x);
  else
    return std::tanh(x);
}
template <class C>
inline C sigmoid(C x) {
  if constexpr (std::is_same_v<C, float>)
    return f32::sigmoid(x);
  else
    return C(1) / (C(1) + std::exp(-x));
}
template <class C>
inline C erf(C x) {
  if constexpr (std::is_same_v<C, float>)
    return f32::erf(x);
  else
    return std::erf(x);
}
/// x * Phi(x), Phi the standard normal CDF.
template <class C>
inline C gelu(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return f32::gelu(x);
  } else {
    return C(0.5) * x * std::erfc(-x * C(0.70710678118654752440));
  }
}
/// d/dx gelu(x) = Phi(x) + x * phi(x); the limits 1 and 0 at +-inf (the float path's too), where
/// x phi(x) would be inf * 0.
template <class C>
inline C gelu_grad(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return f32::gelu_grad(x);
  } else {
    C cdf = C(0.5) * std::erfc(-x * C(0.70710678118654752440));
    C pdf = C(0.39894228040143267794) * std::exp(C(-0.5) * x * x);
    return pdf == C(0) ? cdf : cdf + x * pdf;
  }
}
// The double forms of the tanh gelu are x sigmoid(z), z = 2 sqrt(2/pi) (x + 0.044715 x^3), with
// sigmoid from e = exp(-|z|) on both sides of 0, as the float ones and CUDA's (device_math.cuh):
// 0.5 (1 + tanh(z / 2)) cancels for negative x (the H200's parity run met relative errors of 1e-2
// in the double gradient at x ~ -5, and a -0 for a positive 1.7e-14).
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <class C>
inline C gelu_tanh(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return f32::gelu_tanh(x);
  } else {
    const C z = C(1.5957691216057307118) * (x + C(0.044715) * x * x * x);
    const C e = std::exp(-std::fabs(z));
    const C s = C(1) / (C(1) + e);
    return z >= C(0) ? x * s : (x * e) * s;  // -inf: -inf * 0 = NaN, as PyTorch
  }
}
template <class C>
inline C gelu_tanh_grad(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return f32::gelu_tanh_grad(x);
  } else {
    const C z = C(1.5957691216057307118) * (x + C(0.044715) * x * x * x);
    const C e = std::exp(-std::fabs(z));
    const C s = C(1) / (C(1) + e);
    const C sig = z >= C(0) ? s : e * s;
    if (e == C(0)) return sig;  // |x| huge: sigmoid'(z) underflowed (x dz would be inf)
    const C dz = C(1.5957691216057307118) * (C(1) + C(3 * 0.044715) * x * x);
    return sig + ((x * dz) * (e * s)) * s;
  }
}

}  // namespace math
}  // namespace SL_CPU_ISA
}  // namespace sl::cpu
