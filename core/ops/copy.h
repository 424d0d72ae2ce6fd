// The "copy" family: allocation, copy between any dtypes/layouts/devices, fill, cast.
// These are the non-differentiable building blocks every other op uses.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// dst and src have the same sizes (src already expanded); any strides and dtypes. A backend
/// registers this for its kind; copies between devices go to the non-CPU kind's kernel.
SL_DECLARE_KERNEL(copy_kernel, void(const Tensor& dst, const Tensor& src));
/// Sets every element of dst (any strides) to value converted to dst's dtype.
SL_DECLARE_KERNEL(fill_kernel, void(const Tensor& dst, Scalar value));

namespace ops {

/// Uninitialised contiguous tensor.
Tensor empty(const Shape& sizes, DType dtype, Device device);
/// Uninitialised contiguous tensor with t's sizes, dtype and device.
Tensor empty_like(const Tensor& t);
Tensor empty_like(const Tensor& t, DType dtype);
/// Copies src into dst: broadcasts src to dst's shape, converts dtype, crosses devices.
/// Throws ShapeError when src does not broadcast to dst.
void copy_(const Tensor& dst, const Tensor& src);
/// Fills dst with value (converted to dst's dtype; ValueError as check_scalar_fits, naming fill_).
void fill_(const Tensor& dst, Scalar value);
/// Throws ValueError naming `op` and the value when value cannot be converted to dtype without
/// overflow, as PyTorch's checked Scalar conversion: NaN, +-inf or a value outside the range of
/// an integer dtype (a floating value is truncated toward zero first: 2.7 converts to 2, and
/// -2^63 <= v < 2^63 fits int64); a finite value beyond the largest finite value of a float32,
/// float16 or bfloat16 dtype (1e300 into float32, 70000 into float16; NaN and +-inf convert).
/// float64 and bool take every value. Used by the ops that store the scalar (fill_, full,
/// masked_fill, scatter's value, where, clamp's bounds).
void check_scalar_fits(const char* op, Scalar value, DType dtype);
/// A contiguous copy of t (or t itself when already contiguous and !force_copy).
Tensor contiguous(const Tensor& t, bool force_copy = false);
/// t converted to dtype (t itself when equal and !force_copy). Not differentiable.
Tensor cast(const Tensor& t, DType dtype, bool force_copy = false);
/// True for a float16 / bfloat16 tensor on the CPU. The CPU kernels of the norm, pool and
/// attention families take float32 / float64 only, so their ops compute such a tensor in float32
/// and cast the results back; their CUDA kernels take 16-bit tensors as they are (arithmetic in
/// float).
bool cpu_16bit_via_float32(const Tensor& t);
/// t on device (t itself when already there and !force_copy). Not differentiable.
Tensor to_device(const Tensor& t, Device device, bool force_copy = false);
/// A 0-d tensor holding value with the given dtype on device; ValueError naming `op` (the op the
/// scalar was given to) when the value does not fit the dtype (check_scalar_fits).
Tensor scalar_tensor(Scalar value, DType dtype, Device device, const char* op = "scalar_tensor");
/// The scalar operand of a binary arithmetic op (x + s, x * s, ...) as a 0-d tensor. An integer
/// dtype must hold the value (ValueError as check_scalar_fits: stricter than PyTorch, whose
/// integer arithmetic wraps the scalar silently); a floating value beyond the dtype's range
/// becomes +-inf, as PyTorch (float32 x + 1e300 is inf, as the arithmetic would round it).
Tensor scalar_operand(Scalar value, DType dtype, Device device, const char* op);
/// Throws DeviceError unless every defined tensor lives on the same device as the first.
void check_same_device(const char* op, std::initializer_list<const Tensor*> ts);
/// Throws ValueError naming op when t is undefined.
void check_defined(const char* op, const Tensor& t, const char* arg = "input");

}  // namespace ops
}  // namespace sl
