// The float32 and float64 softmax kernels compiled with AVX-512, 512-bit vectors and
// -ffp-contract=off (Note [CPU ISA dispatch], Note [Softmax sums]): the same code as the generic
// and AVX2 builds, in its own namespace, called by core/cpu/softmax.cpp when the CPU supports
// AVX-512 F, CD, BW, DQ and VL.
#define SL_CPU_ISA avx512
#define SL_ISA_KERNELS avx512_kernels
#include "core/cpu/softmax_isa_build.h"
