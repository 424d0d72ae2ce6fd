// The type that kernels do integer arithmetic in, so that it wraps instead of overflowing.
//
// Note [Integer wraparound]
// Integer tensor arithmetic wraps modulo 2^bits (two's complement), as PyTorch's results do:
// int32 2147483647 + 1 is -2147483648, an int64 sum of four INT64_MAX is -4. In C++ (and CUDA
// C++) signed overflow is undefined behaviour: UBSan aborts, and the compiler may assume it never
// happens. Kernels therefore compute integer add, sub, mul, neg, abs, square, pow and the integer
// sums and products in wrap_t<C> and convert the result back to C; C++20 defines that
// conversion as modulo 2^bits. wrap_t is the unsigned type of C's width, but at least unsigned
// int (a narrower unsigned type would promote back to int, where a product can overflow again).
// For floating and bool C it is C itself, so the floating code is the same expression as before.
// Unsigned addition and multiplication vectorise as the signed ones do.
//
// Division and remainder have no wrapping unsigned form; their one overflowing case is a divisor
// of -1 (INT_MIN / -1), which the kernels special-case: fmod and remainder by -1 give the exact
// 0. Integer sums accumulate in uint64_t (acc_wrap_t) and give the int64 result modulo 2^64.
// Used by core/cpu/elementwise_kernels.h, reduce.cpp, index.cpp, matmul.cpp and their CUDA
// counterparts (core/cuda/binary.cuh, unary.cu, reduce.cuh, reduce_sum.cu, index.cu, matmul.cu).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

namespace sl {

template <class C, bool = std::is_integral_v<C> && !std::is_same_v<C, bool>>
struct wrap_type {
  using type = C;
};
template <class C>
struct wrap_type<C, true> {
  using type = std::make_unsigned_t<std::common_type_t<C, int>>;
};
/// Integer arithmetic on C done in this type wraps (Note [Integer wraparound]); C itself for
/// floating types and bool.
template <class C>
using wrap_t = typename wrap_type<C>::type;

/// The accumulator of integer sums and products: uint64_t, converted to the int64 result at the
/// end (Note [Integer wraparound]). `Float` is the accumulator of floating inputs.
template <bool IsFloat, class Float = double>
using sum_acc_wrap_t = std::conditional_t<IsFloat, Float, uint64_t>;

/// An accumulator's value as the result type sees it: a uint64_t integer accumulator as the
/// int64_t with the same bits, anything else unchanged. Host and device.
template <class A>
constexpr auto acc_value(A a) {
  if constexpr (std::is_same_v<A, uint64_t>) {
    return static_cast<int64_t>(a);
  } else {
    return a;
  }
}

/// a % b for integers, b != 0; any a % -1 is the exact 0 (INT_MIN % -1 overflows in C++ and
/// traps on x86; Note [Integer wraparound]). Host and device (constexpr).
template <class C>
constexpr C int_rem(C a, C b) {
  if constexpr (std::is_signed_v<C>) {
    if (b == C(-1)) return C(0);
  }
  return static_cast<C>(a % b);
}

// Note [Float to integer conversion]
// Converting a floating value to an integer dtype truncates toward zero; a NaN, an infinity or a
// value whose truncation the integer type cannot hold is undefined behaviour in C++. Casts give
// those the most negative value of the type instead: what x86's conversion instructions return
// (the "integer indefinite"), and so what PyTorch gives on x86 CPUs (torch.tensor([3e9, nan,
// inf]).to(torch.int32) is three times -2147483648). The CUDA kernels use the same rule, so a
// GPU cast matches the CPU's (the GPU's own instruction would saturate and map NaN to 0).

/// v truncated toward zero as a signed integer To, or To's minimum when v is NaN, infinite or out
/// of To's range (Note [Float to integer conversion]). Host and device (constexpr).
template <class To>
constexpr To float_to_int(double v) {
  static_assert(std::is_integral_v<To> && std::is_signed_v<To>);
  constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());  // -2^(bits-1)
  // below 53 bits lo - 1 is exact and (lo - 1, lo) truncates to lo; for 64 bits no double lies
  // between lo - 1 and lo
  const bool fits = (sizeof(To) * 8 < 53 ? v > lo - 1.0 : v >= lo) && v < -lo;
  return fits ? static_cast<To>(v) : std::numeric_limits<To>::min();
}

}  // namespace sl
