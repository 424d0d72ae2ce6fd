// AdamW step over N parameters (default 10M, one flat f32 tensor) with Shardlight's fused
// kernel. Prints one line per thread count: "shardlight adamw n=<N> threads=<t> ms=<median>".
// Run through tools/bench_optim.sh, which prints the PyTorch side and the ratio.
//
//   build/tools/bench_optim [--n 10000000] [--threads 1,2] [--iters 20] [--split 1]
// --split k divides the parameters into k tensors (one kernel call each).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <shardlight/shardlight.h>

using namespace sl;

int main(int argc, char** argv) {
  int64_t n = 10'000'000;
  int iters = 20, split = 1;
  std::vector<int> threads{1, 2};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--n")
      n = std::atoll(argv[i + 1]);
    else if (a == "--iters")
      iters = std::atoi(argv[i + 1]);
    else if (a == "--split")
      split = std::atoi(argv[i + 1]);
    else if (a == "--threads") {
      threads.clear();
      std::stringstream ss(argv[i + 1]);
      std::string t;
      while (std::getline(ss, t, ',')) threads.push_back(std::atoi(t.c_str()));
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  Generator gen(0);
  TensorList params;
  for (int k = 0; k < split; ++k) {
    int64_t len = n / split + (k < n % split ? 1 : 0);
    params.push_back(randn({len}, {}, &gen).requires_grad_(true));
    params.back().set_grad(randn({len}, {}, &gen));
  }
  for (int t : threads) {
    set_num_threads(t);
    optim::AdamW opt(params, {.lr = 1e-3, .weight_decay = 0.01});
    opt.step();  // allocate state, warm caches
    std::vector<double> ms;
    for (int it = 0; it < iters; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      opt.step();
      auto t1 = std::chrono::steady_clock::now();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("shardlight adamw n=%lld threads=%d ms=%.3f\n", static_cast<long long>(n), t,
                ms[ms.size() / 2]);
    std::fflush(stdout);
  }
  return 0;
}
