// Device-side element types and conversions (internal header; device code only).
//
// Storage types match the host ones bit for bit: __half (sl::Half), __nv_bfloat16
// (sl::BFloat16), float, double, int64_t, int32_t, bool. Arithmetic on the 16-bit floats is done
// in float (comp_t), as on the CPU; conversions round to nearest even like core/half.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "core/cuda/kernels.h"
#include "core/dtype.h"
#include "core/int_wrap.h"

namespace sl::cuda {

template <class T>
struct DevTag {
  using type = T;
};

/// Calls f(DevTag<T>{}) with T the device storage type of dt.
template <class F>
decltype(auto) visit_dev_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::f32:
      return f(DevTag<float>{});
    case DType::f64:
      return f(DevTag<double>{});
    case DType::f16:
      return f(DevTag<__half>{});
    case DType::bf16:
      return f(DevTag<__nv_bfloat16>{});
    case DType::i64:
      return f(DevTag<int64_t>{});
    case DType::i32:
      return f(DevTag<int32_t>{});
    case DType::b8:
      return f(DevTag<bool>{});
  }
  ::sl::detail::throw_error<DTypeError>("cuda: invalid dtype code ", static_cast<int>(dt));
}

template <class T>
struct CompType {
  using type = T;
};
template <>
struct CompType<__half> {
  using type = float;
};
template <>
struct CompType<__nv_bfloat16> {
  using type = float;
};
/// The type arithmetic on T is done in.
template <class T>
using comp_t = typename CompType<T>::type;

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;

/// Storage value -> compute value.
template <class T>
__device__ __forceinline__ comp_t<T> to_comp(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return v;
  }
}

/// Converts any device value to storage type To with the CPU's rules (core/cpu/copy.cpp): to
/// bool is "!= 0"; to a 16-bit float goes through float; from a 16-bit float too; float to
/// integer gives the integer's minimum for NaN, inf and values out of range.
template <class To, class From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_v<From>) {
    return convert<To>(to_comp(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<double>(v) != 0.0;
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return float_to_int<To>(static_cast<double>(v));  // Note [Float to integer conversion]
  } else {
    return static_cast<To>(v);
  }
}

/// A host scalar as a value of compute type C, as Scalar::to<C> gives it.
template <class C>
inline C scalar_as(const DevScalar& s) {
  if constexpr (std::is_same_v<C, bool>) {
    return s.b;
  } else if constexpr (std::is_integral_v<C>) {
    return static_cast<C>(s.i);
  } else {
    return static_cast<C>(s.f);
  }
}

}  // namespace sl::cuda
