#include "job_testing.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../dist/mpi_launch.h"
#include "core/device.h"

namespace sl::testing {
namespace {

void put_be32(std::ofstream& f, uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v >> 24),
                              static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
  f.write(reinterpret_cast<const char*>(b), 4);
}

}  // namespace

TempDir::TempDir(const std::string& name) {
  root = (std::filesystem::temp_directory_path() /
          ("sl_test_" + name + "_" + std::to_string(::getpid())))
             .string();
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
}

TempDir::~TempDir() {
  std::filesystem::remove_all(root);
}

std::string TempDir::write(const std::string& name, const std::string& bytes) const {
  const std::string p = root + "/" + name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

std::string sl_train_bin() {
  const char* p = std::getenv("SL_TRAIN_BIN");
  REQUIRE_MESSAGE(p != nullptr, "SL_TRAIN_BIN is not set (tests/meson.build sets it)");
  return p;
}

std::string gpu_train_bin() {
  // No doctest assertion here (as sl_train_bin has): needs_gpu_trainer calls this while the test
  // cases are registered, before doctest's context exists, where an assertion dereferences null
  // (test_train died of SIGSEGV on the first machine with a GPU)
  const char* bin = std::getenv(cuda_is_available() ? "SL_TRAIN_BIN" : "SL_TRAIN_FAKE_GPU_BIN");
  return bin ? bin : "";
}

void write_fashion_split(const std::string& dir, const std::string& prefix, int n, uint32_t seed) {
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

void write_wordnet(const std::string& dir, int n) {
  const char* animals[] = {"cat", "dog", "horse", "bird", "fish"};
  const char* colours[] = {"red", "green", "brown", "white"};
  const char* places[] = {"river", "forest", "house", "field", "mountain", "sea"};
  int k = 0;
  for (const char* part : {"noun", "verb", "adj", "adv"}) {
    std::ofstream f(dir + "/data." + part);
    f << "  1 This software and database is being provided to you, the LICENSEE, by  \n";
    for (int i = 0; i < n; ++i, ++k) {
      f << 10000000 + k << " 03 n 01 " << animals[k % 5] << "_" << colours[k % 4] << " 0 000 | a "
        << colours[k % 4] << " " << animals[k % 5] << " that lives near the " << places[k % 6]
        << "; \"the " << animals[(k + 1) % 5] << " saw the " << places[(k + 2) % 6] << "\"  \n";
    }
  }
}

JobResult run_job(const std::vector<std::string>& args, const std::string& bin) {
  std::string cmd = "SL_NUM_THREADS=1 " + (bin.empty() ? sl_train_bin() : bin);
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  JobResult r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string state_digest_of(const std::string& out) {
  auto at = out.rfind("state digest ");
  return at == std::string::npos ? "" : out.substr(at + 13, 16);
}

double final_loss(const std::string& out) {
  auto at = out.rfind("  loss ");
  return at == std::string::npos ? NAN : std::atof(out.c_str() + at + 7);
}

void check_resume(const std::vector<std::string>& args, const std::string& bin) {
  JobResult full = run_job(args, bin);
  REQUIRE_MESSAGE(full.code == 0, full.out);
  CHECK(full.out.find("epoch 3/3") != std::string::npos);
  std::vector<std::string> other = args;
  auto dir = std::find(other.begin(), other.end(), "--checkpoint-dir");
  REQUIRE(dir + 1 < other.end());
  *(dir + 1) += "_resumed";
  JobResult first = run_job(plus(other, {"--stop-after-epochs", "1"}), bin);
  REQUIRE_MESSAGE(first.code == 0, first.out);
  JobResult rest = run_job(plus(other, {"--resume", "1"}), bin);
  REQUIRE_MESSAGE(rest.code == 0, rest.out);
  CHECK(rest.out.find("resumed from") != std::string::npos);
  CHECK(state_digest_of(full.out).size() == 16);
  CHECK_MESSAGE(state_digest_of(rest.out) == state_digest_of(full.out), full.out, "\n---\n",
                rest.out);
  CHECK(state_digest_of(first.out) != state_digest_of(full.out));
}

std::vector<std::string> tiny_bert_flags() {
  return {"--epochs",  "3",  "--batch-size", "8",   "--lr",           "0.01",
          "--seq-len", "16", "--vocab-size", "120", "--layers",       "1",
          "--hidden",  "16", "--heads",      "2",   "--intermediate", "32"};
}

std::vector<std::string> tiny_cnn_flags() {
  return {"--epochs",    "3", "--batch-size", "32", "--lr",     "0.01",
          "--channels1", "2", "--channels2",  "4",  "--hidden", "8"};
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

doctest::skip needs_mpi(const std::string& what) {
  return skip_when(!mpi_available(), what, "no MPI / mpirun in this build");
}

doctest::skip needs_gpu_trainer(const std::string& what, int ranks) {
  std::string why;
  if (gpu_train_bin().empty()) {
    why = "no GPU visible, and this build (with CUDA) has no fake GPU";
  } else if (ranks > 1 && !mpi_available()) {
    why = "no MPI / mpirun in this build";
  } else if (ranks > 1 && cuda_is_available() && cuda_device_count() < ranks) {
    why = "NCCL takes one GPU per rank, and fewer GPUs than ranks are visible";
  }
  return skip_when(!why.empty(), what + " on " + std::to_string(ranks) + " GPU rank(s)", why);
}

}  // namespace sl::testing
