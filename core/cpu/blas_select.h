// The rule behind Note [BLAS kernel selection] (core/cpu/blas_select.cpp), apart from the
// process state it acts on, so that tests can check it (internal header).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sl::cpu {

/// Vector ISA of a CPU or of a BLAS kernel set: 0 SSE only, 1 AVX, 2 AVX2 + FMA, 3 AVX-512 (F,
/// CD, BW, DQ and VL), with bf16 = AVX512_BF16 as well.
struct VectorIsa {
  int level = 0;
  bool bf16 = false;
};

/// What this CPU supports, as the OS lets programs use it (GCC's __builtin_cpu_supports checks
/// both the CPU and XCR0).
VectorIsa host_vector_isa();

/// The ISA level an x86-64 OpenBLAS kernel set needs, by its name as openblas_get_corename()
/// spells it (case-insensitive); -1 for a name it does not know (other architectures, newer
/// kernel sets), which the rule below always keeps.
int blas_core_level(std::string_view core);

/// Kernel sets to try in place of `detected`, best first; empty: keep `detected`. Only an
/// SSE-only set on a CPU with AVX or better is replaced: that is OpenBLAS's fallback for a CPU
/// model it does not recognise, while any set it chose on purpose is kept.
std::vector<std::string> blas_core_replacements(std::string_view detected, VectorIsa cpu);

}  // namespace sl::cpu
