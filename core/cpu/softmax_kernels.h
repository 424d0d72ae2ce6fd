// The softmax family's CPU kernel bodies (internal header), included by core/cpu/softmax.cpp and,
// compiled with AVX2 or AVX-512, by core/cpu/softmax_avx2.cpp and core/cpu/softmax_avx512.cpp
// (Note [CPU ISA dispatch]). Everything is in an anonymous namespace so that each build keeps its
// own copy.
//
// Tensors are contiguous [outer, n, inner]. Each slice (one (outer, inner) position, n elements
// `inner` apart) is handled by one thread in a fixed order; exps are math::exp (Note [Vectorisable
// float math]) in the compute type (float for 16-bit floats), and sums are taken in double as
// Note [Softmax sums] describes.
//
// Note [Softmax sums]
// Every sum over a slice (the exps of the forward; sum(g) or sum(g * y) of the backward) is
// accumulated in double in kSumLanes = 16 lanes: element r of the slice goes to lane r % 16, each
// lane adds its elements in row order, then the lanes are combined by a fixed pairwise tree,
// lane l += lane l + 8 for l < 8, then l += l + 4 for l < 4, then + 2, then + 1; lane 0 is the
// sum. The slice maximum is taken the same way (a max is exact, so only the sign of a zero
// result could depend on the order; adding +0 turns -0 into +0). One sequential double sum was a
// chain of dependent adds, one per element; 16 independent lanes fill 2 AVX-512 registers of
// doubles, 4 AVX2 ones or 8 SSE2 ones, and the tail of a slice (n % 16 elements) goes to lanes
// 0, 1, ... in scalar code. Each lane and the tree are written out in the source, and without
// -ffast-math the compiler may not reassociate them, so the sum has the same bits in the
// generic, AVX2 and AVX-512 builds, at any thread count, and in the blocked kernels of Note
// [Softmax over a non-last dim], which keep 16 lanes per column. The exps have the same bits in
// every build too: math::exp is straight-line IEEE arithmetic, and the ISA builds of these
// kernels are compiled with -ffp-contract=off (the root meson.build), where the elementwise ones
// let the compiler fuse its polynomial into FMAs, which round differently from the generic
// build's separate multiply and add (both within 2 ulp, but not the same bits). So softmax and
// log_softmax, forward and backward, give the same bits whichever build the CPU runs
// (tests/core/test_softmax.cpp calls every build the CPU supports). In float32 the double lanes
// add ~n 2^-53 of relative error, far below the result's own rounding; in float64 the tree's
// error bound (~(n / 16 + 4) ulps) is below the sequential sum's (~n ulps).
//
// Note [Softmax over a non-last dim]
// With inner > 1 a slice is a strided gather (stride `inner`), so one slice at a time touches a
// cache line per element and does not vectorise: softmax over dim 0 of [1024, 1024] float32 was
// ~4x slower than PyTorch. As PyTorch's _vec_softmax, such tensors are instead processed in
// blocks of up to kInnerBlock adjacent slices (columns of one outer index): each pass over the n
// rows reads a contiguous run of the block's columns, keeping one running max and 16 sum lanes
// (Note [Softmax sums]) per column. Every column sees the same operations in the same order as
// softmax_slice (math::exp in the compute type, row r added to lane r % 16, the same tree), so
// both paths give the same bits per slice and the result does not depend on the block width or
// thread split.
//
// Note [Softmax float rows]
// A float32 row (the last dim, inner == 1) was ~1.2x slower than PyTorch's vectorised softmax at
// 1 thread; under perf nearly all its time was the exp-and-sum loop (~50 vector instructions per
// 16 elements: math::exp's clamps, NaN select and two-step 2^n scaling, GCC keeping the 16 double
// lanes in memory) and a max loop GCC left scalar. softmax_slice_fast does the same arithmetic
// with GCC vectors of the build's register width (kVecF floats): one pass for the max (and the
// min), then exp and the double lanes held in registers, then the scale (or x - shift for
// log_softmax). Its exp, exp_nonpositive, serves only arguments z = x - max in [kFastExpMin = -86,
// 0]: there math::f32::exp_sum's clamps and NaN select are no-ops, its b = 0 terms change no bits
// (x + 0 and r + 0 differ from x and r only for -0, which gives the same n and exp_poly(+-0) =
// 1), and as exp(z) >= exp(-86) is a normal float, y * 2^n is exact and equals exp_sum_bounded's
// (y * 2^n1) * 2^n2; 2^n comes from the low bits of the rounding sum 1.5 * 2^23 + n. So each exp
// has math::exp's bits, each lane of the sum gets the same values in the same order (a tail of n
// % 16 elements is one padded vector step whose unused lanes add +0) and the lanes are combined by
// the same tree: the result is the general path's, bit for bit, in every build (the tests compare
// the two on the same rows). A row is outside that domain when its max is infinite, its min is
// more than 86 below its max (e.g. -inf padding, or exps that would be subnormal) or it holds NaN
// (seen after the sum pass: NaN makes the sum NaN); such a row is redone by the general code.
// The backward rows (softmax_backward_slice_fast) are the same: sum(g) or sum(g * y) in register
// lanes, and for log_softmax exp(y) by exp_nonpositive where every y is in [-86, 0] (log-probs
// are <= 0; a row with y outside, or NaN, runs the general code).
// Sums stay in double: float lanes would save the conversions, but give other bits than Note
// [Softmax sums] and a less accurate sum.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "core/cpu/loops.h"
#include "core/cpu/math.h"

namespace sl::cpu {
namespace {

/// Double accumulators per sum (Note [Softmax sums]).
inline constexpr int kSumLanes = 16;

/// Adjacent slices handled together by the blocked kernels (Note [Softmax over a non-last dim]).
inline constexpr int64_t kInnerBlock = 64;

/// v where v > m, else m: a NaN v is skipped. A slice holding NaN still gives NaN everywhere,
/// through its sum: exp(NaN - max) is NaN (so is exp(inf - inf) where the max is inf). One
/// comparison and select per element, a vector max, where a NaN-sticky max did not vectorise.
template <class C>
inline C max_of(C m, C v) {
  return v > m ? v : m;
}

/// Combines the kSumLanes values at acc (stride `stride`) into acc[0] by the fixed pairwise tree
/// of Note [Softmax sums], and returns it.
inline double combine_lanes(double* acc, int64_t stride = 1) {
  for (int h = kSumLanes / 2; h >= 1; h /= 2) {
    for (int l = 0; l < h; ++l) acc[l * stride] += acc[(l + h) * stride];
  }
  return acc[0];
}

/// Adds f(r) (a double) for r in [0, n) into the lanes acc[0..kSumLanes): element r to lane
/// r % kSumLanes, in row order within each lane (Note [Softmax sums]).
template <class F>
inline void add_lanes(double* acc, int64_t n, const F& f) {
  int64_t r = 0;
  for (; r + kSumLanes <= n; r += kSumLanes) {
    for (int l = 0; l < kSumLanes; ++l) acc[l] += f(r + l);
  }
  for (int l = 0; r + l < n; ++l) acc[l] += f(r + l);
}

/// The maximum of the n contiguous elements other than NaN (-inf if none; +0 rather than -0), in
/// the lanes of Note [Softmax sums].
template <class T>
compute_t<T> slice_max(const T* x, int64_t n) {
  using C = compute_t<T>;
  C mx[kSumLanes];
  for (int l = 0; l < kSumLanes; ++l) mx[l] = -std::numeric_limits<C>::infinity();
  int64_t r = 0;
  for (; r + kSumLanes <= n; r += kSumLanes) {
    for (int l = 0; l < kSumLanes; ++l) mx[l] = max_of(mx[l], static_cast<C>(x[r + l]));
  }
  for (int l = 0; r + l < n; ++l) mx[l] = max_of(mx[l], static_cast<C>(x[r + l]));
  for (int h = kSumLanes / 2; h >= 1; h /= 2) {
    for (int l = 0; l < h; ++l) mx[l] = max_of(mx[l], mx[l + h]);
  }
  return mx[0] + C(0);
}

/// Floats per vector register of this build (Note [Softmax float rows]): 16 with AVX-512, 8
/// with AVX2, 4 with SSE2.
#if defined(__AVX512F__)
inline constexpr int kVecF = 16;
#elif defined(__AVX__)
inline constexpr int kVecF = 8;
#else
inline constexpr int kVecF = 4;
#endif
/// Vectors per kSumLanes elements.
inline constexpr int kVecsPerLanes = kSumLanes / kVecF;
static_assert(kVecsPerLanes * kVecF == kSumLanes);

/// GCC vectors of one register: kVecF floats or uint32s, kVecF / 2 doubles.
typedef float VecF __attribute__((vector_size(kVecF * 4)));
typedef uint32_t VecU __attribute__((vector_size(kVecF * 4)));
typedef double VecD __attribute__((vector_size(kVecF * 4)));

inline VecF load_vec(const float* p) {
  VecF v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_vec(float* p, VecF v) {
  std::memcpy(p, &v, sizeof v);
}
inline VecF splat(float f) {
  return VecF{} + f;
}

/// math::exp(z) in each lane, for z in [kFastExpMin, 0] (NaN gives NaN): the operations of
/// math::f32::exp_reduced with b = 0, then y * 2^n in one multiplication, which has exp_sum's
/// bits there (Note [Softmax float rows]).
inline constexpr float kFastExpMin = -86.0f;
inline VecF exp_nonpositive(VecF z) {
  namespace f = math::f32;
  const VecF shifted = z * f::kLog2e + f::kRoundShift;  // 1.5 * 2^23 + n
  const VecF n = shifted - f::kRoundShift;
  VecF r = z - n * f::kLn2Hi;
  r = r - n * f::kLn2Lo;
  VecF p = splat(f::kExpPoly[0]);
  for (int k = 1; k < 6; ++k) p = p * r + f::kExpPoly[k];
  const VecF y = p * (r * r) + r + 1.0f;
  // 2^n from the low bits of `shifted` (those of 1.5 * 2^23 shift out)
  return y * __builtin_bit_cast(VecF, (__builtin_bit_cast(VecU, shifted) + 127u) << 23);
}

/// The kSumLanes double sum lanes of Note [Softmax sums] in registers: lane l in half l / (kVecF
/// / 2), element l % (kVecF / 2).
struct VecLanes {
  VecD half[2 * kVecsPerLanes] = {};

  /// Adds the lanes of e, vector k of a kSumLanes chunk (lanes k kVecF to k kVecF + kVecF - 1),
  /// in double; only its first `count` lanes when count < kVecF (the others get +0, which leaves
  /// a sum lane as it is).
  void add(int k, VecF e, int count = kVecF) {
    VecD lo, hi;
    widen(first(e, count), lo, hi);
    half[2 * k] += lo;
    half[2 * k + 1] += hi;
  }
  /// As add, for the products a * b taken in double (exact for floats).
  void add_products(int k, VecF a, VecF b, int count = kVecF) {
    VecD alo, ahi, blo, bhi;
    widen(first(a, count), alo, ahi);
    widen(first(b, count), blo, bhi);
    half[2 * k] += alo * blo;
    half[2 * k + 1] += ahi * bhi;
  }
  /// The sum by the tree of combine_lanes.
  double combine() const {
    double acc[kSumLanes];
    std::memcpy(acc, half, sizeof acc);
    return combine_lanes(acc);
  }

 private:
  /// e with lanes from `count` on set to +0.
  static VecF first(VecF e, int count) {
    if (count >= kVecF) return e;
    VecU lane;
    for (int l = 0; l < kVecF; ++l) lane[l] = static_cast<uint32_t>(l);
    return lane < static_cast<uint32_t>(count) ? e : VecF{};
  }
  /// The lower and upper halves of e in double.
  static void widen(VecF e, VecD& lo, VecD& hi) {
    // float to double is exact: the intrinsics only pick the instructions (GCC 12 converts
    // half a register a quarter at a time); for AVX-512 the masked forms with every lane set and
    // halves by shuffles, as the plain intrinsics' "undefined" operands draw GCC 12's
    // -Wmaybe-uninitialized
#if defined(__AVX512F__)
    lo = _mm512_mask_cvtps_pd(_mm512_setzero_pd(), 0xff,
                              __builtin_shufflevector(e, e, 0, 1, 2, 3, 4, 5, 6, 7));
    hi = _mm512_mask_cvtps_pd(_mm512_setzero_pd(), 0xff,
                              __builtin_shufflevector(e, e, 8, 9, 10, 11, 12, 13, 14, 15));
#elif defined(__AVX__)
    lo = _mm256_cvtps_pd(_mm256_castps256_ps128(e));
    hi = _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1));
#elif defined(__SSE2__)
    lo = _mm_cvtps_pd(e);
    hi = _mm_cvtps_pd(_mm_movehl_ps(e, e));
#else
    lo = __builtin_convertvector(__builtin_shufflevector(e, e, 0, 1), VecD);
    hi = __builtin_convertvector(__builtin_shufflevector(e, e, 2, 3), VecD);
#endif
  }
};
static_assert(sizeof(VecLanes) == kSumLanes * sizeof(double));

/// softmax_slice for float32, when every x - max is in [kFastExpMin, 0]: false (y partly
/// written) otherwise, and where the slice holds NaN (Note [Softmax float rows]).
inline bool softmax_slice_fast(const float* x, float* y, int64_t n, bool log) {
  constexpr int64_t W = kSumLanes;
  const float inf = std::numeric_limits<float>::infinity();
  VecF vmax[kVecsPerLanes], vmin[kVecsPerLanes];
  for (int k = 0; k < kVecsPerLanes; ++k) vmax[k] = splat(-inf), vmin[k] = splat(inf);
  int64_t r = 0;
  for (; r + W <= n; r += W) {
    for (int k = 0; k < kVecsPerLanes; ++k) {
      const VecF v = load_vec(x + r + k * kVecF);
      vmax[k] = v > vmax[k] ? v : vmax[k];  // max_of, NaN skipped
      vmin[k] = v < vmin[k] ? v : vmin[k];
    }
  }
  float m = -inf, lo = inf;
  for (int k = 0; k < kVecsPerLanes; ++k) {
    for (int l = 0; l < kVecF; ++l) {
      m = max_of(m, vmax[k][l]);
      lo = vmin[k][l] < lo ? vmin[k][l] : lo;
    }
  }
  for (; r < n; ++r) {
    m = max_of(m, x[r]);
    lo = x[r] < lo ? x[r] : lo;
  }
  m = m + 0.0f;                                                 // a max is exact: slice_max's value
  if (!(m - m == 0.0f && lo - m >= kFastExpMin)) return false;  // m infinite, or a far tail
  const VecF mv = splat(m);
  VecLanes acc;
  for (r = 0; r + W <= n; r += W) {
    for (int k = 0; k < kVecsPerLanes; ++k) {
      const VecF e = exp_nonpositive(load_vec(x + r + k * kVecF) - mv);
      if (!log) store_vec(y + r + k * kVecF, e);
      acc.add(k, e);
    }
  }
  if (r < n) {  // the tail, padded with m (exp 0 = 1, not added)
    float buf[W];
    for (int64_t l = 0; l < W; ++l) buf[l] = r + l < n ? x[r + l] : m;
    for (int k = 0; k < kVecsPerLanes && r + k * kVecF < n; ++k) {
      const VecF e = exp_nonpositive(load_vec(buf + k * kVecF) - mv);
      store_vec(buf + k * kVecF, e);
      acc.add(k, e, static_cast<int>(std::min<int64_t>(kVecF, n - r - k * kVecF)));
    }
    if (!log) std::copy(buf, buf + (n - r), y + r);
  }
  const double sum = acc.combine();
  if (sum != sum) return false;  // a NaN in the slice
  if (log) {
    const float shift = m + static_cast<float>(std::log(sum));
    for (int64_t k = 0; k < n; ++k) y[k] = x[k] - shift;
  } else {
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t k = 0; k < n; ++k) y[k] *= inv;
  }
  return true;
}

/// Softmax (log_softmax when `log`) of the n contiguous elements at x into y.
template <class T>
void softmax_slice(const T* x, T* y, int64_t n, bool log) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, float>) {
    if (softmax_slice_fast(x, y, n, log)) return;
  }
  const C m = slice_max(x, n);
  double acc[kSumLanes] = {};
  if constexpr (std::is_same_v<T, C>) {
    if (!log) {  // store the exps, then scale them
      add_lanes(acc, n, [&](int64_t r) {
        const C e = math::exp(x[r] - m);
        y[r] = e;
        return static_cast<double>(e);
      });
      const C inv = static_cast<C>(1.0 / combine_lanes(acc));
      for (int64_t r = 0; r < n; ++r) y[r] *= inv;
      return;
    }
  }
  add_lanes(acc, n,
            [&](int64_t r) { return static_cast<double>(math::exp(static_cast<C>(x[r]) - m)); });
  const double sum = combine_lanes(acc);
  if (log) {
    const C shift = m + static_cast<C>(std::log(sum));
    for (int64_t r = 0; r < n; ++r) y[r] = static_cast<T>(static_cast<C>(x[r]) - shift);
  } else {
    const C inv = static_cast<C>(1.0 / sum);
    for (int64_t r = 0; r < n; ++r) {
      y[r] = static_cast<T>(math::exp(static_cast<C>(x[r]) - m) * inv);
    }
  }
}

/// softmax_backward_slice for float32 (Note [Softmax float rows]): always for softmax; for
/// log_softmax when every y is in [kFastExpMin, 0], false (gi untouched) otherwise.
inline bool softmax_backward_slice_fast(float* gi, const float* g, const float* y, int64_t n,
                                        bool log) {
  constexpr int64_t W = kSumLanes;
  VecLanes acc;
  int64_t r = 0;
  float gbuf[W] = {}, ybuf[W] = {};  // the tail, padded with 0
  const int64_t tail = n % W;
  std::copy(g + (n - tail), g + n, gbuf);
  std::copy(y + (n - tail), y + n, ybuf);
  auto count = [&](int k) { return static_cast<int>(std::min<int64_t>(kVecF, tail - k * kVecF)); };
  if (log) {
    VecU ok = VecU{} + ~0u;  // every y so far in the domain (false for NaN)
    auto check = [&](VecF v) {
      ok &= reinterpret_cast<VecU>(v >= kFastExpMin) & reinterpret_cast<VecU>(v <= 0.0f);
    };
    for (; r + W <= n; r += W) {
      for (int k = 0; k < kVecsPerLanes; ++k) {
        acc.add(k, load_vec(g + r + k * kVecF));
        check(load_vec(y + r + k * kVecF));
      }
    }
    for (int k = 0; k < kVecsPerLanes && k * kVecF < tail; ++k) {
      acc.add(k, load_vec(gbuf + k * kVecF), count(k));
      check(load_vec(ybuf + k * kVecF));
    }
    for (int l = 0; l < kVecF; ++l) {
      if (ok[l] == 0) return false;
    }
    const VecF s = splat(static_cast<float>(acc.combine()));
    auto grad = [&](const float* gp, const float* yp) {
      return load_vec(gp) - exp_nonpositive(load_vec(yp)) * s;
    };
    for (r = 0; r + kVecF <= n; r += kVecF) store_vec(gi + r, grad(g + r, y + r));
    const int64_t rest = n - r, from = tail - rest;  // the last n % kVecF, from the buffers
    if (rest > 0) {
      store_vec(gbuf + from, grad(gbuf + from, ybuf + from));
      std::copy(gbuf + from, gbuf + tail, gi + r);
    }
    return true;
  }
  for (; r + W <= n; r += W) {
    for (int k = 0; k < kVecsPerLanes; ++k) {
      acc.add_products(k, load_vec(g + r + k * kVecF), load_vec(y + r + k * kVecF));
    }
  }
  for (int k = 0; k < kVecsPerLanes && k * kVecF < tail; ++k) {
    acc.add_products(k, load_vec(gbuf + k * kVecF), load_vec(ybuf + k * kVecF), count(k));
  }
  const float dot = static_cast<float>(acc.combine());
  for (r = 0; r < n; ++r) gi[r] = y[r] * (g[r] - dot);
  return true;
}

/// The input gradient of n contiguous elements (softmax_backward_kernel's formulas).
template <class T>
void softmax_backward_slice(T* gi, const T* g, const T* y, int64_t n, bool log) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, float>) {
    if (softmax_backward_slice_fast(gi, g, y, n, log)) return;
  }
  double acc[kSumLanes] = {};
  if (log) {
    add_lanes(acc, n, [&](int64_t r) { return static_cast<double>(static_cast<C>(g[r])); });
    const C s = static_cast<C>(combine_lanes(acc));
    for (int64_t r = 0; r < n; ++r) {
      gi[r] = static_cast<T>(static_cast<C>(g[r]) - math::exp(static_cast<C>(y[r])) * s);
    }
  } else {
    add_lanes(acc, n, [&](int64_t r) {
      return static_cast<double>(static_cast<C>(g[r])) * static_cast<double>(static_cast<C>(y[r]));
    });
    const C dot = static_cast<C>(combine_lanes(acc));
    for (int64_t r = 0; r < n; ++r) {
      gi[r] = static_cast<T>(static_cast<C>(y[r]) * (static_cast<C>(g[r]) - dot));
    }
  }
}

/// The sum lanes of w <= kInnerBlock columns: lane l of column j at v[l][j] (Note [Softmax
/// sums]).
struct BlockLanes {
  double v[kSumLanes][kInnerBlock];

  void clear(int64_t w) {
    for (int l = 0; l < kSumLanes; ++l) {
      for (int64_t j = 0; j < w; ++j) v[l][j] = 0;
    }
  }
  /// The tree of combine_lanes, column by column; the sums end up in v[0].
  void combine(int64_t w) {
    for (int h = kSumLanes / 2; h >= 1; h /= 2) {
      for (int l = 0; l < h; ++l) {
        for (int64_t j = 0; j < w; ++j) v[l][j] += v[l + h][j];
      }
    }
  }
};

/// The maxima of w <= kInnerBlock adjacent columns of a [n, inner] row-major block into m, as
/// slice_max gives them (a max does not depend on the order, the sign of zero aside).
template <class T>
void block_max(const T* x, int64_t n, int64_t inner, int64_t w, compute_t<T>* m) {
  using C = compute_t<T>;
  for (int64_t j = 0; j < w; ++j) m[j] = -std::numeric_limits<C>::infinity();
  for (int64_t r = 0; r < n; ++r) {
    const T* xr = x + r * inner;
    for (int64_t j = 0; j < w; ++j) m[j] = max_of(m[j], static_cast<C>(xr[j]));
  }
  for (int64_t j = 0; j < w; ++j) m[j] = m[j] + C(0);
}

/// softmax_slice for the w <= kInnerBlock adjacent slices starting at x / y (columns of a
/// [n, inner] row-major block), all passes running along the rows.
template <class T>
void softmax_block(const T* x, T* y, int64_t n, int64_t inner, int64_t w, bool log) {
  using C = compute_t<T>;
  C m[kInnerBlock];
  block_max(x, n, inner, w, m);
  BlockLanes acc;
  acc.clear(w);
  if constexpr (std::is_same_v<T, C>) {
    if (!log) {  // store the exps, then scale them
      for (int64_t r = 0; r < n; ++r) {
        const T* xr = x + r * inner;
        T* yr = y + r * inner;
        double* lane = acc.v[r % kSumLanes];
        for (int64_t j = 0; j < w; ++j) {
          const C e = math::exp(xr[j] - m[j]);
          yr[j] = e;
          lane[j] += static_cast<double>(e);
        }
      }
      acc.combine(w);
      C inv[kInnerBlock];
      for (int64_t j = 0; j < w; ++j) inv[j] = static_cast<C>(1.0 / acc.v[0][j]);
      for (int64_t r = 0; r < n; ++r) {
        T* yr = y + r * inner;
        for (int64_t j = 0; j < w; ++j) yr[j] *= inv[j];
      }
      return;
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    const T* xr = x + r * inner;
    double* lane = acc.v[r % kSumLanes];
    for (int64_t j = 0; j < w; ++j) {
      lane[j] += static_cast<double>(math::exp(static_cast<C>(xr[j]) - m[j]));
    }
  }
  acc.combine(w);
  if (log) {
    C shift[kInnerBlock];
    for (int64_t j = 0; j < w; ++j) shift[j] = m[j] + static_cast<C>(std::log(acc.v[0][j]));
    for (int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * inner;
      T* yr = y + r * inner;
      for (int64_t j = 0; j < w; ++j) yr[j] = static_cast<T>(static_cast<C>(xr[j]) - shift[j]);
    }
  } else {
    C inv[kInnerBlock];
    for (int64_t j = 0; j < w; ++j) inv[j] = static_cast<C>(1.0 / acc.v[0][j]);
    for (int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * inner;
      T* yr = y + r * inner;
      for (int64_t j = 0; j < w; ++j) {
        yr[j] = static_cast<T>(math::exp(static_cast<C>(xr[j]) - m[j]) * inv[j]);
      }
    }
  }
}

/// softmax_backward_slice for w <= kInnerBlock adjacent slices, as softmax_block.
template <class T>
void softmax_backward_block(T* gi, const T* g, const T* y, int64_t n, int64_t inner, int64_t w,
                            bool log) {
  using C = compute_t<T>;
  BlockLanes acc;
  acc.clear(w);
  C s[kInnerBlock];
  if (log) {
    for (int64_t r = 0; r < n; ++r) {
      const T* gr = g + r * inner;
      double* lane = acc.v[r % kSumLanes];
      for (int64_t j = 0; j < w; ++j) lane[j] += static_cast<double>(static_cast<C>(gr[j]));
    }
    acc.combine(w);
    for (int64_t j = 0; j < w; ++j) s[j] = static_cast<C>(acc.v[0][j]);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t p = r * inner;
      for (int64_t j = 0; j < w; ++j) {
        gi[p + j] =
            static_cast<T>(static_cast<C>(g[p + j]) - math::exp(static_cast<C>(y[p + j])) * s[j]);
      }
    }
  } else {
    for (int64_t r = 0; r < n; ++r) {
      const int64_t p = r * inner;
      double* lane = acc.v[r % kSumLanes];
      for (int64_t j = 0; j < w; ++j) {
        lane[j] += static_cast<double>(static_cast<C>(g[p + j])) *
                   static_cast<double>(static_cast<C>(y[p + j]));
      }
    }
    acc.combine(w);
    for (int64_t j = 0; j < w; ++j) s[j] = static_cast<C>(acc.v[0][j]);  // the dot products
    for (int64_t r = 0; r < n; ++r) {
      const int64_t p = r * inner;
      for (int64_t j = 0; j < w; ++j) {
        gi[p + j] = static_cast<T>(static_cast<C>(y[p + j]) * (static_cast<C>(g[p + j]) - s[j]));
      }
    }
  }
}

/// Calls f(block_offset, width) for blocks of up to kInnerBlock adjacent slices covering every
/// (outer, inner) slice, in parallel. Blocks are narrowed (to 8 columns at least) while there
/// are fewer of them than threads.
template <class F>
void for_each_block(int64_t outer, int64_t n, int64_t inner, const F& f) {
  int64_t bw = kInnerBlock;
  const int64_t threads = get_num_threads();
  while (bw > 8 && outer * ((inner + bw - 1) / bw) < threads) bw /= 2;
  const int64_t per_outer = (inner + bw - 1) / bw;
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n * bw, 1));
  parallel_for(0, outer * per_outer, grain, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t o = k / per_outer, j0 = (k % per_outer) * bw;
      f(o * n * inner + j0, std::min(bw, inner - j0));
    }
  });
}

/// Calls f(slice_offset) for every slice of a contiguous [outer, n] tensor, in parallel.
template <class F>
void for_each_row(int64_t outer, int64_t n, const F& f) {
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
  parallel_for(0, outer, grain, [&](int64_t b, int64_t e) {
    for (int64_t s = b; s < e; ++s) f(s * n);
  });
}

/// softmax_kernel for element type T: rows when inner == 1, blocks of columns otherwise.
template <class T>
void softmax_typed(const Tensor& out, const Tensor& in, bool log) {
  const int64_t outer = in.size(0), n = in.size(1), inner = in.size(2);
  const T* x = in.data_ptr<T>();
  T* y = out.data_ptr<T>();
  if (inner == 1) {
    for_each_row(outer, n, [&](int64_t off) { softmax_slice<T>(x + off, y + off, n, log); });
  } else {
    for_each_block(outer, n, inner, [&](int64_t off, int64_t w) {
      softmax_block<T>(x + off, y + off, n, inner, w, log);
    });
  }
}

/// softmax_backward_kernel for element type T, as softmax_typed.
template <class T>
void softmax_backward_typed(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out,
                            bool log) {
  const int64_t outer = out.size(0), n = out.size(1), inner = out.size(2);
  T* gi = grad_in.data_ptr<T>();
  const T* g = grad_out.data_ptr<T>();
  const T* y = out.data_ptr<T>();
  if (inner == 1) {
    for_each_row(outer, n, [&](int64_t off) {
      softmax_backward_slice<T>(gi + off, g + off, y + off, n, log);
    });
  } else {
    for_each_block(outer, n, inner, [&](int64_t off, int64_t w) {
      softmax_backward_block<T>(gi + off, g + off, y + off, n, inner, w, log);
    });
  }
}

}  // namespace
}  // namespace sl::cpu
