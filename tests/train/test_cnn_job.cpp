// The main job end to end (sl_train --model cnn, tools/train/cnn.cpp) on a tiny synthetic
// Fashion-MNIST written as IDX files: a run stopped after its first epoch and resumed from the
// epoch checkpoint ends bit-identical to the uninterrupted run (compared by the job's "state
// digest", a hash of every parameter and buffer), under single and, when MPI is available, under
// zero2 on 2 ranks; a 2-rank zero2 checkpoint resumes as single; bad flags fail clearly.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../dist/mpi_launch.h"
#include "support/testing.h"

using namespace sl;

namespace {

std::string sl_train_bin() {
  const char* p = std::getenv("SL_TRAIN_BIN");
  REQUIRE_MESSAGE(p != nullptr, "SL_TRAIN_BIN is not set (tests/meson.build sets it)");
  return p;
}

void put_be32(std::ofstream& f, uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v >> 24),
                              static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
  f.write(reinterpret_cast<const char*>(b), 4);
}

/// `n` 28x28 images whose label is visible as a bright row (label * 2 + 3) over noise.
void write_split(const std::string& dir, const std::string& prefix, int n, uint32_t seed) {
  std::ofstream img(dir + "/" + prefix + "-images-idx3-ubyte", std::ios::binary);
  std::ofstream lbl(dir + "/" + prefix + "-labels-idx1-ubyte", std::ios::binary);
  put_be32(img, 0x803);
  put_be32(img, static_cast<uint32_t>(n));
  put_be32(img, 28);
  put_be32(img, 28);
  put_be32(lbl, 0x801);
  put_be32(lbl, static_cast<uint32_t>(n));
  uint32_t s = seed;
  auto next = [&s] { return s = s * 1664525u + 1013904223u; };
  for (int i = 0; i < n; ++i) {
    const int label = static_cast<int>(next() >> 28) % 10;
    lbl.put(static_cast<char>(label));
    for (int p = 0; p < 28 * 28; ++p) {
      int v = (p / 28 == label * 2 + 3) ? 220 : static_cast<int>(next() >> 26);
      img.put(static_cast<char>(v));
    }
  }
}

struct Env {
  std::string root, data;
  Env() {
    root =
        (std::filesystem::temp_directory_path() / ("sl_test_cnn_job_" + std::to_string(::getpid())))
            .string();
    std::filesystem::remove_all(root);
    data = root + "/data";
    std::filesystem::create_directories(data);
    write_split(data, "train", 96, 1);
    write_split(data, "t10k", 40, 2);
  }
  ~Env() { std::filesystem::remove_all(root); }
  /// Flags of the tiny configuration; 3 epochs of 96 / 32 = 3 steps.
  std::vector<std::string> args(const std::string& strategy, const std::string& ckpt) const {
    return {"--model",
            "cnn",
            "--strategy",
            strategy,
            "--data-dir",
            data,
            "--epochs",
            "3",
            "--batch-size",
            "32",
            "--lr",
            "0.01",
            "--channels1",
            "2",
            "--channels2",
            "4",
            "--hidden",
            "8",
            "--checkpoint-dir",
            root + "/" + ckpt};
  }
};

struct Result {
  int code = -1;
  std::string out;
};

/// Runs sl_train in one process (stdout and stderr together).
Result run_single(std::vector<std::string> args) {
  std::string cmd = "SL_NUM_THREADS=1 " + sl_train_bin();
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

/// The hex digest after "state digest " (empty when absent).
std::string digest(const std::string& out) {
  auto at = out.rfind("state digest ");
  return at == std::string::npos ? "" : out.substr(at + 13, 16);
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("cnn job: single, stopped after epoch 1 and resumed, ends bit-identical") {
  Env env;
  Result full = run_single(env.args("single", "a"));
  REQUIRE_MESSAGE(full.code == 0, full.out);
  CHECK(full.out.find("epoch 3/3") != std::string::npos);
  CHECK(std::filesystem::exists(env.root + "/a/manifest.json"));
  Result first = run_single(plus(env.args("single", "b"), {"--stop-after-epochs", "1"}));
  REQUIRE_MESSAGE(first.code == 0, first.out);
  CHECK(first.out.find("epoch 2/3") == std::string::npos);
  Result rest = run_single(plus(env.args("single", "b"), {"--resume", "1"}));
  REQUIRE_MESSAGE(rest.code == 0, rest.out);
  CHECK(rest.out.find("resumed from") != std::string::npos);
  CHECK(rest.out.find("epoch 1/3") == std::string::npos);
  CHECK(digest(full.out).size() == 16);
  CHECK_MESSAGE(digest(rest.out) == digest(full.out), full.out, "\n---\n", rest.out);
  // The digest is not trivially constant: the stopped run's state differs.
  CHECK(digest(first.out) != digest(full.out));
}

TEST_CASE(
    "cnn job: zero2 on 2 ranks resumes bit-identical, and a 2-rank checkpoint loads as single") {
  if (!sl::testing::mpi_available()) {
    MESSAGE("skipped: no MPI / mpirun in this build");
    return;
  }
  Env env;
  auto full = sl::testing::run_ranks(2, sl_train_bin(), env.args("zero2", "a"), 120);
  REQUIRE_MESSAGE(full.exit_code == 0, full.report());
  CHECK(full.rank_stdout[0].find("strategy zero2 on 2 rank(s)") != std::string::npos);
  CHECK(full.rank_stdout[1].empty());  // only rank 0 prints
  auto first = sl::testing::run_ranks(
      2, sl_train_bin(), plus(env.args("zero2", "b"), {"--stop-after-epochs", "1"}), 120);
  REQUIRE_MESSAGE(first.exit_code == 0, first.report());
  // Copy epoch 1's checkpoint before the 2-rank resume overwrites it.
  std::filesystem::copy(env.root + "/b", env.root + "/c", std::filesystem::copy_options::recursive);
  auto rest = sl::testing::run_ranks(2, sl_train_bin(),
                                     plus(env.args("zero2", "b"), {"--resume", "1"}), 120);
  REQUIRE_MESSAGE(rest.exit_code == 0, rest.report());
  CHECK_MESSAGE(digest(rest.rank_stdout[0]) == digest(full.rank_stdout[0]), full.report(),
                rest.report());
  // N -> M and mode -> mode: the zero2 checkpoint of 2 ranks continues in one process.
  Result single = run_single(plus(env.args("single", "c"), {"--resume", "1"}));
  REQUIRE_MESSAGE(single.code == 0, single.out);
  CHECK(single.out.find("resumed from") != std::string::npos);
  CHECK(single.out.find("epoch 3/3") != std::string::npos);
}

TEST_CASE("cnn job: errors are clear") {
  Env env;
  Result r = run_single(plus(env.args("single", "none"), {"--resume", "1"}));
  CHECK(r.code == 1);
  CHECK(r.out.find("cnn: --resume 1 but there is no checkpoint at") != std::string::npos);
  r = run_single(env.args("zero3", "x"));
  CHECK(r.code == 1);
  CHECK(r.out.find("zero3") != std::string::npos);
  // A checkpoint of another configuration is refused, not silently loaded.
  REQUIRE(run_single(plus(env.args("single", "d"), {"--stop-after-epochs", "1"})).code == 0);
  r = run_single(plus(env.args("single", "d"), {"--resume", "1", "--batch-size", "16"}));
  CHECK(r.code == 1);
  CHECK(r.out.find("was written with another configuration") != std::string::npos);
}
