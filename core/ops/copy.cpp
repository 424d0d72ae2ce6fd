#include "core/ops/copy.h"

#include <cmath>
#include <limits>

#include "core/allocator.h"
#include "core/ops/overlap.h"

namespace sl {

SL_DEFINE_KERNEL(copy_kernel, void(const Tensor& dst, const Tensor& src));
SL_DEFINE_KERNEL(fill_kernel, void(const Tensor& dst, Scalar value));

namespace ops {

Tensor empty(const Shape& sizes, DType dtype, Device device) {
  int64_t n = shape_numel(sizes);
  size_t elem = dtype_size(dtype);
  SL_CHECK(n <= static_cast<int64_t>(INT64_MAX / static_cast<int64_t>(elem)), "empty: shape ",
           shape_str(sizes), " of ", dtype_name(dtype), " needs more than 2^63 bytes");
  auto storage = std::make_shared<Storage>(static_cast<size_t>(n) * elem, device);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, contiguous_strides(sizes),
                                             0, dtype));
}

Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.dtype(), t.device()); }
Tensor empty_like(const Tensor& t, DType dtype) { return empty(t.sizes(), dtype, t.device()); }

void check_defined(const char* op, const Tensor& t, const char* arg) {
  SL_CHECK(t.defined(), op, ": ", arg, " is an undefined tensor");
}

void check_same_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (!first) {
      first = t;
      continue;
    }
    SL_CHECK_DEVICE(t->device() == first->device(), op,
                    ": expected all tensors on the same device, got ", first->device(), " and ",
                    t->device());
  }
}

void copy_(const Tensor& dst, const Tensor& src) {
  check_defined("copy_", dst, "destination");
  check_defined("copy_", src, "source");
  Tensor s = src;
  if (src.sizes() != dst.sizes()) {
    Shape b = broadcast_shapes(dst.sizes(), src.sizes(), "copy_");
    SL_CHECK_SHAPE(b == dst.sizes(), "copy_: source of shape ", shape_str(src.sizes()),
                   " does not broadcast to destination shape ", shape_str(dst.sizes()));
    s = src.expand(dst.sizes());
  }
  if (dst.numel() == 0) return;
  // Note [In-place overlap]
  check_no_internal_overlap("copy_", dst);
  if (partially_overlaps(dst, s)) s = contiguous(s, /*force_copy=*/true);
  // Cross-device copies go to the non-CPU backend; logical CPU devices share host memory.
  DeviceKind k = dst.device().is_cpu() ? s.device().kind : dst.device().kind;
  copy_kernel(k, dst, s);
  dst.bump_version();
}

void check_scalar_fits(const char* op, Scalar value, DType dtype) {
  if (value.is_bool() || is_bool(dtype) || dtype == DType::f64) return;
  if (is_floating(dtype)) {
    // as PyTorch: NaN and +-inf convert; a finite value beyond the largest finite value of the
    // dtype does not (even one that round-to-nearest would bring back to that largest value)
    const double v = value.to_double();
    const double max = dtype == DType::f32 ? static_cast<double>(std::numeric_limits<float>::max())
                       : dtype == DType::f16 ? 65504.0
                                             : 0x1.fep127;  // bfloat16: (2 - 2^-7) * 2^127
    SL_CHECK(!std::isfinite(v) || std::fabs(v) <= max, op, ": value ", value,
             " cannot be converted to ", dtype_name(dtype), " without overflow (largest finite ",
             dtype_name(dtype), " is ", max, ")");
    return;
  }
  // the bounds of the integer dtype as doubles: a truncated double v fits when lo - 1 < v < hi + 1
  // (both bounds are exact: -2^63 and 2^63 for int64, -2^31 - 1 and 2^31 for int32)
  const bool i64 = dtype == DType::i64;
  bool fits;
  if (value.is_floating()) {
    const double v = value.to_double();
    fits = i64 ? (v >= -0x1p63 && v < 0x1p63) : (v > -0x1p31 - 1.0 && v < 0x1p31);
  } else {
    const int64_t v = value.to_int();
    fits = i64 ||
           (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max());
  }
  SL_CHECK(fits, op, ": value ", value, " cannot be converted to ", dtype_name(dtype),
           " without overflow");
}

void fill_(const Tensor& dst, Scalar value) {
  check_defined("fill_", dst);
  check_scalar_fits("fill_", value, dst.dtype());
  if (dst.numel() > 0) fill_kernel(dst.device().kind, dst, value);
  dst.bump_version();
}

Tensor contiguous(const Tensor& t, bool force_copy) {
  if (t.is_contiguous() && !force_copy) return t;
  Tensor out = empty_like(t);
  copy_(out, t);
  return out;
}

bool cpu_16bit_via_float32(const Tensor& t) {
  return (t.dtype() == DType::f16 || t.dtype() == DType::bf16) &&
         t.device().kind == DeviceKind::cpu;
}

Tensor cast(const Tensor& t, DType dtype, bool force_copy) {
  if (t.dtype() == dtype && !force_copy) return t;
  Tensor out = empty_like(t, dtype);
  copy_(out, t);
  return out;
}

Tensor to_device(const Tensor& t, Device device, bool force_copy) {
  if (t.device() == device && !force_copy) return t;
  Tensor out = empty(t.sizes(), t.dtype(), device);
  copy_(out, t);
  return out;
}

Tensor scalar_tensor(Scalar value, DType dtype, Device device, const char* op) {
  check_scalar_fits(op, value, dtype);
  Tensor out = empty({}, dtype, device);
  fill_(out, value);
  return out;
}

Tensor scalar_operand(Scalar value, DType dtype, Device device, const char* op) {
  if (!is_floating(dtype)) check_scalar_fits(op, value, dtype);
  Tensor out = empty({}, dtype, device);
  fill_kernel(device.kind, out, value);  // a floating value beyond the dtype's range: +-inf
  return out;
}

}  // namespace ops
}  // namespace sl
