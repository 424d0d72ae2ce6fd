// Note [BLAS kernel selection]
// OpenBLAS built with DYNAMIC_ARCH (Debian's is) picks its kernel set when it loads, from the CPU
// model number. A model newer than the library falls back to Prescott, its SSE3 kernels:
// Debian 12's OpenBLAS 0.3.21 does that on a Xeon of family 6 model 207 (Emerald Rapids, AVX-512
// and AVX512_BF16), where cblas_sgemm then runs at 17-30 GFLOP/s against 100-150 with the
// Cooperlake or SkylakeX kernels (one thread, 2048^3, 2048x3072x768, 8192x256x256 and
// 256x588x1152, measured 2026-12-01). Every matmul, linear layer and convolution pays that 4x.
//
// So when the library loads, before any BLAS call, it asks OpenBLAS which set it chose
// (openblas_get_corename). When that set is SSE-only while the CPU has AVX or better
// (blas_core_replacements), it reruns OpenBLAS's own selection with OPENBLAS_CORETYPE set to the
// best set for the CPU's ISA (gotoblas_dynamic_quit + gotoblas_dynamic_init, the functions
// OpenBLAS itself runs at load), checks the set it got, and restores the environment. The user
// stays in charge: an OPENBLAS_CORETYPE in the environment is never overridden, and a BLAS
// without these functions is left alone. blas_info() reports what happened; sl_train and the
// benchmarks print it. The kernel set changes which bits a product gives (not its accuracy); the
// run-to-run and thread-count determinism of Note [Deterministic BLAS tiles] hold for any set.
#include "core/cpu/blas_select.h"

#include <strings.h>

#include <cstdlib>

#include "core/blas.h"
#include "sl_config.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

// OpenBLAS's entry points, weak so that another BLAS (or none) links too.
extern "C" char* openblas_get_corename(void) __attribute__((weak));
extern "C" char* openblas_get_config(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

namespace sl {
namespace cpu {

VectorIsa host_vector_isa() {
  VectorIsa isa;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx")) isa.level = 1;
  if (isa.level == 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    isa.level = 2;
  }
  if (isa.level == 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl")) {
    isa.level = 3;
    // AVX512_BF16 is CPUID leaf 7 subleaf 1, EAX bit 5 (GCC 12's __builtin_cpu_supports does
    // not know it); the OS side is the AVX-512 state already checked above.
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) isa.bf16 = (a >> 5) & 1u;
  }
#endif
  return isa;
}

int blas_core_level(std::string_view core) {
  struct Known {
    const char* name;
    int level;
  };
  // OpenBLAS 0.3.21's x86-64 names (driver/others/dynamic.c); the 32-bit-era ones are SSE-only.
  static constexpr Known kKnown[] = {
      {"Katmai", 0},        {"Coppermine", 0},     {"Northwood", 0},  {"Prescott", 0},
      {"Banias", 0},        {"Atom", 0},           {"Core2", 0},      {"Penryn", 0},
      {"Dunnington", 0},    {"Nehalem", 0},        {"Athlon", 0},     {"Opteron", 0},
      {"Opteron(SSE3)", 0}, {"Barcelona", 0},      {"Nano", 0},       {"Bobcat", 0},
      {"Sandybridge", 1},   {"Bulldozer", 1},      {"Piledriver", 1}, {"Steamroller", 1},
      {"Excavator", 1},     {"Haswell", 2},        {"Zen", 2},        {"SkylakeX", 3},
      {"Cooperlake", 3},    {"SapphireRapids", 3},
  };
  for (const Known& k : kKnown) {
    if (core.size() == std::char_traits<char>::length(k.name) &&
        strncasecmp(core.data(), k.name, core.size()) == 0) {
      return k.level;
    }
  }
  return -1;
}

std::vector<std::string> blas_core_replacements(std::string_view detected, VectorIsa cpu) {
  if (blas_core_level(detected) != 0 || cpu.level < 1) return {};
  std::vector<std::string> sets;
  if (cpu.level >= 3 && cpu.bf16) sets.emplace_back("Cooperlake");
  if (cpu.level >= 3) sets.emplace_back("SkylakeX");
  if (cpu.level >= 2) sets.emplace_back("Haswell");
  sets.emplace_back("Sandybridge");
  return sets;
}

namespace {

std::string cpu_model_text() {
#if defined(__x86_64__) && defined(__GNUC__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    const unsigned family = ((a >> 8) & 0xf) + ((a >> 8 & 0xf) == 0xf ? (a >> 20) & 0xff : 0);
    const unsigned model = ((a >> 4) & 0xf) | (((a >> 16) & 0xf) << 4);
    return "family " + std::to_string(family) + " model " + std::to_string(model);
  }
#endif
  return "this CPU";
}

const char* isa_text(VectorIsa isa) {
  static constexpr const char* kText[] = {"SSE only", "AVX", "AVX2", "AVX-512"};
  return isa.level == 3 && isa.bf16 ? "AVX-512 with BF16" : kText[isa.level];
}

/// Reruns OpenBLAS's kernel selection with OPENBLAS_CORETYPE = `core` (then unset again) and
/// returns the set it chose. The caller has stopped OpenBLAS's worker threads.
std::string reselect(const char* core) {
  setenv("OPENBLAS_CORETYPE", core, 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
  const char* got = openblas_get_corename();
  return got ? got : "";
}

BlasInfo select_blas() {
  BlasInfo info;
#if !SL_HAVE_CBLAS
  info.config = "none";
  info.note = "no CBLAS at build time: matmul runs on Eigen";
  return info;
#else
  if (!openblas_get_corename || !openblas_get_config) {
    info.config = "cblas";
    info.note = "a BLAS other than OpenBLAS: its own choice of kernels is kept";
    return info;
  }
  info.detected_core = info.core = openblas_get_corename();
  info.config = openblas_get_config();
  if (std::getenv("OPENBLAS_CORETYPE")) {
    info.note = "kernels chosen by OPENBLAS_CORETYPE";
    return info;
  }
  const VectorIsa cpu = host_vector_isa();
  const std::vector<std::string> sets = blas_core_replacements(info.detected_core, cpu);
  if (sets.empty()) {
    info.note = "kernels chosen by OpenBLAS";
    return info;
  }
  const std::string why = "OpenBLAS chose " + info.detected_core + " (SSE kernels) on " +
                          cpu_model_text() + ", which has " + isa_text(cpu) +
                          ": it does not know this CPU model";
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) {
    info.note = why +
                "; this OpenBLAS cannot reselect (no DYNAMIC_ARCH functions): set "
                "OPENBLAS_CORETYPE before the program starts";
    return info;
  }
  // OpenBLAS's worker threads, started when it loaded, run the selection themselves when they
  // first allocate their buffers and find it undone: between quit and init, one did, and
  // crashed 6 runs in 60. So they are stopped first, with the function OpenBLAS runs before a
  // fork; they start again on the next call that wants them (the library calls the BLAS
  // single-threaded, so that is never).
  if (blas_thread_shutdown_) blas_thread_shutdown_();
  for (const std::string& set : sets) {
    const std::string got = reselect(set.c_str());
    if (blas_core_level(got) > 0) {
      info.core = got;
      info.config = openblas_get_config();
      info.note = why + "; switched to " + got +
                  " (Note [BLAS kernel selection]; set "
                  "OPENBLAS_CORETYPE to choose yourself)";
      return info;
    }
  }
  // Nothing better took: select again without the variable, which gives the original set back.
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  info.core = openblas_get_corename();
  info.note = why + "; no better kernel set could be selected";
  return info;
#endif
}

}  // namespace
}  // namespace cpu

const BlasInfo& blas_info() {
  static const BlasInfo info = cpu::select_blas();
  return info;
}

namespace {
/// Runs the selection when the library loads, before any program code can call the BLAS.
[[maybe_unused]] const bool kBlasSelected = (blas_info(), true);
}  // namespace

}  // namespace sl
