// Launches the multi-rank tests (tests/dist/ranks/) under mpirun with 2 and 3 ranks, each with a
// watchdog, printing every rank's output when a run fails. Skips (visibly) without MPI.
#include <regex>

#include "../support/testing.h"
#include "mpi_launch.h"

using namespace sl;
using sl::testing::RankRun;
using sl::testing::run_ranks;

namespace {

bool have_mpi() {
  if (sl::testing::mpi_available() && !sl::testing::ranks_binary().empty()) return true;
  sl::testing::report_skip("multi-rank tests", "no MPI in this build or no mpirun on PATH");
  return false;
}

const std::string kNormalCases = "-tce=failure*,scenario*";

}  // namespace

TEST_CASE("ranks: collectives on 2 ranks") {
  if (!have_mpi()) return;
  RankRun run =
      run_ranks(2, sl::testing::ranks_binary(), {kNormalCases}, 120, {{"SL_DIST_TIMEOUT", "60"}});
  CHECK_MESSAGE(run.exit_code == 0, run.report());
}

TEST_CASE("ranks: collectives on 3 ranks with SL_DIST_DEBUG (logs and agreement check)") {
  if (!have_mpi()) return;
  RankRun run = run_ranks(3, sl::testing::ranks_binary(), {kNormalCases}, 120,
                          {{"SL_DIST_TIMEOUT", "60"}, {"SL_DIST_DEBUG", "1"}});
  CHECK_MESSAGE(run.exit_code == 0, run.report());
  // every rank logged its collectives with op, dtype, count and sequence number
  for (int r = 0; r < 3; ++r) {
    std::regex line("\\[sl\\.dist rank " + std::to_string(r) +
                    "/3 mpi\\] allreduce #[0-9]+ \\(sum, float32 x 7\\)");
    CHECK_MESSAGE(std::regex_search(run.rank_stderr[static_cast<size_t>(r)], line), run.report());
  }
}

TEST_CASE("ranks: a rank that never joins gives the others a timeout DistError") {
  if (!have_mpi()) return;
  RankRun run = run_ranks(2, sl::testing::ranks_binary(), {"-tc=failure: a rank that never*"}, 60,
                          {{"SL_DIST_TIMEOUT", "2"}});
  CHECK_MESSAGE(!run.timed_out, run.report());
  CHECK_MESSAGE(run.rank_stdout[0].find("rank 0 timed out after") != std::string::npos,
                run.report());
  CHECK_MESSAGE(run.all_output().find("did not complete within 2 s") != std::string::npos,
                run.report());
}

TEST_CASE("ranks: killing one rank makes the others exit with a clear error within 60 s") {
  if (!have_mpi()) return;
  // Open MPI sends the survivors SIGTERM, then SIGKILL after odls_base_sigkill_timeout (1 s by
  // default): on a loaded machine a survivor once got no chance to print its line (rank 0's
  // output empty, 1 run in about 10), so this run gives them 5 s.
  RankRun run =
      run_ranks(3, sl::testing::ranks_binary(), {"-tc=failure: killing one rank*"}, 90,
                {{"SL_DIST_TIMEOUT", "300"}, {"OMPI_MCA_odls_base_sigkill_timeout", "5"}});
  CHECK_MESSAGE(!run.timed_out, run.report());
  CHECK_MESSAGE(run.seconds < 60, run.report());
  CHECK_MESSAGE(run.exit_code != 0, run.report());
  // the launcher names the dead rank, and each survivor says why it stops
  CHECK_MESSAGE(run.launcher_output.find("rank 2") != std::string::npos, run.report());
  for (int r = 0; r < 2; ++r) {
    CHECK_MESSAGE(run.rank_stderr[static_cast<size_t>(r)].find(
                      "shardlight: rank " + std::to_string(r) +
                      "/3: stopped by the launcher (SIGTERM)") != std::string::npos,
                  run.report());
  }
}

namespace {

struct ScratchDir {
  std::string path;
  ScratchDir() {
    char tmpl[] = "/tmp/sl_ranks_ckpt_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~ScratchDir() { [[maybe_unused]] int rc = std::system(("rm -rf '" + path + "'").c_str()); }
};

RankRun scenario(int np, const std::string& which, const std::string& dir, const std::string& mode,
                 bool exact = false, const std::string& opt = "adam") {
  return run_ranks(np, sl::testing::ranks_binary(), {"-tc=scenario: " + which}, 120,
                   {{"SL_DIST_TIMEOUT", "60"},
                    {"SL_TEST_CKPT_DIR", dir},
                    {"SL_TEST_CKPT_MODE", mode},
                    {"SL_TEST_CKPT_OPT", opt},
                    {"SL_TEST_CKPT_EXACT", exact ? "1" : "0"}});
}

}  // namespace

TEST_CASE("ranks: a checkpoint saved on 3 ranks loads on 2 and 1, in any mode, and continues") {
  if (!have_mpi()) return;
  ScratchDir dir;
  RankRun save = scenario(3, "save", dir.path, "zero2");
  REQUIRE_MESSAGE(save.exit_code == 0, save.report());
  struct Resume {
    int np;
    const char* mode;
    bool exact;
  };
  // 3 ranks zero1 runs the same reduce-scatters as zero2 (one micro-batch): bit-identical.
  for (Resume r : {Resume{2, "zero2", false}, Resume{2, "ddp", false}, Resume{1, "single", false},
                   Resume{3, "zero1", true}}) {
    CAPTURE(r.np);
    CAPTURE(std::string(r.mode));
    RankRun run = scenario(r.np, "resume", dir.path, r.mode, r.exact);
    CHECK_MESSAGE(run.exit_code == 0, run.report());
  }
}

TEST_CASE("ranks: a ddp checkpoint from 2 ranks loads into zero2 on 3") {
  if (!have_mpi()) return;
  ScratchDir dir;
  RankRun save = scenario(2, "save", dir.path, "ddp");
  REQUIRE_MESSAGE(save.exit_code == 0, save.report());
  RankRun run = scenario(3, "resume", dir.path, "zero2");
  CHECK_MESSAGE(run.exit_code == 0, run.report());
}

TEST_CASE("ranks: Lamb's and NAdam's state saved by zero2 on 2 ranks resumes on 1, 2 and 3") {
  // Lamb: per-parameter norms over pieces split between ranks; NAdam: a per-parameter scalar
  // mu_product (fc2's behind fc1's, see config() in test_checkpoint_ranks.cpp) that every rank
  // holding a piece of the parameter must agree on, and that a resharded load must give back.
  if (!have_mpi()) return;
  for (const char* opt : {"lamb", "nadam"}) {
    CAPTURE(std::string(opt));
    {
      ScratchDir dir;
      RankRun save = scenario(2, "save", dir.path, "zero2", false, opt);
      REQUIRE_MESSAGE(save.exit_code == 0, save.report());
      struct Resume {
        int np;
        const char* mode;
        bool exact;
      };
      // 2 ranks zero1 runs the same reduce-scatters as zero2 (one micro-batch): bit-identical
      for (Resume r : {Resume{1, "single", false}, Resume{3, "zero1", false},
                       Resume{3, "zero2", false}, Resume{2, "zero1", true}}) {
        CAPTURE(r.np);
        CAPTURE(std::string(r.mode));
        RankRun run = scenario(r.np, "resume", dir.path, r.mode, r.exact, opt);
        CHECK_MESSAGE(run.exit_code == 0, run.report());
      }
    }
    ScratchDir dir;
    RankRun save = scenario(1, "save", dir.path, "single", false, opt);
    REQUIRE_MESSAGE(save.exit_code == 0, save.report());
    RankRun run = scenario(2, "resume", dir.path, "zero2", false, opt);
    CHECK_MESSAGE(run.exit_code == 0, run.report());
  }
}

TEST_CASE("ranks: memory accounting on 4 ranks") {
  if (!have_mpi()) return;
  RankRun run = run_ranks(4, sl::testing::ranks_binary(), {"-tc=accounting*"}, 120,
                          {{"SL_DIST_TIMEOUT", "60"}});
  CHECK_MESSAGE(run.exit_code == 0, run.report());
}
