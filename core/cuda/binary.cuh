// Binary elementwise ops for CUDA kernels (internal header; formulas as in
// core/cpu/elementwise.cpp). Instantiated by binary_arith.cu, binary_compare.cu and
// binary_backward.cu, one range of BinaryCode each, so no single file is slow to compile.
#pragma once

#include <utility>

#include "core/cuda/device_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/int_wrap.h"

namespace sl::cuda {

using B = BinaryCode;

constexpr bool binary_is_predicate(B op) {
  return op >= B::eq && op <= B::logical_xor;
}
constexpr bool binary_needs_float(B op) {
  return op == B::div || op == B::atan2 || op >= B::relu_backward;
}

template <class C>
__device__ __forceinline__ C py_remainder(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    C r = dmath::fmod(a, b);
    return (r != C(0) && ((r < C(0)) != (b < C(0)))) ? r + b : r;
  } else {
    C r = int_rem(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<C>(r + b) : r;  // |r| < |b|: no overflow
  }
}

/// base^exp modulo 2^bits (Note [Integer wraparound]).
template <class C>
__device__ __forceinline__ C int_pow(C base, C exp) {
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
template <B op, class C>
__device__ __forceinline__ auto binary_fn(C a, C b, C alpha) {
  constexpr bool fl = std::is_floating_point_v<C>;
  constexpr bool bl = std::is_same_v<C, bool>;
  using W = wrap_t<C>;
  if constexpr (op == B::add) {
    if constexpr (bl)
      return static_cast<bool>(a || (b && alpha));
    else
      return static_cast<C>(W(a) + W(alpha) * W(b));
  }
  if constexpr (op == B::sub) return static_cast<C>(W(a) - W(alpha) * W(b));
  if constexpr (op == B::mul) {
    if constexpr (bl)
      return static_cast<bool>(a && b);
    else
      return static_cast<C>(W(a) * W(b));
  }
  if constexpr (op == B::div) return static_cast<C>(a / b);
  if constexpr (op == B::pow) {
    if constexpr (fl)
      return dmath::pow(a, b);
    else if constexpr (bl)
      return static_cast<bool>(a || !b);
    else
      return int_pow(a, b);
  }
  if constexpr (op == B::maximum) {
    if constexpr (fl)
      return (a != a || b != b) ? a + b : (a > b ? a : b);
    else
      return a > b ? a : b;
  }
  if constexpr (op == B::minimum) {
    if constexpr (fl)
      return (a != a || b != b) ? a + b : (a < b ? a : b);
    else
      return a < b ? a : b;
  }
  if constexpr (op == B::atan2) return dmath::atan2(a, b);
  if constexpr (op == B::fmod) {
    if constexpr (fl)
      return dmath::fmod(a, b);
    else
      return int_rem(a, b);
  }
  if constexpr (op == B::remainder) return py_remainder(a, b);
  if constexpr (op == B::eq) return a == b;
  if constexpr (op == B::ne) return a != b;
  if constexpr (op == B::lt) return a < b;
  if constexpr (op == B::le) return a <= b;
  if constexpr (op == B::gt) return a > b;
  if constexpr (op == B::ge) return a >= b;
  if constexpr (op == B::logical_and) return static_cast<bool>(a) && static_cast<bool>(b);
  if constexpr (op == B::logical_or) return static_cast<bool>(a) || static_cast<bool>(b);
  if constexpr (op == B::logical_xor) return static_cast<bool>(a) != static_cast<bool>(b);
  // PyTorch's threshold_backward: the gradient passes where y is NaN (not <= 0)
  if constexpr (op == B::relu_backward) return b <= C(0) ? C(0) : a;
  if constexpr (op == B::sigmoid_backward) return static_cast<C>(a * b * (C(1) - b));
  if constexpr (op == B::tanh_backward) return static_cast<C>(a * (C(1) - b * b));
  if constexpr (op == B::gelu_backward) return static_cast<C>(a * dmath::gelu_grad(b));
  if constexpr (op == B::gelu_tanh_backward) return static_cast<C>(a * dmath::gelu_tanh_grad(b));
  if constexpr (op == B::silu_backward) {
    C s = dmath::sigmoid(b);
    return static_cast<C>(a * s * (C(1) + b * (C(1) - s)));
  }
}

template <B op, class T>
struct BinaryFn {
  comp_t<T> alpha;
  __device__ auto operator()(T x, T y) const {
    if constexpr (binary_is_predicate(op)) {
      return static_cast<bool>(binary_fn<op>(to_comp(x), to_comp(y), comp_t<T>(1)));
    } else {
      return convert<T>(binary_fn<op>(to_comp(x), to_comp(y), alpha));
    }
  }
};

template <B op, class T>
void run_binary(DevScalar alpha, const StridedLayout<3>& L, cudaStream_t s) {
  using C = comp_t<T>;
  constexpr bool bl = std::is_same_v<C, bool>;
  if constexpr ((binary_needs_float(op) && !std::is_floating_point_v<C>) ||
                ((op == B::fmod || op == B::remainder || op == B::atan2 || op == B::sub) && bl)) {
    ::sl::detail::throw_error<DTypeError>("cuda binary kernel: op code ", static_cast<int>(op),
                                          " does not accept this dtype");
  } else if constexpr (binary_is_predicate(op)) {
    launch_elementwise<bool, T, T>(L, BinaryFn<op, T>{C(1)}, s);
  } else {
    launch_elementwise<T, T, T>(L, BinaryFn<op, T>{scalar_as<C>(alpha)}, s);
  }
}

/// Dispatches op (within [First, First + sizeof...(I))) for element type T.
template <B First, class T, size_t... I>
void binary_table(B op, DevScalar alpha, const StridedLayout<3>& L, cudaStream_t s,
                  std::index_sequence<I...>) {
  using Fn = void (*)(DevScalar, const StridedLayout<3>&, cudaStream_t);
  static constexpr Fn table[] = {&run_binary<static_cast<B>(static_cast<size_t>(First) + I), T>...};
  table[static_cast<size_t>(op) - static_cast<size_t>(First)](alpha, L, s);
}

/// launch_binary for the ops in [First, Last].
template <B First, B Last>
void launch_binary_range(B op, DType dt, DevScalar alpha, const StridedLayout<3>& L,
                         cudaStream_t s) {
  constexpr size_t n = static_cast<size_t>(Last) - static_cast<size_t>(First) + 1;
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_table<First, T>(op, alpha, L, s, std::make_index_sequence<n>{});
  });
}

}  // namespace sl::cuda
