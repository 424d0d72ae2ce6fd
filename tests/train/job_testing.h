// What the trainer's end-to-end tests share (tests/train): running sl_train in one process or on
// several ranks, reading its output, synthetic data in the formats the jobs read, and the skip
// decorators for MPI and GPUs.
#pragma once

#include <string>
#include <vector>

#include "support/testing.h"

namespace sl::testing {

/// A fresh folder <tmp>/sl_test_<name>_<pid>, removed with everything in it at the end.
struct TempDir {
  std::string root;
  explicit TempDir(const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// Writes `bytes` to root/name; returns that path.
  std::string write(const std::string& name, const std::string& bytes) const;
};

/// The sl_train under test ($SL_TRAIN_BIN, set by tests/meson.build).
std::string sl_train_bin();

/// The trainer that has a GPU: sl_train when this machine has one, else sl_train_fake (builds
/// without CUDA: the fake GPU, Note [Fake GPU]); empty when neither.
std::string gpu_train_bin();

/// Writes `n` 28x28 images as Fashion-MNIST IDX files <dir>/<prefix>-{images-idx3,labels-idx1}-
/// ubyte, each label visible as a bright row (label * 2 + 3) over noise from `seed`.
void write_fashion_split(const std::string& dir, const std::string& prefix, int n, uint32_t seed);

/// Writes a WordNet-format database (<dir>/data.{noun,verb,adj,adv}) of `n` synsets per part,
/// glosses made of a few recurring words (so the vocabulary is small and the masked tokens are
/// learnable).
void write_wordnet(const std::string& dir, int n);

struct JobResult {
  int code = -1;
  std::string out;  ///< stdout and stderr together
};

/// Runs sl_train (or `bin`) with `args` in one process, with SL_NUM_THREADS=1.
JobResult run_job(const std::vector<std::string>& args, const std::string& bin = "");

/// The hex digest after the last "state digest " (empty when absent).
std::string state_digest_of(const std::string& out);

/// The training loss printed for the last epoch ("epoch E/E  loss X"); NaN when absent.
double final_loss(const std::string& out);

/// Runs `args` (3 epochs, with a --checkpoint-dir) whole, then stopped after epoch 1 and
/// resumed from its checkpoint; checks that both end in the same state digest.
void check_resume(const std::vector<std::string>& args, const std::string& bin = "");

/// The flags of the tests' tiny BERT: rows of 16 tokens, a vocabulary of at most 120, one layer
/// of hidden size 16 with 2 heads and an intermediate size of 32; 3 epochs of batches of 8 at
/// lr 0.01.
std::vector<std::string> tiny_bert_flags();
/// The flags of the tests' tiny CNN (channels 2 and 4, hidden 8): 3 epochs of batches of 32 at
/// lr 0.01.
std::vector<std::string> tiny_cnn_flags();

/// a followed by b.
std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b);

/// Skips (counted as skipped) without MPI and mpirun; `what` names the case in the report.
doctest::skip needs_mpi(const std::string& what);

/// Skips (counted as skipped) when gpu_train_bin() has nothing, and for `ranks` > 1 without MPI
/// or with fewer real GPUs than ranks (NCCL takes one GPU per rank; the fake GPU serves any).
doctest::skip needs_gpu_trainer(const std::string& what, int ranks = 1);

}  // namespace sl::testing
