// Dispatch of the CPU kernels that exist for float32 and float64 only.
#pragma once

#include "core/error.h"
#include "core/tensor.h"

namespace sl::cpu {

/// Calls f with the float type of t (f32/f64: f(float{}) or f(double{})), throwing DTypeError
/// naming op for other dtypes.
template <class F>
void float_or_double(const Tensor& t, const char* op, F&& f) {
  switch (t.dtype()) {
    case DType::f32:
      return f(float{});
    case DType::f64:
      return f(double{});
    default:
      detail::throw_error<DTypeError>(op, ": unsupported dtype ", dtype_name(t.dtype()));
  }
}

}  // namespace sl::cpu
