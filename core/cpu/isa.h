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
// SL_CPU_ISA=generic in the environment forces the baseline kernels (the tests run both).
#pragma once

#include "core/ops/elementwise.h"

#ifndef SL_CPU_ISA
#define SL_CPU_ISA generic
#endif

namespace sl::cpu {

enum class CpuIsa { generic, avx2 };

/// The kernels in use: avx2 when they were built (SL_HAVE_AVX2_KERNELS), the CPU has AVX2 and
/// FMA, and SL_CPU_ISA is not "generic"; decided once per process.
CpuIsa active_isa();
const char* isa_name(CpuIsa isa);

/// The AVX2+FMA build of the float32 elementwise kernels (core/cpu/elementwise_avx2.cpp); same
/// contracts as unary_kernel / binary_kernel for float32 operands.
namespace avx2_kernels {
void unary_f32(UnaryOp op, const Tensor& out, const Tensor& in);
void binary_f32(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha);
}  // namespace avx2_kernels

}  // namespace sl::cpu
