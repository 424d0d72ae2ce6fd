// Element types, their sizes and names, PyTorch's type promotion, and dtype dispatch helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/half.h"

namespace sl {

/// The element types a Tensor can hold. `b8` is bool (one byte, 0 or 1).
enum class DType : uint8_t { f32 = 0, f64, f16, bf16, i64, i32, b8 };
inline constexpr int kNumDTypes = 7;

/// Bytes per element.
size_t dtype_size(DType t);
/// PyTorch-style name without the "torch." prefix: "float32", "float64", "float16", "bfloat16",
/// "int64", "int32", "bool".
const char* dtype_name(DType t);
/// Parses a name from dtype_name (also "f32", "half", "float", "double", "long", "int").
/// Throws ValueError for anything else.
DType parse_dtype(const std::string& name);
std::ostream& operator<<(std::ostream& os, DType t);

inline bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
inline bool is_integral(DType t) { return t == DType::i64 || t == DType::i32; }
inline bool is_bool(DType t) { return t == DType::b8; }

/// PyTorch's promote_types: bool < integers < floating; within a category the wider type wins;
/// f16 with bf16 gives f32.
DType promote_types(DType a, DType b);

/// The default floating dtype (float32), as torch.get_default_dtype().
inline constexpr DType kDefaultFloat = DType::f32;

template <class T>
struct dtype_of;
template <>
struct dtype_of<float> : std::integral_constant<DType, DType::f32> {};
template <>
struct dtype_of<double> : std::integral_constant<DType, DType::f64> {};
template <>
struct dtype_of<Half> : std::integral_constant<DType, DType::f16> {};
template <>
struct dtype_of<BFloat16> : std::integral_constant<DType, DType::bf16> {};
template <>
struct dtype_of<int64_t> : std::integral_constant<DType, DType::i64> {};
template <>
struct dtype_of<int32_t> : std::integral_constant<DType, DType::i32> {};
template <>
struct dtype_of<bool> : std::integral_constant<DType, DType::b8> {};
template <class T>
inline constexpr DType dtype_v = dtype_of<T>::value;

/// Tag passed to the visitor of visit_dtype.
template <class T>
struct TypeTag {
  using type = T;
};

/// Calls f(TypeTag<T>{}) with T the C++ type of `t`; returns what f returns.
///   visit_dtype(t.dtype(), [&](auto tag) { using T = typename decltype(tag)::type; ... });
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32:
      return f(TypeTag<float>{});
    case DType::f64:
      return f(TypeTag<double>{});
    case DType::f16:
      return f(TypeTag<Half>{});
    case DType::bf16:
      return f(TypeTag<BFloat16>{});
    case DType::i64:
      return f(TypeTag<int64_t>{});
    case DType::i32:
      return f(TypeTag<int32_t>{});
    case DType::b8:
      return f(TypeTag<bool>{});
  }
  detail::throw_error<DTypeError>("visit_dtype: invalid dtype code ", static_cast<int>(t));
}

/// Like visit_dtype but only for floating dtypes; `op` names the caller in the error.
template <class F>
decltype(auto) visit_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32:
      return f(TypeTag<float>{});
    case DType::f64:
      return f(TypeTag<double>{});
    case DType::f16:
      return f(TypeTag<Half>{});
    case DType::bf16:
      return f(TypeTag<BFloat16>{});
    default:
      break;
  }
  detail::throw_error<DTypeError>(op, ": expected a floating dtype, got ", dtype_name(t));
}

/// The type CPU kernels compute in for a storage type: float for the 16-bit floats.
template <class T>
struct compute_type {
  using type = T;
};
template <>
struct compute_type<Half> {
  using type = float;
};
template <>
struct compute_type<BFloat16> {
  using type = float;
};
template <class T>
using compute_t = typename compute_type<T>::type;

}  // namespace sl
