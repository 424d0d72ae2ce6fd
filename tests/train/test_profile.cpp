// sl_train --profile (tools/train/step_profile.h) on the tiny cnn job: the window of steps it
// records, the trace read back as JSON, a run that does not change what it trains, one trace per
// rank under mpirun, and its flag errors before any training.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../dist/mpi_launch.h"
#include "job_testing.h"
#include "nn/serialize/json.h"
#include "support/testing.h"

using sl::serialize::Json;
using sl::testing::JobResult;
using sl::testing::needs_mpi;
using sl::testing::plus;
using sl::testing::run_job;
using sl::testing::sl_train_bin;
using sl::testing::state_digest_of;
using sl::testing::TempDir;

namespace {

struct Env {
  TempDir dir{"profile_job"};
  std::string data = dir.root + "/data";
  Env() {
    std::filesystem::create_directories(data);
    sl::testing::write_fashion_split(data, "train", 96, 1);
    sl::testing::write_fashion_split(data, "t10k", 40, 2);
  }
  /// 3 epochs of 96 / 32 = 3 steps: the run's steps are 0..8.
  std::vector<std::string> args(const std::string& strategy = "single") const {
    return plus(plus({"--model", "cnn", "--strategy", strategy, "--data-dir", data},
                     sl::testing::tiny_cnn_flags()),
                {"--checkpoint-dir", dir.root + "/ckpt"});
  }
};

struct Trace {
  std::map<std::string, int> complete;  ///< "X" events by name
  std::map<std::string, int> async;     ///< "b" events by name
  std::map<std::string, int> category;  ///< "X" events by category
  std::map<std::string, int> counters;  ///< "C" events (memory samples) by name
  std::string process;
  std::vector<std::string> threads;
};

Trace read_trace(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "no trace at ", path);
  std::stringstream ss;
  ss << f.rdbuf();
  Trace t;
  const Json doc = Json::parse(ss.str(), "trace");
  for (const Json& e : doc.at("traceEvents").items()) {
    const std::string ph = e.at("ph").as_string();
    const std::string name = e.at("name").as_string();
    if (ph == "M") {
      (name == "process_name" ? t.process : t.threads.emplace_back()) =
          e.at("args").at("name").as_string();
    } else if (ph == "X") {
      t.complete[name] += 1;
      t.category[e.at("cat").as_string()] += 1;
    } else if (ph == "b") {
      t.async[name] += 1;
    } else if (ph == "C") {
      t.counters[name] += 1;
    }
  }
  return t;
}

}  // namespace

TEST_CASE("profile: --profile records its window of steps and leaves the training unchanged") {
  Env env;
  const std::string trace = env.dir.root + "/trace.json";
  JobResult plain = run_job(env.args());
  REQUIRE_MESSAGE(plain.code == 0, plain.out);
  JobResult r = run_job(
      plus(env.args(), {"--profile", trace, "--profile-from", "1", "--profile-steps", "2"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find("cnn: profile of steps 1..2 (rank 0's below), traces in " + trace) !=
                    std::string::npos,
                r.out);
  CHECK(r.out.find("self ms") != std::string::npos);
  CHECK(r.out.find("conv2d_forward_kernel") != std::string::npos);
  CHECK(r.out.find("cpu memory: peak ") != std::string::npos);
  // Recording changes no bit of the run.
  CHECK(state_digest_of(r.out) == state_digest_of(plain.out));
  const Trace t = read_trace(trace);
  CHECK(t.process == "cnn");
  CHECK(t.threads.at(0) == "main");
  // Steps 1 and 2 of epoch 1: their phases, and the batch of step 2 loaded inside the window.
  CHECK(t.complete.at("forward") == 2);
  CHECK(t.complete.at("backward") == 2);
  CHECK(t.complete.at("optimizer step") == 2);
  CHECK(t.complete.at("update parameters") == 2);
  CHECK(t.complete.at("data") == 1);
  CHECK(t.complete.count("evaluate") == 0);
  CHECK(t.complete.at("conv2d_forward_kernel") == 2 * 2);  // two conv layers
  CHECK(t.complete.at("Conv2dBackward") == 2 * 2);
  CHECK(t.category.at("kernel") > 0);
  CHECK(t.async.empty());  // one rank: no collectives
  CHECK(t.counters.at("cpu memory") > 0);
}

TEST_CASE("profile: a window over an epoch's end holds the evaluation and the checkpoint") {
  Env env;
  const std::string trace = env.dir.root + "/t.json";
  JobResult r = run_job(
      plus(env.args(), {"--profile", trace, "--profile-from", "2", "--profile-steps", "2"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  const Trace t = read_trace(trace);
  CHECK(t.complete.at("forward") == 2);
  CHECK(t.complete.at("evaluate") == 1);
  CHECK(t.complete.at("checkpoint") == 1);
  // A window past the run's end stops with the run: steps 7 and 8 of 0..8.
  r = run_job(plus(env.args(), {"--profile", trace, "--profile-from", "7", "--profile-steps", "5",
                                "--checkpoint-dir", env.dir.root + "/ckpt2"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find("profile of steps from 7 to the run's end") != std::string::npos, r.out);
  CHECK(read_trace(trace).complete.at("forward") == 2);
}

TEST_CASE("profile: with --device cuda the trace has the GPU's track of gpu events" *
          sl::testing::needs_gpu_trainer("profile on a GPU")) {
  Env env;
  const std::string trace = env.dir.root + "/gpu.json";
  JobResult r = run_job(plus(env.args(), {"--device", "cuda", "--profile", trace, "--profile-from",
                                          "1", "--profile-steps", "2"}),
                        sl::testing::gpu_train_bin());
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find("and 1 device(s)") != std::string::npos, r.out);
  CHECK(r.out.find("  cuda:0 stream: busy ") != std::string::npos);
  CHECK(r.out.find("  gpu       conv2d_forward_kernel") != std::string::npos);
  const Trace t = read_trace(trace);
  CHECK(std::count(t.threads.begin(), t.threads.end(), "cuda:0 stream") == 1);
  CHECK(t.category.at("gpu") > 0);
  // Each conv forward call (two layers, two steps) is a kernel event and a gpu event.
  CHECK(t.complete.at("conv2d_forward_kernel") == 2 * 2 * 2);
}

TEST_CASE("profile: bad --profile flags fail before training, naming the flag") {
  Env env;
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::string missing = env.dir.root + "/no/such/folder/trace.json";
  for (const Case& c :
       {Case{{"--profile", "t.json", "--profile-steps", "0"},
             "cnn: --profile-steps must be >= 1, got 0"},
        Case{{"--profile", "t.json", "--profile-from", "-1"},
             "cnn: --profile-from must be >= 0, got -1"},
        Case{{"--profile", env.dir.root + "/t.json", "--profile-from", "9"},
             "cnn: --profile-from 9 is past this run's last step (9 step(s) left to take"},
        Case{{"--profile", missing}, "cnn: --profile '" + missing + "': the folder '"},
        Case{{"--profile", env.dir.root}, "' is a folder; name the trace file to write"},
        Case{{"--profile-step", "3"}, "unknown flag --profile-step"}}) {
    JobResult r = run_job(plus(env.args(), c.flags));
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find(c.message) != std::string::npos, r.out);
    CHECK(r.out.find("epoch 1/3") == std::string::npos);
  }
}

TEST_CASE("profile: under mpirun each rank writes its own trace, with its collectives" *
          needs_mpi("profile on 2 ranks")) {
  Env env;
  const std::string trace = env.dir.root + "/trace.json";
  auto run = sl::testing::run_ranks(
      2, sl_train_bin(), plus(env.args("zero2"), {"--profile", trace, "--profile-steps", "2"}),
      120);
  REQUIRE_MESSAGE(run.exit_code == 0, run.report());
  CHECK(run.rank_stdout[0].find("traces in " + env.dir.root + "/trace.rank0.json .. " +
                                env.dir.root + "/trace.rank1.json") != std::string::npos);
  CHECK(run.rank_stdout[0].find("collectives (in flight") != std::string::npos);
  CHECK(run.rank_stdout[1].empty());
  CHECK_FALSE(std::filesystem::exists(trace));
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    const Trace t = read_trace(env.dir.root + "/trace.rank" + std::to_string(rank) + ".json");
    CHECK(t.process == "rank " + std::to_string(rank));
    CHECK(t.complete.at("forward") == 2);
    // zero2: gradients reduce-scattered, parameters all-gathered, each step
    CHECK(t.async.at("reduce_scatter") >= 2);
    CHECK(t.async.at("allgather") >= 2);
    CHECK(t.complete.at("wait allgather") >= 2);
    bool comm_thread = false;
    for (const std::string& name : t.threads) comm_thread = comm_thread || name == "communication";
    CHECK(comm_thread);
  }
}
