// The model-zoo jobs end to end through sl_train on tiny synthetic data: resnet (Fashion-MNIST
// IDX files) and bert (a WordNet-format gloss database). Each run stopped after its first epoch
// and resumed from the epoch checkpoint ends bit-identical to the uninterrupted run (the job's
// "state digest"); bert also under zero2 on 2 ranks, whose sharded checkpoint (with BERT's tied
// decoder weight) continues in one process, under dp, and on the fake GPU; bad flags fail clearly.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../dist/mpi_launch.h"
#include "core/device.h"
#include "job_testing.h"
#include "support/testing.h"

using sl::testing::check_resume;
using sl::testing::gpu_train_bin;
using sl::testing::JobResult;
using sl::testing::needs_gpu_trainer;
using sl::testing::needs_mpi;
using sl::testing::plus;
using sl::testing::run_job;
using sl::testing::sl_train_bin;
using sl::testing::state_digest_of;
using sl::testing::write_wordnet;

namespace {

/// A temporary folder with a data/ folder in it.
struct DataDir : sl::testing::TempDir {
  explicit DataDir(const std::string& name) : sl::testing::TempDir(name) {
    std::filesystem::create_directories(data());
  }
  std::string data() const { return root + "/data"; }
};

/// N in the first ", vocabulary N" of a run's output (-1 when absent).
int64_t vocabulary_of(const std::string& out) {
  const auto at = out.find(", vocabulary ");
  return at == std::string::npos ? -1 : std::atoll(out.c_str() + at + 13);
}

std::vector<std::string> resnet_args(const DataDir& d, const std::string& ckpt) {
  return {
      "--model",      "resnet", "--data-dir", d.data(), "--epochs",         "3",
      "--batch-size", "32",     "--lr",       "0.01",   "--width",          "2",
      "--blocks",     "1,1",    "--seed",     "3",      "--checkpoint-dir", d.root + "/" + ckpt};
}

std::vector<std::string> bert_args(const DataDir& d, const std::string& strategy,
                                   const std::string& ckpt) {
  return plus(plus({"--model", "bert", "--strategy", strategy, "--data-dir", d.data()},
                   sl::testing::tiny_bert_flags()),
              {"--checkpoint-dir", d.root + "/" + ckpt});
}

}  // namespace

TEST_CASE("resnet job: trains, stops after epoch 1 and resumes bit-identical") {
  DataDir d("resnet_job");
  sl::testing::write_fashion_split(d.data(), "train", 96, 1);
  sl::testing::write_fashion_split(d.data(), "t10k", 40, 2);
  JobResult r = run_job(resnet_args(d, "a"));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(
      r.out.find("model: ResNet(basic, width 2, blocks 1,1, small stem)") != std::string::npos,
      r.out);
  CHECK(r.out.find("test accuracy") != std::string::npos);
  check_resume(resnet_args(d, "b"));
  // errors: a malformed stage list, an unknown block
  r = run_job(plus(resnet_args(d, "c"), {"--blocks", "1,x"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(
      r.out.find("resnet: --blocks '1,x' must be positive block counts") != std::string::npos,
      r.out);
  // a trailing comma is no empty stage (it was once dropped silently), an empty list no model
  r = run_job(plus(resnet_args(d, "c"), {"--blocks", "1,1,"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(
      r.out.find("resnet: --blocks '1,1,' must be positive block counts") != std::string::npos,
      r.out);
  r = run_job(plus(resnet_args(d, "c"), {"--blocks="}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("resnet: --blocks '' names no stage") != std::string::npos, r.out);
  r = run_job(plus(resnet_args(d, "c"), {"--block", "wide"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(
      r.out.find("resnet: --block must be basic or bottleneck, got 'wide'") != std::string::npos,
      r.out);
}

TEST_CASE("bert job: masked-LM on glosses, stops after epoch 1 and resumes bit-identical") {
  DataDir d("bert_job");
  write_wordnet(d.data(), 12);
  JobResult r = run_job(bert_args(d, "single", "a"));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find("wordnet: 48 glosses") != std::string::npos, r.out);
  CHECK(r.out.find("masked-token accuracy") != std::string::npos);
  check_resume(bert_args(d, "single", "b"));
  // Activation checkpointing recomputes every layer in backward, dropout masks included: the
  // same end state bit for bit.
  JobResult ck = run_job(plus(bert_args(d, "single", "ck"), {"--checkpoint-activations", "1"}));
  REQUIRE_MESSAGE(ck.code == 0, ck.out);
  CHECK(ck.out.find("seq 16, activation checkpointing)") != std::string::npos);
  CHECK(state_digest_of(ck.out) == state_digest_of(r.out));
  // BERT's schedule (linear warmup and decay) is saved and resumed as well
  r = run_job(plus(bert_args(d, "single", "w"), {"--warmup-steps", "5"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find("linear warmup (5 steps) and decay over 21 steps") != std::string::npos,
                r.out);
  check_resume(plus(bert_args(d, "single", "w2"), {"--warmup-steps", "5"}));
  // dp: replicas of the tied model in threads
  r = run_job(bert_args(d, "dp", "dp"));
  CHECK_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("epoch 3/3") != std::string::npos);
  // errors: no database, a row too short for [CLS] and a token
  r = run_job(plus(bert_args(d, "single", "e"), {"--data-dir", d.root + "/none"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(
      r.out.find("wordnet: cannot open " + d.root + "/none/data.noun") != std::string::npos, r.out);
  r = run_job(plus(bert_args(d, "single", "e"), {"--warmup-steps", "22"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("bert: --warmup-steps must lie in [0, 21] (the run's steps), got 22") !=
                    std::string::npos,
                r.out);
  r = run_job(plus(bert_args(d, "single", "e"), {"--seq-len", "1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("bert: --seq-len must be >= 3") != std::string::npos, r.out);
  // one gloss (in pieces of a vocabulary trained on it alone) fills two rows of 16; only the
  // 20th row is held out
  r = run_job(plus(bert_args(d, "single", "e"), {"--max-texts", "1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("bert: the job's data has an empty split (2 train / 0 test examples)") !=
                    std::string::npos,
                r.out);
}

TEST_CASE("bert job: --text-file pre-trains on your own corpus, pinned by its bytes") {
  DataDir d("bert_text");
  std::string text;
  for (int i = 0; i < 60; ++i) {
    text += "the " + std::string(i % 2 ? "cat" : "dog") + " number " + std::to_string(i % 7) +
            " sat near the " + (i % 3 ? "river" : "house") + "\r\n";  // CRLF lines are fine
    if (i % 10 == 0) text += "\n   \n";                               // blank lines are skipped
  }
  const std::string file = d.write("corpus.txt", text);
  auto args = [&](const std::string& ckpt) {
    std::vector<std::string> a = bert_args(d, "single", ckpt);
    auto dir = std::find(a.begin(), a.end(), "--data-dir");
    a.erase(dir, dir + 2);  // WordNet's folder: not with --text-file
    return plus(a, {"--text-file", file});
  };
  JobResult r = run_job(args("a"));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find(file + ": 60 texts, ") != std::string::npos, r.out);
  const int64_t vocabulary = vocabulary_of(r.out);
  CHECK(vocabulary > 5);
  check_resume(args("b"));
  // Another corpus under the same name: the checkpoint does not resume from it.
  d.write("corpus.txt", text + "one more line\n");
  r = run_job(plus(args("a"), {"--resume", "1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("was written with another configuration") != std::string::npos, r.out);
  // The checkpoint holds its vocabulary, so bert_pos fine-tunes on WordNet with the corpus's.
  write_wordnet(d.data(), 12);
  std::vector<std::string> pos = bert_args(d, "single", "pos");
  pos[1] = "bert_pos";
  r = run_job(plus(pos, {"--init", d.root + "/b"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(vocabulary_of(r.out) == vocabulary);
  // Errors name the file, and the line for bad UTF-8.
  d.write("bad.txt", "fine\nalso fine\nnot \xff fine\n");
  r = run_job(plus(args("e"), {"--text-file", d.root + "/bad.txt"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("bert: --text-file '" + d.root +
                           "/bad.txt' line 3: invalid UTF-8 at "
                           "byte 4 (0xFF)") != std::string::npos,
                r.out);
  d.write("empty.txt", "\n \n");
  r = run_job(plus(args("e"), {"--text-file", d.root + "/empty.txt"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("has no text (3 bytes)") != std::string::npos, r.out);
  r = run_job(plus(args("e"), {"--text-file", d.root + "/none.txt"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(
      r.out.find("bert: cannot read --text-file '" + d.root + "/none.txt'") != std::string::npos,
      r.out);
  r = run_job(plus(args("e"), {"--data-dir", d.data()}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("--text-file and --data-dir (WordNet's folder) exclude each other") !=
                    std::string::npos,
                r.out);
}

TEST_CASE("bert_pos job: fine-tunes from the bert job's checkpoint, and resumes bit-identical") {
  DataDir d("bert_pos_job");
  write_wordnet(d.data(), 12);
  // pre-training: 2 epochs of the masked-LM job
  JobResult pre = run_job(plus(bert_args(d, "single", "pre"), {"--epochs", "2"}));
  REQUIRE_MESSAGE(pre.code == 0, pre.out);
  auto pos_args = [&](const std::string& ckpt) {
    std::vector<std::string> a = bert_args(d, "single", ckpt);
    a[1] = "bert_pos";
    return a;
  };
  JobResult scratch = run_job(pos_args("scratch"));
  REQUIRE_MESSAGE(scratch.code == 0, scratch.out);
  CHECK_MESSAGE(scratch.out.find("glosses labelled noun/verb/adj/adv") != std::string::npos,
                scratch.out);
  const std::vector<std::string> init = {"--init", d.root + "/pre"};
  JobResult tuned = run_job(plus(pos_args("tuned"), init));
  REQUIRE_MESSAGE(tuned.code == 0, tuned.out);
  CHECK(tuned.out.find("encoder from " + d.root + "/pre") != std::string::npos);
  // the encoder really came from the checkpoint: the runs end in other states
  CHECK(state_digest_of(tuned.out) != state_digest_of(scratch.out));
  check_resume(plus(pos_args("tuned2"), init));
  // The checkpoint's own vocabulary is used, whatever the vocabulary flags say: the same run.
  JobResult r = run_job(plus(plus(pos_args("v"), init), {"--vocab-size", "100"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(vocabulary_of(r.out) == vocabulary_of(pre.out));
  CHECK(state_digest_of(r.out) == state_digest_of(tuned.out));
  // A missing file is refused.
  r = run_job(plus(pos_args("e"), {"--init", d.root + "/nothing.safetensors"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("nothing.safetensors") != std::string::npos, r.out);
}

TEST_CASE("bert job: zero2 on 2 ranks resumes bit-identical, and its checkpoint loads as single" *
          needs_mpi("bert job on 2 ranks")) {
  DataDir d("bert_zero2");
  write_wordnet(d.data(), 12);
  auto full = sl::testing::run_ranks(2, sl_train_bin(), bert_args(d, "zero2", "a"), 120);
  REQUIRE_MESSAGE(full.exit_code == 0, full.report());
  auto first = sl::testing::run_ranks(
      2, sl_train_bin(), plus(bert_args(d, "zero2", "b"), {"--stop-after-epochs", "1"}), 120);
  REQUIRE_MESSAGE(first.exit_code == 0, first.report());
  std::filesystem::copy(d.root + "/b", d.root + "/c", std::filesystem::copy_options::recursive);
  auto rest = sl::testing::run_ranks(2, sl_train_bin(),
                                     plus(bert_args(d, "zero2", "b"), {"--resume", "1"}), 120);
  REQUIRE_MESSAGE(rest.exit_code == 0, rest.report());
  CHECK_MESSAGE(state_digest_of(rest.rank_stdout[0]) == state_digest_of(full.rank_stdout[0]),
                full.report(), rest.report());
  // The sharded checkpoint (the tied decoder weight stored once) continues in one process.
  JobResult single = run_job(plus(bert_args(d, "single", "c"), {"--resume", "1"}));
  REQUIRE_MESSAGE(single.code == 0, single.out);
  CHECK(single.out.find("resumed from") != std::string::npos);
  CHECK(single.out.find("epoch 3/3") != std::string::npos);
}

TEST_CASE("bert job: on the GPU as on the CPU" * needs_gpu_trainer("bert job")) {
  DataDir d("bert_gpu");
  write_wordnet(d.data(), 12);
  JobResult cpu = run_job(bert_args(d, "single", "cpu"));
  REQUIRE_MESSAGE(cpu.code == 0, cpu.out);
  JobResult gpu =
      run_job(plus(bert_args(d, "single", "gpu"), {"--device", "cuda"}), gpu_train_bin());
  REQUIRE_MESSAGE(gpu.code == 0, gpu.out);
  CHECK(gpu.out.find("on cuda:0") != std::string::npos);
  if (!sl::cuda_is_available()) {
    // the fake GPU runs the CPU's kernels in the CPU's order (Note [Fake GPU])
    CHECK_MESSAGE(state_digest_of(gpu.out) == state_digest_of(cpu.out), cpu.out, "\n---\n",
                  gpu.out);
  } else {
    // a GPU sums in other orders: the last epoch's training loss within a thousandth
    CHECK_MESSAGE(std::fabs(sl::testing::final_loss(gpu.out) - sl::testing::final_loss(cpu.out)) <=
                      1e-3 * std::max(1.0, std::fabs(sl::testing::final_loss(cpu.out))),
                  cpu.out, "\n---\n", gpu.out);
  }
}
