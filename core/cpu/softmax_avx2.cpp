// The float32 and float64 softmax kernels compiled with -mavx2 -mfma -ffp-contract=off (Note [CPU
// ISA dispatch], Note [Softmax sums]): the same code as the generic build, in its own namespace,
// called by core/cpu/softmax.cpp when the CPU supports AVX2 and FMA (and not AVX-512, or
// SL_CPU_ISA=avx2).
#define SL_CPU_ISA avx2
#define SL_ISA_KERNELS avx2_kernels
#include "core/cpu/softmax_isa_build.h"
