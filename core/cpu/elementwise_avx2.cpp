// The float32 elementwise kernels compiled with -mavx2 -mfma (Note [CPU ISA dispatch]): the same
// code as the generic build, in its own namespace, called by core/cpu/elementwise.cpp when the
// CPU supports AVX2 and FMA.
#define SL_CPU_ISA avx2
#include "core/cpu/elementwise_kernels.h"

namespace sl::cpu::avx2_kernels {

void unary_f32(UnaryOp op, const Tensor& out, const Tensor& in) {
  unary_table<float>(op, out, in, std::make_index_sequence<static_cast<size_t>(UnaryOp::count_)>{});
}

void binary_f32(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha) {
  binary_table<float>(op, out, a, b, alpha,
                      std::make_index_sequence<static_cast<size_t>(BinaryOp::count_)>{});
}

}  // namespace sl::cpu::avx2_kernels
