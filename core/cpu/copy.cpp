// CPU kernels of the copy family: strided copy with dtype conversion, and fill.
#include <cstring>

#include "core/cpu/loops.h"
#include "core/int_wrap.h"
#include "core/ops/copy.h"

namespace sl::cpu {
namespace {

template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<double>(v) != 0.0;
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return float_to_int<To>(static_cast<double>(v));  // NaN, inf, out of range: To's minimum
  } else {
    return static_cast<To>(v);
  }
}

void copy_cpu(const Tensor& dst, const Tensor& src) {
  // Same dtype and both contiguous: one memcpy per thread range.
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    char* d = static_cast<char*>(dst.data_ptr());
    const char* s = static_cast<const char*>(src.data_ptr());
    if (d == s) return;
    size_t elem = dst.element_size();
    parallel_for(0, dst.numel(), 1 << 18, [&](int64_t b, int64_t e) {
      std::memmove(d + b * elem, s + b * elem, static_cast<size_t>(e - b) * elem);
    });
    return;
  }
  visit_dtype(dst.dtype(), [&](auto dt) {
    using To = typename decltype(dt)::type;
    visit_dtype(src.dtype(), [&](auto st) {
      using From = typename decltype(st)::type;
      unary_loop<To, From>(dst, src, [](From v) { return convert<To, From>(v); });
    });
  });
}

void fill_cpu(const Tensor& dst, Scalar value) {
  visit_dtype(dst.dtype(), [&](auto dt) {
    using T = typename decltype(dt)::type;
    const T v = value.to<T>();
    auto L = make_layout<1>({&dst});
    for_each_strided<1>(L, [&](char** p, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T)) {
        T* o = reinterpret_cast<T*>(p[0]);
        for (int64_t i = 0; i < n; ++i) o[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
      }
    });
  });
}

SL_REGISTER_KERNEL(copy_kernel, DeviceKind::cpu, &copy_cpu);
SL_REGISTER_KERNEL(fill_kernel, DeviceKind::cpu, &fill_cpu);

}  // namespace
}  // namespace sl::cpu
