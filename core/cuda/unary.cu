// CUDA kernels of the elementwise family: unary ops (formulas as in core/cpu/elementwise.cpp).
// The glue (elementwise.cpp) has already refused dtypes an op does not accept; such
// combinations are not instantiated here.
#include <utility>

#include "core/cuda/device_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/int_wrap.h"

namespace sl::cuda {
namespace {

using U = UnaryCode;

constexpr bool needs_float(U op) {
  switch (op) {
    case U::neg:
    case U::abs:
    case U::square:
    case U::relu:
    case U::sign:
    case U::floor:
    case U::ceil:
    case U::round:
    case U::trunc:
    case U::logical_not:
    case U::isnan:
    case U::isinf:
    case U::isfinite:
      return false;
    default:
      return true;
  }
}
constexpr bool is_predicate(U op) {
  return op == U::logical_not || op == U::isnan || op == U::isinf || op == U::isfinite;
}

/// Integer neg, abs and square are done in W = wrap_t<C> and wrap (Note [Integer wraparound]).
template <U op, class C>
__device__ __forceinline__ auto unary_fn(C x) {
  constexpr bool fl = std::is_floating_point_v<C>;
  constexpr bool bl = std::is_same_v<C, bool>;
  using W = wrap_t<C>;
  if constexpr (op == U::neg) return static_cast<C>(-W(x));
  if constexpr (op == U::abs) {
    if constexpr (bl)
      return x;
    else
      return static_cast<C>(x < C(0) ? -W(x) : W(x));
  }
  if constexpr (op == U::exp) return dmath::exp(x);
  if constexpr (op == U::log) return dmath::log(x);
  if constexpr (op == U::log1p) return dmath::log1p(x);
  if constexpr (op == U::expm1) return dmath::expm1(x);
  if constexpr (op == U::sqrt) return dmath::sqrt(x);
  if constexpr (op == U::rsqrt) return C(1) / dmath::sqrt(x);
  if constexpr (op == U::square) return static_cast<C>(W(x) * W(x));
  if constexpr (op == U::reciprocal) return C(1) / x;
  if constexpr (op == U::tanh) return dmath::tanh(x);
  if constexpr (op == U::sigmoid) return dmath::sigmoid(x);
  if constexpr (op == U::relu) {
    if constexpr (bl)
      return x;
    else
      return x < C(0) ? C(0) : x;  // NaN and -0 pass through, as PyTorch's relu
  }
  if constexpr (op == U::gelu) return dmath::gelu(x);
  if constexpr (op == U::gelu_tanh) return dmath::gelu_tanh(x);
  if constexpr (op == U::silu) return x * dmath::sigmoid(x);
  if constexpr (op == U::sin) return dmath::sin(x);
  if constexpr (op == U::cos) return dmath::cos(x);
  if constexpr (op == U::sign) {
    if constexpr (bl)
      return x;
    else
      return static_cast<C>((C(0) < x) - (x < C(0)));
  }
  if constexpr (op == U::erf) return dmath::erf(x);
  if constexpr (op == U::floor) {
    if constexpr (fl)
      return dmath::floor(x);
    else
      return x;
  }
  if constexpr (op == U::ceil) {
    if constexpr (fl)
      return dmath::ceil(x);
    else
      return x;
  }
  if constexpr (op == U::round) {
    if constexpr (fl)
      return dmath::rint(x);  // half to even, as std::nearbyint
    else
      return x;
  }
  if constexpr (op == U::trunc) {
    if constexpr (fl)
      return dmath::trunc(x);
    else
      return x;
  }
  if constexpr (op == U::logical_not) return !static_cast<bool>(x);
  if constexpr (op == U::isnan) {
    if constexpr (fl)
      return x != x;
    else
      return false;
  }
  if constexpr (op == U::isinf) {
    if constexpr (fl)
      return dmath::isinf(x);
    else
      return false;
  }
  if constexpr (op == U::isfinite) {
    if constexpr (fl)
      return dmath::isfinite(x);
    else
      return true;
  }
}

template <U op, class T>
struct UnaryFn {
  __device__ auto operator()(T v) const {
    if constexpr (is_predicate(op)) {
      return static_cast<bool>(unary_fn<op>(to_comp(v)));
    } else {
      return convert<T>(unary_fn<op>(to_comp(v)));
    }
  }
};

template <U op, class T>
void run_unary(const StridedLayout<2>& L, cudaStream_t s) {
  using C = comp_t<T>;
  if constexpr ((needs_float(op) && !std::is_floating_point_v<C>) ||
                (op == U::neg && std::is_same_v<C, bool>)) {
    ::sl::detail::throw_error<DTypeError>("cuda unary kernel: op code ", static_cast<int>(op),
                                          " does not accept this dtype");
  } else if constexpr (is_predicate(op)) {
    launch_elementwise<bool, T>(L, UnaryFn<op, T>{}, s);
  } else {
    launch_elementwise<T, T>(L, UnaryFn<op, T>{}, s);
  }
}

template <class T, size_t... I>
void unary_table(U op, const StridedLayout<2>& L, cudaStream_t s, std::index_sequence<I...>) {
  using Fn = void (*)(const StridedLayout<2>&, cudaStream_t);
  static constexpr Fn table[] = {&run_unary<static_cast<U>(I), T>...};
  table[static_cast<size_t>(op)](L, s);
}

}  // namespace

void launch_unary(UnaryCode op, DType dt, const StridedLayout<2>& L, cudaStream_t s) {
  visit_dev_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_table<T>(op, L, s, std::make_index_sequence<static_cast<size_t>(U::count_)>{});
  });
}

}  // namespace sl::cuda
