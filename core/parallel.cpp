#include "core/parallel.h"

#include <omp.h>

#include <cstdlib>
#include <string>

#include "core/dispatch.h"
#include "core/error.h"

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace sl {

namespace {
int initial_threads() {
  if (const char* env = std::getenv("SL_NUM_THREADS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 1 && v <= 4096) return static_cast<int>(v);
  }
  return omp_get_num_procs();
}

int& thread_setting() {
  static int n = [] {
    int v = initial_threads();
    if (openblas_set_num_threads) openblas_set_num_threads(v);
    return v;
  }();
  return n;
}
}  // namespace

int get_num_threads() { return thread_setting(); }

void set_num_threads(int n) {
  SL_CHECK(n >= 1, "set_num_threads: expected a thread count >= 1, got ", n);
  thread_setting() = n;
  if (openblas_set_num_threads) openblas_set_num_threads(n);
}

namespace detail {

bool in_parallel_region() { return omp_in_parallel() != 0; }

int omp_thread_count_hint(int64_t work, int64_t grain) {
  if (omp_in_parallel()) return 1;
  int nt = get_num_threads();
  if (grain < 1) grain = 1;
  int64_t max_useful = (work + grain - 1) / grain;
  return static_cast<int>(max_useful < nt ? max_useful : nt);
}

void run_parallel(int nthreads, void (*body)(void*, int, int), void* ctx) {
#pragma omp parallel num_threads(nthreads)
  { body(ctx, omp_get_thread_num(), omp_get_num_threads()); }
}

}  // namespace detail
}  // namespace sl
