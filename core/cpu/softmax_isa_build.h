// The float32 and float64 entry points of one build of the softmax kernels (Note [CPU ISA
// dispatch], Note [Softmax sums]; internal header). A build's source file defines SL_CPU_ISA (the
// inline namespace of its kernel code) and SL_ISA_KERNELS (the namespace of core/cpu/isa.h it
// implements), then includes this file once: core/cpu/softmax.cpp for generic_kernels,
// core/cpu/softmax_avx2.cpp and core/cpu/softmax_avx512.cpp for the other two.
#pragma once

#if !defined(SL_CPU_ISA) || !defined(SL_ISA_KERNELS)
#error "define SL_CPU_ISA and SL_ISA_KERNELS before including softmax_isa_build.h"
#endif

#include "core/cpu/isa.h"
#include "core/cpu/softmax_kernels.h"

namespace sl::cpu::SL_ISA_KERNELS {

void softmax_forward(const Tensor& out, const Tensor& in, bool log) {
  if (in.dtype() == DType::f64) return softmax_typed<double>(out, in, log);
  softmax_typed<float>(out, in, log);
}

void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, bool log) {
  if (out.dtype() == DType::f64) return softmax_backward_typed<double>(grad_in, grad_out, out, log);
  softmax_backward_typed<float>(grad_in, grad_out, out, log);
}

}  // namespace sl::cpu::SL_ISA_KERNELS
