// The float32 elementwise kernels compiled with AVX-512 and 512-bit vectors (Note [CPU ISA
// dispatch]): the same code as the generic and AVX2 builds, in its own namespace, called by
// core/cpu/elementwise.cpp when the CPU supports AVX-512 F, CD, BW, DQ and VL.
#define SL_CPU_ISA avx512
#define SL_ISA_KERNELS avx512_kernels
#include "core/cpu/elementwise_isa_build.h"
