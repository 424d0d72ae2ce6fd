// CPU kernels of the softmax family: registration and ISA dispatch. The kernel bodies are in
// core/cpu/softmax_kernels.h; float32 and float64 run the AVX2 or AVX-512 build of them where the
// CPU has it (Note [CPU ISA dispatch]), all builds giving the same bits (Note [Softmax sums]).
// 16-bit floats run this file's build, in float.
#define SL_CPU_ISA generic
#define SL_ISA_KERNELS generic_kernels
#include "core/ops/softmax.h"
#include "core/cpu/softmax_isa_build.h"
#include "sl_config.h"

namespace sl::cpu {
namespace {

void softmax_cpu(const Tensor& out, const Tensor& in, bool log) {
  if (in.dtype() == DType::f32 || in.dtype() == DType::f64) {
#if SL_HAVE_AVX512_KERNELS
    if (active_isa() == CpuIsa::avx512) return avx512_kernels::softmax_forward(out, in, log);
#endif
#if SL_HAVE_AVX2_KERNELS
    if (active_isa() == CpuIsa::avx2) return avx2_kernels::softmax_forward(out, in, log);
#endif
    return generic_kernels::softmax_forward(out, in, log);
  }
  visit_floating(in.dtype(), "softmax",
                 [&](auto tag) { softmax_typed<typename decltype(tag)::type>(out, in, log); });
}

void softmax_backward_cpu(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out,
                          bool log) {
  if (out.dtype() == DType::f32 || out.dtype() == DType::f64) {
#if SL_HAVE_AVX512_KERNELS
    if (active_isa() == CpuIsa::avx512) {
      return avx512_kernels::softmax_backward(grad_in, grad_out, out, log);
    }
#endif
#if SL_HAVE_AVX2_KERNELS
    if (active_isa() == CpuIsa::avx2) {
      return avx2_kernels::softmax_backward(grad_in, grad_out, out, log);
    }
#endif
    return generic_kernels::softmax_backward(grad_in, grad_out, out, log);
  }
  visit_floating(out.dtype(), "softmax_backward", [&](auto tag) {
    softmax_backward_typed<typename decltype(tag)::type>(grad_in, grad_out, out, log);
  });
}

SL_REGISTER_KERNEL(softmax_kernel, DeviceKind::cpu, &softmax_cpu);
SL_REGISTER_KERNEL(softmax_backward_kernel, DeviceKind::cpu, &softmax_backward_cpu);

}  // namespace
}  // namespace sl::cpu
