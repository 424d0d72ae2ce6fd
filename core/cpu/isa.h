// CPU instruction-set dispatch for kernels built twice (internal header).
//
// Note [CPU ISA dispatch]
// The library is compiled for the baseline x86-64 (SSE2) so that it runs everywhere, but
// transcendental float kernels (exp, tanh, sigmoid, gelu, ...) are compute-bound at 4 lanes.
// core/cpu/elementwise_avx2.cpp compiles the same kernel code a second time with -mavx2 -mfma
// (a static library linked into libshardlight, see the root meson.build); the registered CPU
// kernel calls that build for float32 when the CPU has AVX2 and FMA. To keep the two builds
// apart, core/cpu/loops.h and core/cpu/math.h put everything in an inline namespace named by
// SL_CPU_ISA (generic by default, avx2 in that file), and the kernel bodies live in an anonymous
// namespace (core/cpu/elementwise_kernels.h), so no symbol compiled with AVX2 can be picked by
// the linker for generic code. The avx2 objects are linked after the generic ones, so shared
// inline functions (Tensor accessors, std::) resolve to their generic copies.
// A third build, core/cpu/elementwise_avx512.cpp, compiles the same code with AVX-512 (F, CD, BW,
// DQ, VL) and 512-bit vectors, in namespace avx512; it runs where the CPU has all five. The
// compute-bound kernels (gelu, exp, tanh, ...) do twice the work per instruction there. Its
// objects are linked after the avx2 ones (sl_link_whole in the root meson.build), so an inline
// function that only the two ISA builds share resolves to the avx2 copy, which every CPU that
// runs either build can execute.
// The softmax kernels (core/cpu/softmax_kernels.h) are built three times in the same way, for
// float32 and float64, without FMA contraction so that every build gives the same bits (Note
// [Softmax sums]).
// SL_CPU_ISA=generic or =avx2 in the environment caps the kernels at that build (the tests run
// all three).
#pragma once

#include "core/ops/elementwise.h"

#ifndef SL_CPU_ISA
#define SL_CPU_ISA generic
#endif

namespace sl::cpu {

enum class CpuIsa { generic, avx2, avx512 };

/// The kernels in use, decided once per process: the best build that was compiled
/// (SL_HAVE_AVX2_KERNELS, SL_HAVE_AVX512_KERNELS) and that the CPU supports (AVX2 + FMA; AVX-512
/// F, CD, BW, DQ and VL), capped by SL_CPU_ISA=generic|avx2 in the environment.
CpuIsa active_isa();
const char* isa_name(CpuIsa isa);

/// The AVX2+FMA build of the float32 elementwise kernels (core/cpu/elementwise_avx2.cpp); same
/// contracts as unary_kernel / binary_kernel for float32 operands.
namespace avx2_kernels {
void unary_f32(UnaryOp op, const Tensor& out, const Tensor& in);
void binary_f32(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha);
}  // namespace avx2_kernels

/// The AVX-512 build of the same kernels (core/cpu/elementwise_avx512.cpp); same contracts.
namespace avx512_kernels {
void unary_f32(UnaryOp op, const Tensor& out, const Tensor& in);
void binary_f32(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha);
}  // namespace avx512_kernels

/// The softmax kernels for float32 and float64 operands (core/cpu/softmax_kernels.h), baseline
/// build (core/cpu/softmax.cpp): the contracts of softmax_kernel and softmax_backward_kernel.
/// Every build of them gives the same bits (Note [Softmax sums]).
namespace generic_kernels {
void softmax_forward(const Tensor& out, const Tensor& in, bool log);
void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, bool log);
}  // namespace generic_kernels

/// Their AVX2+FMA build (core/cpu/softmax_avx2.cpp; where SL_HAVE_AVX2_KERNELS, and to be called
/// only where the CPU has AVX2 and FMA); same contracts and bits.
namespace avx2_kernels {
void softmax_forward(const Tensor& out, const Tensor& in, bool log);
void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, bool log);
}  // namespace avx2_kernels

/// Their AVX-512 build (core/cpu/softmax_avx512.cpp; where SL_HAVE_AVX512_KERNELS, and to be
/// called only where the CPU has AVX-512 F, CD, BW, DQ and VL); same contracts and bits.
namespace avx512_kernels {
void softmax_forward(const Tensor& out, const Tensor& in, bool log);
void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, bool log);
}  // namespace avx512_kernels

}  // namespace sl::cpu
