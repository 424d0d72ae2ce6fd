// What the tests of the shared training loop's flags share (test_train_options.cpp,
// test_train_optimizers.cpp, test_train_refusals.cpp): tiny synthetic data for the cnn and
// bert_pos jobs with their flags, and readers of sl_train's printed numbers and of its
// checkpoints' optimizer files.
#pragma once

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "job_testing.h"

namespace sl::testing {

/// A temporary folder with data for two jobs: 12 WordNet synsets per part (48 glosses: 40 train,
/// 8 test) and 96 train / 40 test Fashion-MNIST images, under root/data.
struct TrainData : TempDir {
  explicit TrainData(const std::string& name) : TempDir(name) {
    std::filesystem::create_directories(root + "/data");
    write_wordnet(root + "/data", 12);
    write_fashion_split(root + "/data", "train", 96, 1);
    write_fashion_split(root + "/data", "t10k", 40, 2);
  }
  /// bert_pos without dropout (so a run's only randomness is its initialisation and data order),
  /// 3 epochs of 5 steps of 8 glosses.
  std::vector<std::string> pos(const std::string& strategy, const std::string& ckpt) const {
    return plus(plus({"--model", "bert_pos", "--strategy", strategy, "--data-dir", root + "/data",
                      "--seed", "4", "--dropout", "0"},
                     tiny_bert_flags()),
                {"--checkpoint-dir", root + "/" + ckpt});
  }
  /// The cnn job (convolutions, BatchNorm, linear layers): 3 epochs of 3 steps of 32 images.
  std::vector<std::string> cnn(const std::string& ckpt) const {
    return plus(plus({"--model", "cnn", "--data-dir", root + "/data"}, tiny_cnn_flags()),
                {"--checkpoint-dir", root + "/" + ckpt});
  }
  /// The checkpoint folder `ckpt` of pos() and cnn().
  std::string dir(const std::string& ckpt) const { return root + "/" + ckpt; }
};

/// The value after `key` in the last line of `out` that has it, or NaN.
inline double number_after(const std::string& out, const std::string& key) {
  auto at = out.rfind(key);
  return at == std::string::npos ? NAN : std::strtod(out.c_str() + at + key.size(), nullptr);
}

/// The numbers of --estimate-memory's row for (ranks, strategy): params, grads, optimizer,
/// masters, device, host, ZeRO paper (MiB); empty when there is no such row.
inline std::vector<double> estimate_row(const std::string& out, int ranks,
                                        const std::string& strategy) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    int n = 0;
    std::string kind;
    if (!(in >> n >> kind) || n != ranks || kind != strategy) continue;
    std::vector<double> row;
    for (double v; in >> v;) row.push_back(v);
    return row;
  }
  return {};
}

/// Whether an optimizer file of the sharded checkpoint at `dir` (each rank's safetensors, whose
/// header names its tensors) contains `text`. Fails the test when `dir` holds no such file.
inline bool optimizer_files_have(const std::string& dir, const std::string& text) {
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().filename() != "optimizer.safetensors") continue;
    ++files;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.find(text) != std::string::npos) return true;
  }
  REQUIRE_MESSAGE(files > 0, "no optimizer.safetensors under ", dir);
  return false;
}

}  // namespace sl::testing
