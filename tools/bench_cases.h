// The harness shared by the CPU benchmarks that run next to PyTorch (tools/bench_nn.cpp,
// tools/bench_zoo.cpp; tools/bench_pairs.sh drives them): named cases, each timed as one warm-up
// iteration and then the median of R timed iterations, printed as "case<TAB>ms" lines.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <shardlight/shardlight.h>

namespace sl::bench {

/// A benchmark case: `setup` builds its inputs and returns one timed iteration; `reps` is the
/// number of timed iterations (after one warm-up).
struct Case {
  std::string name;
  int reps;
  std::function<std::function<void()>()> setup;
};

/// Runs `it` once (warm-up), then `reps` times; returns the median wall time in ms.
inline double time_ms(const std::function<void()>& it, int reps) {
  it();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    it();
    auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// The command line of a benchmark program over `cases`:
///   PROGRAM [--threads N] [--filter SUBSTR | --case NAME] [--reps R] [--list] [--blas-core]
///           [--profile ROWS]
/// --list prints the selected names; --blas-core the BLAS kernel set this process runs (Note
/// [BLAS kernel selection]) for bench_pairs.sh. Otherwise sets N threads, seeds 0, and times
/// each selected case (set up only when selected). With --profile, each selected case instead
/// runs one warm-up iteration and then one under the profiler (core/profiler.h), and prints the
/// profile's summary with its ROWS rows of most self time (kernels and backward nodes).
/// Returns the exit status: 2 for unknown arguments (usage on stderr), 0 otherwise.
inline int bench_main(int argc, char** argv, const std::vector<Case>& cases) {
  int threads = 1, reps_override = 0, profile_rows = 0;
  bool list = false;
  std::string filter, exact;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) {
      filter = argv[++i];
    } else if (!std::strcmp(argv[i], "--case") && i + 1 < argc) {
      exact = argv[++i];
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps_override = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--profile") && i + 1 < argc) {
      profile_rows = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--list")) {
      list = true;
    } else if (!std::strcmp(argv[i], "--blas-core")) {
      std::printf("%s\n", blas_info().core.c_str());
      return 0;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--threads N] [--filter SUBSTR | --case NAME] [--reps R] [--list] "
                   "[--blas-core] [--profile ROWS]\n",
                   argv[0]);
      return 2;
    }
  }
  set_num_threads(threads);
  manual_seed(0);
  for (const Case& c : cases) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
    if (!exact.empty() && c.name != exact) continue;
    if (list) {
      std::printf("%s\n", c.name.c_str());
      continue;
    }
    auto it = c.setup();
    if (profile_rows > 0) {
      it();
      profiler::start();
      it();
      std::printf("%s\n%s\n", c.name.c_str(), profiler::stop().summary(profile_rows).c_str());
      std::fflush(stdout);
      continue;
    }
    double ms = time_ms(it, reps_override > 0 ? reps_override : c.reps);
    std::printf("%s\t%.2f\n", c.name.c_str(), ms);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace sl::bench
