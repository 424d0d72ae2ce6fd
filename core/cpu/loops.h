// Strided N-ary loops for CPU kernels (internal header).
//
// An elementwise kernel hands its operands (the output first, then inputs already expanded to
// the output's shape, so broadcast dims have stride 0) to `for_each_strided`. The loop drops
// size-1 dims, merges dims that are contiguous for every operand, splits the flat index range
// across threads, and calls inner(ptrs, byte_strides, n) for runs along the innermost dim. The
// helpers `unary_loop`/`binary_loop`/`ternary_loop` wrap a scalar lambda and add the
// fast paths the compiler vectorises: all operands contiguous, or an input broadcast as a scalar.
// `unary_loop_fast_domain` adds blocks that skip to a cheaper form of a float function when the
// whole block lies in that form's domain (Note [Gelu fast domain] in core/cpu/math.h).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/cpu/isa.h"
#include "core/error.h"
#include "core/layout.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace sl::cpu {
inline namespace SL_CPU_ISA {  // Note [CPU ISA dispatch]

/// Elements per thread below which elementwise loops stay single-threaded.
inline constexpr int64_t kElementwiseGrain = 32768;

// Note [Elementwise prefetch]
// A compute-bound elementwise kernel (exp, tanh, gelu, ...) on an input larger than the caches
// overlapped its arithmetic with memory traffic poorly on the Xeon family 6 model 207: gelu's
// interleaved block (Note [Interleaved gelu]) took 0.84-0.97 ns per float out of cache, near the
// sum of its arithmetic in L2 (0.53-0.75) and a copy (0.6-0.75). Loops over such inputs therefore
// prefetch the input line kPrefetchAheadBytes ahead of each line they read. Measured with 16M
// floats, medians of 9 alternating passes in one process: gelu 0.67-0.83 ns per float against
// 0.84-0.97 without, with distances of 3-6 KiB alike (1-2 KiB and 8 KiB slower); the compiler's
// loops over exp 0.71-0.87 against 0.79-0.99, tanh 0.94-1.17 against 0.99-1.22. In bench_core (3
// alternating rounds of the library without and with it), gelu went from 53-72% of memcpy to 71-88%
// at 1 thread and from 43-70% to 75-85% at 2; for the other costly ops, 1 and 2 threads together:
// exp from 52-73% to 71-93%, sigmoid 43-66% to 59-80%, tanh 39-60% to 51-65%, gelu (tanh) 41-64% to
// 62-75%. Prefetching the output for writing gained nothing clear. Cutting the loop into prefetch
// blocks costs about 10% in L2, so loops do it only for inputs of kPrefetchMinBytes or more, and
// only for the costly ops (elementwise_kernels.h); memory-bound ones (copies, add, relu) are left
// to the hardware prefetcher.
inline constexpr uintptr_t kPrefetchAheadBytes = 4096;
inline constexpr int64_t kPrefetchMinBytes = int64_t{4} << 20;
/// Elements per prefetch block of unary_loop.
inline constexpr int64_t kPrefetchBlock = 64;

/// Whether an input of `numel` elements of `elem_bytes` each is large enough for the loops of
/// costly ops to prefetch it (Note [Elementwise prefetch]).
inline bool input_worth_prefetching(int64_t numel, int64_t elem_bytes) {
  return numel >= kPrefetchMinBytes / elem_bytes;
}

/// Prefetches, for reading, the 64-byte lines kPrefetchAheadBytes past each line of [p, p +
/// bytes). A prefetch never faults, even past the end of the buffer; the address is formed as an
/// integer, not as a pointer beyond the buffer.
inline void prefetch_ahead(const void* p, int64_t bytes) {
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(p) + kPrefetchAheadBytes;
  for (int64_t q = 0; q < bytes; q += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(ahead + static_cast<uintptr_t>(q)), 0, 3);
  }
}

/// Builds the coalesced layout (core/layout.h) of operands that all have the same sizes.
template <int N>
StridedLayout<N> make_layout(const std::array<const Tensor*, N>& ops) {
  return make_strided_layout<N>(ops, "cpu loop");
}

/// Runs inner(char* ptrs[N], const int64_t* inner_strides, int64_t n) over the layout, in
/// parallel over flat index ranges.
template <int N, class Inner>
void for_each_strided(const StridedLayout<N>& L, const Inner& inner,
                      int64_t grain = kElementwiseGrain) {
  if (L.numel == 0) return;
  parallel_for(0, L.numel, grain, [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxLayoutDims];
    char* ptrs[N];
    // decompose begin into a multi-index
    int64_t rem = begin;
    for (int d = 0; d < L.ndim; ++d) {
      idx[d] = rem % L.sizes[d];
      rem /= L.sizes[d];
    }
    for (int k = 0; k < N; ++k) {
      ptrs[k] = L.base[k];
      for (int d = 0; d < L.ndim; ++d) ptrs[k] += idx[d] * L.strides[k][d];
    }
    int64_t inner_strides[N];
    for (int k = 0; k < N; ++k) inner_strides[k] = L.strides[k][0];
    int64_t pos = begin;
    while (pos < end) {
      int64_t n = L.sizes[0] - idx[0];
      if (n > end - pos) n = end - pos;
      inner(ptrs, inner_strides, n);
      pos += n;
      if (pos >= end) break;
      // advance: innermost dim wraps, carry outward
      for (int k = 0; k < N; ++k) ptrs[k] += n * L.strides[k][0];
      idx[0] += n;
      for (int d = 0; d < L.ndim - 1 && idx[d] == L.sizes[d]; ++d) {
        for (int k = 0; k < N; ++k) {
          ptrs[k] -= L.sizes[d] * L.strides[k][d];
          ptrs[k] += L.strides[k][d + 1];
        }
        idx[d] = 0;
        ++idx[d + 1];
      }
    }
  });
}

/// out[i] = f(a[i]) with element types Out and In (C++ types matching the tensors' dtypes).
/// Prefetch: f is costly enough that contiguous inputs of kPrefetchMinBytes or more are read
/// with software prefetch (Note [Elementwise prefetch]).
template <class Out, class In, bool Prefetch = false, class F>
void unary_loop(const Tensor& out, const Tensor& a, const F& f) {
  auto L = make_layout<2>({&out, &a});
  const bool large = input_worth_prefetching(L.numel, static_cast<int64_t>(sizeof(In)));
  for_each_strided<2>(L, [&](char** p, const int64_t* s, int64_t n) {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const In* x = reinterpret_cast<const In*>(p[1]);
    if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
      if (Prefetch && large) {  // Prefetch first: without it the blocked loop is not compiled
        for (int64_t i = 0; i < n; i += kPrefetchBlock) {
          const int64_t e = std::min(n, i + kPrefetchBlock);
          prefetch_ahead(x + i, (e - i) * static_cast<int64_t>(sizeof(In)));
          for (int64_t j = i; j < e; ++j) o[j] = f(x[j]);
        }
        return;
      }
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<Out*>(p[0] + i * s[0]) = f(*reinterpret_cast<const In*>(p[1] + i * s[1]));
      }
    }
  });
}

/// Floats per block of unary_loop_fast_domain: 4 vectors of the build's widest float vector
/// (Note [Interleaved gelu]), 64 in the AVX-512 build, 32 in the others.
#if defined(__AVX512F__)
inline constexpr int64_t kFastDomainBlock = 64;
#else
inline constexpr int64_t kFastDomainBlock = 32;
#endif

/// out[i] = f(a[i]) for float tensors, where f has a cheaper form `fast` on |x| <= fast_max
/// (Note [Gelu fast domain] in core/cpu/math.h): f must equal fast bit for bit there. Contiguous
/// runs go in blocks of kFastDomainBlock; a block whose elements all lie in the domain (NaN never
/// does) runs through fast only, any other block and the remainder through f. fast_block, when
/// given, replaces both the domain check and fast: fast_block(in, out) on kFastDomainBlock floats
/// (e.g. the interleaved form of Note [Interleaved gelu]) computes the block and returns true when
/// all of it lies in the domain, and otherwise writes nothing and returns false (the block then
/// runs through f); it must equal fast bit for bit.
template <class F, class Fast, class FastBlock = std::nullptr_t>
void unary_loop_fast_domain(const Tensor& out, const Tensor& a, float fast_max, const F& f,
                            const Fast& fast, const FastBlock& fast_block = nullptr) {
  const uint32_t max_bits = std::bit_cast<uint32_t>(fast_max);
  auto L = make_layout<2>({&out, &a});
  // the functions here are all costly (Note [Elementwise prefetch])
  const bool prefetch = input_worth_prefetching(L.numel, static_cast<int64_t>(sizeof(float)));
  for_each_strided<2>(L, [&](char** p, const int64_t* s, int64_t n) {
    float* o = reinterpret_cast<float*>(p[0]);
    const float* x = reinterpret_cast<const float*>(p[1]);
    if (s[0] != sizeof(float) || s[1] != sizeof(float)) {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<float*>(p[0] + i * s[0]) =
            f(*reinterpret_cast<const float*>(p[1] + i * s[1]));
      }
      return;
    }
    int64_t i = 0;
    for (; i + kFastDomainBlock <= n; i += kFastDomainBlock) {
      if (prefetch) prefetch_ahead(x + i, kFastDomainBlock * static_cast<int64_t>(sizeof(float)));
      // ivdep: out is the input itself or does not overlap it, so no element feeds another
      if constexpr (!std::is_same_v<FastBlock, std::nullptr_t>) {
        if (fast_block(x + i, o + i)) continue;
      } else {
        // the largest |x| of the block, as bits (NaN above inf above fast_max); not unrolled, so
        // that it is vectorised as a loop (fully unrolled first, it would stay scalar)
        uint32_t top = 0;
#pragma GCC unroll 1
        for (int64_t j = 0; j < kFastDomainBlock; ++j) {
          top = std::max(top, std::bit_cast<uint32_t>(x[i + j]) & 0x7fffffffu);
        }
        if (top <= max_bits) {
#pragma GCC ivdep
          for (int64_t j = 0; j < kFastDomainBlock; ++j) o[i + j] = fast(x[i + j]);
          continue;
        }
      }
#pragma GCC ivdep
      for (int64_t j = 0; j < kFastDomainBlock; ++j) o[i + j] = f(x[i + j]);
    }
    for (; i < n; ++i) o[i] = f(x[i]);
  });
}

/// out[i] = f(a[i], b[i]).
template <class Out, class InA, class InB, class F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, const F& f) {
  auto L = make_layout<3>({&out, &a, &b});
  for_each_strided<3>(L, [&](char** p, const int64_t* s, int64_t n) {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const InA* x = reinterpret_cast<const InA*>(p[1]);
    const InB* y = reinterpret_cast<const InB*>(p[2]);
    if (s[0] == sizeof(Out) && s[1] == sizeof(InA) && s[2] == sizeof(InB)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (s[0] == sizeof(Out) && s[1] == sizeof(InA) && s[2] == 0) {
      const InB yv = *y;
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else if (s[0] == sizeof(Out) && s[1] == 0 && s[2] == sizeof(InB)) {
      const InA xv = *x;
      for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<Out*>(p[0] + i * s[0]) =
            f(*reinterpret_cast<const InA*>(p[1] + i * s[1]),
              *reinterpret_cast<const InB*>(p[2] + i * s[2]));
      }
    }
  });
}

/// out[i] = f(a[i], b[i], c[i]).
template <class Out, class InA, class InB, class InC, class F>
void ternary_loop(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c,
                  const F& f) {
  auto L = make_layout<4>({&out, &a, &b, &c});
  for_each_strided<4>(L, [&](char** p, const int64_t* s, int64_t n) {
    if (s[0] == sizeof(Out) && s[1] == sizeof(InA) && s[2] == sizeof(InB) && s[3] == sizeof(InC)) {
      Out* o = reinterpret_cast<Out*>(p[0]);
      const InA* x = reinterpret_cast<const InA*>(p[1]);
      const InB* y = reinterpret_cast<const InB*>(p[2]);
      const InC* z = reinterpret_cast<const InC*>(p[3]);
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i], z[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<Out*>(p[0] + i * s[0]) =
            f(*reinterpret_cast<const InA*>(p[1] + i * s[1]),
              *reinterpret_cast<const InB*>(p[2] + i * s[2]),
              *reinterpret_cast<const InC*>(p[3] + i * s[3]));
      }
    }
  });
}

}  // namespace SL_CPU_ISA
}  // namespace sl::cpu
