// The float32 entry points of one ISA build of the elementwise kernels (Note [CPU ISA
// dispatch]; internal header). A build's source file defines SL_CPU_ISA (the inline namespace of
// its kernel code) and SL_ISA_KERNELS (the namespace of core/cpu/isa.h it implements), then
// includes this file once.
#pragma once

#if !defined(SL_CPU_ISA) || !defined(SL_ISA_KERNELS)
#error "define SL_CPU_ISA and SL_ISA_KERNELS before including elementwise_isa_build.h"
#endif

#include "core/cpu/elementwise_kernels.h"
#include "core/cpu/isa.h"

namespace sl::cpu::SL_ISA_KERNELS {

void unary_f32(UnaryOp op, const Tensor& out, const Tensor& in) {
  unary_table<float>(op, out, in, std::make_index_sequence<static_cast<size_t>(UnaryOp::count_)>{});
}

void binary_f32(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha) {
  binary_table<float>(op, out, a, b, alpha,
                      std::make_index_sequence<static_cast<size_t>(BinaryOp::count_)>{});
}

}  // namespace sl::cpu::SL_ISA_KERNELS
