// The float32 elementwise kernels compiled with -mavx2 -mfma (Note [CPU ISA dispatch]): the same
// code as the generic build, in its own namespace, called by core/cpu/elementwise.cpp when the
// CPU supports AVX2 and FMA (and not AVX-512, or SL_CPU_ISA=avx2).
#define SL_CPU_ISA avx2
#define SL_ISA_KERNELS avx2_kernels
#include "core/cpu/elementwise_isa_build.h"
