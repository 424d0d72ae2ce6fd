// Note [BLAS kernel selection]: the rule, and what the library did in this process.
#include <doctest/doctest.h>
#include <strings.h>

#include <cstdlib>
#include <string>

#include "core/blas.h"
#include "core/cpu/blas_select.h"

using sl::cpu::blas_core_level;
using sl::cpu::blas_core_replacements;
using sl::cpu::VectorIsa;

TEST_CASE("blas selection: ISA level of OpenBLAS's x86-64 kernel sets") {
  CHECK(blas_core_level("Prescott") == 0);
  CHECK(blas_core_level("prescott") == 0);  // OPENBLAS_CORETYPE is case-insensitive
  CHECK(blas_core_level("Nehalem") == 0);
  CHECK(blas_core_level("Sandybridge") == 1);
  CHECK(blas_core_level("Haswell") == 2);
  CHECK(blas_core_level("Zen") == 2);
  CHECK(blas_core_level("SkylakeX") == 3);
  CHECK(blas_core_level("Cooperlake") == 3);
  CHECK(blas_core_level("POWER9") == -1);
  CHECK(blas_core_level("") == -1);
  CHECK(blas_core_level("Prescot") == -1);  // a prefix is not the name
}

TEST_CASE("blas selection: only an SSE fallback on an AVX-or-better CPU is replaced") {
  const VectorIsa sse{0, false}, avx{1, false}, avx2{2, false}, avx512{3, false},
      avx512bf16{3, true};
  using V = std::vector<std::string>;
  // the unrecognised-model fallback: best set for the CPU first, then the lesser ones
  CHECK(blas_core_replacements("Prescott", avx512bf16) ==
        V{"Cooperlake", "SkylakeX", "Haswell", "Sandybridge"});
  CHECK(blas_core_replacements("Prescott", avx512) == V{"SkylakeX", "Haswell", "Sandybridge"});
  CHECK(blas_core_replacements("Nehalem", avx2) == V{"Haswell", "Sandybridge"});
  CHECK(blas_core_replacements("Core2", avx) == V{"Sandybridge"});
  // an SSE-only CPU keeps its SSE kernels
  CHECK(blas_core_replacements("Prescott", sse).empty());
  // sets OpenBLAS chose on purpose are kept, even below the CPU's level (Zen on an AVX-512 Zen 4)
  CHECK(blas_core_replacements("Zen", avx512).empty());
  CHECK(blas_core_replacements("Haswell", avx512bf16).empty());
  CHECK(blas_core_replacements("Sandybridge", avx2).empty());
  CHECK(blas_core_replacements("SkylakeX", avx512bf16).empty());
  // names it does not know (another architecture's, a newer set's) are kept
  CHECK(blas_core_replacements("POWER10", avx2).empty());
  CHECK(blas_core_replacements("", avx2).empty());
}

TEST_CASE("blas selection: this process runs kernels that match the CPU") {
  const sl::BlasInfo& info = sl::blas_info();
  MESSAGE("BLAS: ", info.config, " | kernels ", info.core, " | ", info.note);
  CHECK(!info.config.empty());
  CHECK(!info.note.empty());
  const bool dynamic_openblas = info.config.rfind("OpenBLAS", 0) == 0 &&
                                info.config.find("DYNAMIC_ARCH") != std::string::npos;
  if (!dynamic_openblas) {
    CHECK(info.core == info.detected_core);
    return;
  }
  CHECK(info.config.find(info.core) != std::string::npos);  // the config names the set in use
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE")) {
    // the user's choice is never overridden (tests/meson.build runs this case with Prescott)
    CHECK(info.core == info.detected_core);
    CHECK(info.note.find("OPENBLAS_CORETYPE") != std::string::npos);
    if (blas_core_level(forced) >= 0 &&
        blas_core_level(forced) <= sl::cpu::host_vector_isa().level) {
      CHECK(strcasecmp(info.core.c_str(), forced) == 0);
    }
    return;
  }
  const VectorIsa cpu = sl::cpu::host_vector_isa();
  if (cpu.level >= 1) CHECK(blas_core_level(info.core) != 0);  // never SSE-only kernels here
  if (info.core != info.detected_core) {
    CHECK(blas_core_level(info.detected_core) == 0);
    CHECK(info.note.find("switched to " + info.core) != std::string::npos);
  }
}
