// The elementwise family's CPU kernel bodies (internal header), included by
// core/cpu/elementwise.cpp and, compiled with AVX2+FMA, by core/cpu/elementwise_avx2.cpp
// (Note [CPU ISA dispatch]). Everything is in an anonymous namespace so that each build keeps
// its own copy.
//
// Each op is a scalar function on the compute type (float for f16/bf16); unary_loop/binary_loop
// add the contiguous fast paths that the compiler vectorises. Float gelu and gelu_tanh run
// through unary_loop_fast_domain (Note [Gelu fast domain] in core/cpu/math.h); the AVX2 build
// computes gelu's all-fast blocks with the interleaved form of Note [Interleaved gelu].
#pragma once

#include <cmath>
#include <type_traits>
#include <utility>

#include "core/cpu/gelu_block.h"
#include "core/cpu/loops.h"
#include "core/cpu/math.h"
#include "core/int_wrap.h"
#include "core/ops/elementwise.h"

namespace sl::cpu {
namespace {

template <class C>
inline C sign_of(C x) {
  return static_cast<C>((C(0) < x) - (x < C(0)));
}

/// Integer arithmetic is done in W = wrap_t<C> and wraps (Note [Integer wraparound]); for
/// floating C, W is C and the expressions are unchanged.
template <UnaryOp op, class C>
inline auto unary_fn(C x) {
  using W = wrap_t<C>;
  if constexpr (op == UnaryOp::neg) return static_cast<C>(-W(x));
  if constexpr (op == UnaryOp::abs) {
    if constexpr (std::is_same_v<C, bool>)
      return x;
    else
      return static_cast<C>(x < C(0) ? -W(x) : W(x));
  }
  if constexpr (op == UnaryOp::exp) return math::exp(x);
  if constexpr (op == UnaryOp::log) return std::log(x);
  if constexpr (op == UnaryOp::log1p) return std::log1p(x);
  if constexpr (op == UnaryOp::expm1) return std::expm1(x);
  if constexpr (op == UnaryOp::sqrt) return std::sqrt(x);
  if constexpr (op == UnaryOp::rsqrt) return C(1) / std::sqrt(x);
  if constexpr (op == UnaryOp::square) return static_cast<C>(W(x) * W(x));
  if constexpr (op == UnaryOp::reciprocal) return C(1) / x;
  if constexpr (op == UnaryOp::tanh) return math::tanh(x);
  if constexpr (op == UnaryOp::sigmoid) return math::sigmoid(x);
  if constexpr (op == UnaryOp::relu) {
    if constexpr (std::is_same_v<C, bool>)
      return x;
    else
      return x < C(0) ? C(0) : x;  // NaN and -0 pass through, as PyTorch's relu
  }
  if constexpr (op == UnaryOp::gelu) return math::gelu(x);
  if constexpr (op == UnaryOp::gelu_tanh) return math::gelu_tanh(x);
  if constexpr (op == UnaryOp::silu) return x * math::sigmoid(x);
  if constexpr (op == UnaryOp::sin) return std::sin(x);
  if constexpr (op == UnaryOp::cos) return std::cos(x);
  if constexpr (op == UnaryOp::sign) {
    if constexpr (std::is_same_v<C, bool>)
      return x;
    else
      return sign_of(x);
  }
  if constexpr (op == UnaryOp::erf) return math::erf(x);
  if constexpr (op == UnaryOp::floor) {
    if constexpr (std::is_floating_point_v<C>)
      return std::floor(x);
    else
      return x;
  }
  if constexpr (op == UnaryOp::ceil) {
    if constexpr (std::is_floating_point_v<C>)
      return std::ceil(x);
    else
      return x;
  }
  if constexpr (op == UnaryOp::round) {
    if constexpr (std::is_floating_point_v<C>)
      return std::nearbyint(x);  // half to even
    else
      return x;
  }
  if constexpr (op == UnaryOp::trunc) {
    if constexpr (std::is_floating_point_v<C>)
      return std::trunc(x);
    else
      return x;
  }
  if constexpr (op == UnaryOp::logical_not) return !static_cast<bool>(x);
  if constexpr (op == UnaryOp::isnan) {
    if constexpr (std::is_floating_point_v<C>)
      return x != x;
    else
      return false;
  }
  if constexpr (op == UnaryOp::isinf) {
    if constexpr (std::is_floating_point_v<C>)
      return std::isinf(x);
    else
      return false;
  }
  if constexpr (op == UnaryOp::isfinite) {
    if constexpr (std::is_floating_point_v<C>)
      return std::isfinite(x);
    else
      return true;
  }
}

/// Ops whose arithmetic per element outweighs its memory traffic, so that their loops prefetch
/// large inputs (Note [Elementwise prefetch] in core/cpu/loops.h).
constexpr bool unary_op_is_costly(UnaryOp op) {
  switch (op) {
    case UnaryOp::exp:
    case UnaryOp::log:
    case UnaryOp::log1p:
    case UnaryOp::expm1:
    case UnaryOp::tanh:
    case UnaryOp::sigmoid:
    case UnaryOp::silu:
    case UnaryOp::sin:
    case UnaryOp::cos:
    case UnaryOp::erf:
      return true;
    default:
      return false;  // gelu and gelu_tanh: unary_loop_fast_domain prefetches on its own
  }
}

template <UnaryOp op, class T>
void run_unary(const Tensor& out, const Tensor& in) {
  using C = compute_t<T>;
  if constexpr (unary_op_needs_float(op) && !std::is_floating_point_v<C>) {
    detail::throw_error<DTypeError>(unary_op_name(op), ": expected a floating dtype, got ",
                                    dtype_name(dtype_v<T>));
  } else if constexpr (op == UnaryOp::gelu && std::is_same_v<T, float>) {
    unary_loop_fast_domain(
        out, in, math::f32::kGeluFastMax, [](float v) { return math::f32::gelu(v); },
        [](float v) { return math::f32::gelu_fast(v); }, math::f32::kGeluFastBlock);
  } else if constexpr (op == UnaryOp::gelu_tanh && std::is_same_v<T, float>) {
    unary_loop_fast_domain(
        out, in, math::f32::kGeluTanhFastMax, [](float v) { return math::f32::gelu_tanh(v); },
        [](float v) { return math::f32::gelu_tanh_fast(v); });
  } else if constexpr (op == UnaryOp::logical_not || op == UnaryOp::isnan || op == UnaryOp::isinf ||
                       op == UnaryOp::isfinite) {
    unary_loop<bool, T>(out, in, [](T v) -> bool { return unary_fn<op>(static_cast<C>(v)); });
  } else {
    unary_loop<T, T, unary_op_is_costly(op)>(
        out, in, [](T v) -> T { return static_cast<T>(unary_fn<op>(static_cast<C>(v))); });
  }
}

template <class T, size_t... I>
void unary_table(UnaryOp op, const Tensor& out, const Tensor& in, std::index_sequence<I...>) {
  using Fn = void (*)(const Tensor&, const Tensor&);
  static constexpr Fn table[] = {&run_unary<static_cast<UnaryOp>(I), T>...};
  table[static_cast<size_t>(op)](out, in);
}

template <class C>
inline C py_fmod(C a, C b) {
  if constexpr (std::is_floating_point_v<C>)
    return std::fmod(a, b);
  else
    return int_rem(a, b);
}

template <class C>
inline C py_remainder(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    C r = std::fmod(a, b);
    return (r != C(0) && ((r < C(0)) != (b < C(0)))) ? r + b : r;
  } else {
    C r = int_rem(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<C>(r + b) : r;  // |r| < |b|: no overflow
  }
}

/// base^exp modulo 2^bits (Note [Integer wraparound]); a negative exp gives PyTorch's 0, or +-1
/// for bases +-1.
template <class C>
inline C int_pow(C base, C exp) {
  if (exp < 0) return base == 1 ? 1 : (base == -1 ? (exp % 2 ? -1 : 1) : 0);
  using W = wrap_t<C>;
  W r = 1, b = W(base);
  while (exp) {
    if (exp & 1) r = static_cast<W>(r * b);
    b = static_cast<W>(b * b);
    exp >>= 1;
  }
  return static_cast<C>(r);
}

/// Integer add, sub and mul are done in W = wrap_t<C> and wrap (Note [Integer wraparound]); for
/// floating C, W is C and the expressions are unchanged.
template <BinaryOp op, class C>
inline auto binary_fn(C a, C b, C alpha) {
  using W = wrap_t<C>;
  if constexpr (op == BinaryOp::add) {
    if constexpr (std::is_same_v<C, bool>)
      return static_cast<bool>(a || (b && alpha));
    else
      return static_cast<C>(W(a) + W(alpha) * W(b));
  }
  if constexpr (op == BinaryOp::sub) return static_cast<C>(W(a) - W(alpha) * W(b));
  if constexpr (op == BinaryOp::mul) {
    if constexpr (std::is_same_v<C, bool>)
      return static_cast<bool>(a && b);
    else
      return static_cast<C>(W(a) * W(b));
  }
  if constexpr (op == BinaryOp::div) return static_cast<C>(a / b);
  if constexpr (op == BinaryOp::pow) {
    if constexpr (std::is_floating_point_v<C>)
      return static_cast<C>(std::pow(a, b));
    else if constexpr (std::is_same_v<C, bool>)
      return static_cast<bool>(a || !b);
    else
      return int_pow(a, b);
  }
  if constexpr (op == BinaryOp::maximum) {
    if constexpr (std::is_floating_point_v<C>)
      return (a != a || b != b) ? a + b : (a > b ? a : b);
    else
      return a > b ? a : b;
  }
  if constexpr (op == BinaryOp::minimum) {
    if constexpr (std::is_floating_point_v<C>)
      return (a != a || b != b) ? a + b : (a < b ? a : b);
    else
      return a < b ? a : b;
  }
  if constexpr (op == BinaryOp::atan2) return static_cast<C>(std::atan2(a, b));
  if constexpr (op == BinaryOp::fmod) return py_fmod(a, b);
  if constexpr (op == BinaryOp::remainder) return py_remainder(a, b);
  if constexpr (op == BinaryOp::eq) return a == b;
  if constexpr (op == BinaryOp::ne) return a != b;
  if constexpr (op == BinaryOp::lt) return a < b;
  if constexpr (op == BinaryOp::le) return a <= b;
  if constexpr (op == BinaryOp::gt) return a > b;
  if constexpr (op == BinaryOp::ge) return a >= b;
  if constexpr (op == BinaryOp::logical_and) return static_cast<bool>(a) && static_cast<bool>(b);
  if constexpr (op == BinaryOp::logical_or) return static_cast<bool>(a) || static_cast<bool>(b);
  if constexpr (op == BinaryOp::logical_xor) return static_cast<bool>(a) != static_cast<bool>(b);
  // PyTorch's threshold_backward: the gradient passes where y is NaN (not <= 0)
  if constexpr (op == BinaryOp::relu_backward) return b <= C(0) ? C(0) : a;
  if constexpr (op == BinaryOp::sigmoid_backward) return static_cast<C>(a * b * (C(1) - b));
  if constexpr (op == BinaryOp::tanh_backward) return static_cast<C>(a * (C(1) - b * b));
  if constexpr (op == BinaryOp::gelu_backward) return static_cast<C>(a * math::gelu_grad(b));
  if constexpr (op == BinaryOp::gelu_tanh_backward) {
    return static_cast<C>(a * math::gelu_tanh_grad(b));
  }
  if constexpr (op == BinaryOp::silu_backward) {
    C s = math::sigmoid(b);
    return static_cast<C>(a * s * (C(1) + b * (C(1) - s)));
  }
}

template <BinaryOp op>
inline constexpr bool binary_needs_float_v =
    op == BinaryOp::div || op == BinaryOp::atan2 || op >= BinaryOp::relu_backward;

template <BinaryOp op, class T>
void run_binary(const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha_s) {
  using C = compute_t<T>;
  if constexpr (binary_needs_float_v<op> && !std::is_floating_point_v<C>) {
    detail::throw_error<DTypeError>(binary_op_name(op), ": expected a floating dtype, got ",
                                    dtype_name(dtype_v<T>));
  } else if constexpr ((op == BinaryOp::fmod || op == BinaryOp::remainder ||
                        op == BinaryOp::atan2 || op == BinaryOp::sub) &&
                       std::is_same_v<C, bool>) {
    detail::throw_error<DTypeError>(binary_op_name(op), ": not supported for bool tensors");
  } else if constexpr (op >= BinaryOp::eq && op <= BinaryOp::logical_xor) {
    binary_loop<bool, T, T>(out, a, b, [](T x, T y) -> bool {
      return binary_fn<op>(static_cast<C>(x), static_cast<C>(y), C(1));
    });
  } else {
    if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
      if constexpr (op == BinaryOp::fmod || op == BinaryOp::remainder) {
        // integer division by zero is undefined behaviour in C++: refuse it up front
        bool has_zero = false;
        auto L = make_layout<1>({&b});
        for_each_strided<1>(
            L,
            [&](char** p, const int64_t* st, int64_t n) {
              for (int64_t i = 0; i < n; ++i) {
                if (*reinterpret_cast<const T*>(p[0] + i * st[0]) == T(0)) has_zero = true;
              }
            },
            INT64_MAX);
        SL_CHECK(!has_zero, binary_op_name(op), ": integer division by zero");
      }
    }
    const C alpha = alpha_s.to<C>();
    if (alpha == C(1) || (op != BinaryOp::add && op != BinaryOp::sub)) {
      binary_loop<T, T, T>(out, a, b, [](T x, T y) -> T {
        return static_cast<T>(binary_fn<op>(static_cast<C>(x), static_cast<C>(y), C(1)));
      });
    } else {
      binary_loop<T, T, T>(out, a, b, [alpha](T x, T y) -> T {
        return static_cast<T>(binary_fn<op>(static_cast<C>(x), static_cast<C>(y), alpha));
      });
    }
  }
}

template <class T, size_t... I>
void binary_table(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha,
                  std::index_sequence<I...>) {
  using Fn = void (*)(const Tensor&, const Tensor&, const Tensor&, Scalar);
  static constexpr Fn table[] = {&run_binary<static_cast<BinaryOp>(I), T>...};
  table[static_cast<size_t>(op)](out, a, b, alpha);
}

}  // namespace
}  // namespace sl::cpu
