// Failure scenarios, each launched on its own by tests/dist/test_dist_launch.cpp (they break the
// job on purpose, so the normal runs exclude them with -tce='failure*').
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "../../support/testing.h"
#include "dist/process_group.h"

using namespace sl;
using namespace sl::dist;

TEST_CASE("failure: a rank that never joins makes the others time out with a DistError") {
  auto pg = world();
  if (pg->rank() == 0) {
    auto t0 = std::chrono::steady_clock::now();
    SL_CHECK_THROWS(pg->barrier()->wait(), DistError, "did not complete within");
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("rank 0 timed out after %.1f s\n", secs);
    CHECK(secs < 20);
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(4));  // longer than SL_DIST_TIMEOUT
  }
}

TEST_CASE("failure: killing one rank stops the others") {
  auto pg = world();
  Tensor t = ones({1000});
  for (int step = 0;; ++step) {
    if (pg->rank() == pg->size() - 1 && step == 3) {
      std::printf("rank %d: killing myself with SIGKILL at step %d\n", pg->rank(), step);
      std::fflush(stdout);
      raise(SIGKILL);
    }
    pg->allreduce(t)->wait();  // throws DistError (or the launcher stops us) once the peer died
  }
}
