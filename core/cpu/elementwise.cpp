// CPU kernels of the elementwise family: registration and ISA dispatch. The kernel bodies are in
// core/cpu/elementwise_kernels.h; float32 unary/binary ops run the AVX2+FMA build of them when
// the CPU has it, or the AVX-512 build where it has that (Note [CPU ISA dispatch]).
#include <cstdlib>
#include <cstring>

#include "core/cpu/blas_select.h"
#include "core/cpu/elementwise_kernels.h"
#include "core/cpu/isa.h"
#include "sl_config.h"

namespace sl::cpu {

CpuIsa active_isa() {
  static const CpuIsa isa = [] {
    CpuIsa best = CpuIsa::generic;
#if SL_HAVE_AVX2_KERNELS && (defined(__x86_64__) || defined(__i386__))
    // the CPU's vector ISA as core/cpu/blas_select.h reads it: 2 = AVX2 + FMA, 3 = AVX-512
    const int level = host_vector_isa().level;
    if (level >= 2) best = CpuIsa::avx2;
#if SL_HAVE_AVX512_KERNELS
    if (level >= 3) best = CpuIsa::avx512;
#endif
    const char* env = std::getenv("SL_CPU_ISA");
    if (env && std::strcmp(env, "generic") == 0) best = CpuIsa::generic;
    if (env && std::strcmp(env, "avx2") == 0 && best == CpuIsa::avx512) best = CpuIsa::avx2;
#endif
    return best;
  }();
  return isa;
}

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512:
      return "avx512";
    case CpuIsa::avx2:
      return "avx2";
    default:
      return "generic";
  }
}

namespace {

void unary_cpu(UnaryOp op, const Tensor& out, const Tensor& in) {
#if SL_HAVE_AVX512_KERNELS
  if (in.dtype() == DType::f32 && active_isa() == CpuIsa::avx512) {
    return avx512_kernels::unary_f32(op, out, in);
  }
#endif
#if SL_HAVE_AVX2_KERNELS
  if (in.dtype() == DType::f32 && active_isa() == CpuIsa::avx2) {
    return avx2_kernels::unary_f32(op, out, in);
  }
#endif
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_table<T>(op, out, in, std::make_index_sequence<static_cast<size_t>(UnaryOp::count_)>{});
  });
}

void binary_cpu(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha) {
#if SL_HAVE_AVX512_KERNELS
  if (a.dtype() == DType::f32 && active_isa() == CpuIsa::avx512) {
    return avx512_kernels::binary_f32(op, out, a, b, alpha);
  }
#endif
#if SL_HAVE_AVX2_KERNELS
  if (a.dtype() == DType::f32 && active_isa() == CpuIsa::avx2) {
    return avx2_kernels::binary_f32(op, out, a, b, alpha);
  }
#endif
  visit_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_table<T>(op, out, a, b, alpha,
                    std::make_index_sequence<static_cast<size_t>(BinaryOp::count_)>{});
  });
}

void where_cpu(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ternary_loop<T, bool, T, T>(out, cond, a, b, [](bool c, T x, T y) { return c ? x : y; });
  });
}

void clamp_cpu(const Tensor& out, const Tensor& in, std::optional<Scalar> lo,
               std::optional<Scalar> hi) {
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      detail::throw_error<DTypeError>("clamp: not supported for bool tensors");
    } else {
      const bool has_lo = lo.has_value(), has_hi = hi.has_value();
      const C l = has_lo ? lo->to<C>() : C(0);
      const C h = has_hi ? hi->to<C>() : C(0);
      unary_loop<T, T>(out, in, [=](T v) -> T {
        C x = static_cast<C>(v);
        if (x != x) return v;  // NaN propagates
        if (has_lo && x < l) x = l;
        if (has_hi && x > h) x = h;
        return static_cast<T>(x);
      });
    }
  });
}

SL_REGISTER_KERNEL(unary_kernel, DeviceKind::cpu, &unary_cpu);
SL_REGISTER_KERNEL(binary_kernel, DeviceKind::cpu, &binary_cpu);
SL_REGISTER_KERNEL(where_kernel, DeviceKind::cpu, &where_cpu);
SL_REGISTER_KERNEL(clamp_kernel, DeviceKind::cpu, &clamp_cpu);

}  // namespace
}  // namespace sl::cpu
