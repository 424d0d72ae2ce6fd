// The shared training loop's --accumulate and --precision (tools/train/supervised.h), end to end
// through sl_train on tiny synthetic data: K micro-batches make the whole batch's step (compared
// parameter by parameter through the checkpoints, single and over 2 ranks, and across a resume
// that changes K); autocast (bf16 and f16 with loss scaling) and bfloat16 parameters with float32
// master weights train, resume bit-identical, and report the ZeRO paper's per-parameter bytes.
// Flags that no job reads fail with a suggestion; --help lists each job's flags, and the table
// cannot drift from the code.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "../dist/mpi_launch.h"
#include "dist/checkpoint.h"
#include "job_testing.h"
#include "registry.h"
#include "support/testing.h"

using sl::testing::check_resume;
using sl::testing::final_loss;
using sl::testing::gpu_train_bin;
using sl::testing::JobResult;
using sl::testing::needs_gpu_trainer;
using sl::testing::needs_mpi;
using sl::testing::plus;
using sl::testing::run_job;
using sl::testing::sl_train_bin;
using sl::testing::state_digest_of;

using namespace sl;

namespace {

struct Data : sl::testing::TempDir {
  explicit Data(const std::string& name) : sl::testing::TempDir(name) {
    std::filesystem::create_directories(root + "/data");
    sl::testing::write_wordnet(root + "/data", 12);  // 48 glosses: 40 train, 8 test
    sl::testing::write_fashion_split(root + "/data", "train", 96, 1);
    sl::testing::write_fashion_split(root + "/data", "t10k", 40, 2);
  }
  /// bert_pos without dropout (so a run's only randomness is its initialisation and data order),
  /// 3 epochs of 5 steps of 8 glosses.
  std::vector<std::string> pos(const std::string& strategy, const std::string& ckpt) const {
    return plus(plus({"--model", "bert_pos", "--strategy", strategy, "--data-dir", root + "/data",
                      "--seed", "4", "--dropout", "0"},
                     sl::testing::tiny_bert_flags()),
                {"--checkpoint-dir", root + "/" + ckpt});
  }
  /// The cnn job (convolutions, BatchNorm, linear layers): 3 epochs of 3 steps of 32 images.
  std::vector<std::string> cnn(const std::string& ckpt) const {
    return plus(
        plus({"--model", "cnn", "--data-dir", root + "/data"}, sl::testing::tiny_cnn_flags()),
        {"--checkpoint-dir", root + "/" + ckpt});
  }
  std::string dir(const std::string& ckpt) const { return root + "/" + ckpt; }
};

/// The largest |a - b| over the model parameters of two checkpoints (same names and shapes).
double max_param_diff(const std::string& a_dir, const std::string& b_dir) {
  serialize::StateDict a = dist::consolidate_sharded_checkpoint(a_dir);
  serialize::StateDict b = dist::consolidate_sharded_checkpoint(b_dir);
  REQUIRE(a.size() == b.size());
  REQUIRE(a.size() > 0);
  double worst = 0;
  for (const auto& [name, t] : a) {
    CAPTURE(name);
    REQUIRE(b.contains(name));
    Tensor d = (t.to(DType::f64) - b.at(name).to(DType::f64)).abs();
    if (d.numel() > 0) worst = std::max(worst, d.max().item<double>());
  }
  return worst;
}

// The tolerance of a step made of micro-batches against the whole batch's. The gradients differ
// only by float32 reassociation (about 1e-7 relative), but Adam divides each gradient by its own
// running magnitude, so where a gradient is near zero a rounding difference can change that
// parameter's update by a fair share of lr; no useful bound follows a priori. Measured after 15
// steps of lr 0.01 (2026-12-02): at most 7.7e-7 with K = 2 and 2.6e-6 with K = 4. A wrong split
// (examples dropped or repeated, or a step per micro-batch) moves the parameters by O(lr): the
// batch-4 run below lands 0.15 away. 1e-4 lies between, three orders of magnitude from both.
constexpr double kAccumTol = 1e-4;

/// The value after `key` in the last line of `out` that has it, or NaN.
double number_after(const std::string& out, const std::string& key) {
  auto at = out.rfind(key);
  return at == std::string::npos ? NAN : std::strtod(out.c_str() + at + key.size(), nullptr);
}

/// The numbers of --estimate-memory's row for (ranks, strategy): params, grads, optimizer,
/// masters, device, host, ZeRO paper (MiB); empty when there is no such row.
std::vector<double> estimate_row(const std::string& out, int ranks, const std::string& strategy) {
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
/// header names its tensors) contains `text`.
bool optimizer_files_have(const std::string& dir, const std::string& text) {
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

}  // namespace

TEST_CASE("--estimate-memory N: each strategy's bytes per rank on 1..N ranks, without training") {
  Data d("estimate");
  // the job's own model (not the tiny one of the other tests): nothing trains
  const std::vector<std::string> cnn = {
      "--model", "cnn", "--data-dir", d.root + "/data", "--checkpoint-dir", d.dir("e")};
  JobResult r = run_job(plus(cnn, {"--estimate-memory", "3"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("epoch 1/") == std::string::npos);
  CHECK_FALSE(std::filesystem::exists(d.dir("e")));  // no checkpoint: nothing ran
  const std::vector<double> single = estimate_row(r.out, 1, "single");
  REQUIRE(single.size() == 7);
  CHECK(single[0] > 1.0);  // the cnn's 421738 float32 parameters: 1.6 MiB
  for (int n : {2, 3}) {   // 1, 2, then the N asked for
    CAPTURE(n);
    const auto ddp = estimate_row(r.out, n, "ddp"), z1 = estimate_row(r.out, n, "zero1"),
               z2 = estimate_row(r.out, n, "zero2");
    REQUIRE(ddp.size() == 7);
    REQUIRE(z1.size() == 7);
    REQUIRE(z2.size() == 7);
    // padding adds less than n elements per bucket: within the table's rounding of the formula
    CHECK(std::abs(ddp[2] - single[2]) <= 0.002);
    CHECK(std::abs(z1[2] - single[2] / n) <= 0.002);
    CHECK(std::abs(z2[1] - single[1] / n) <= 0.002);
    for (const auto* row : {&ddp, &z1, &z2}) CHECK(std::abs((*row)[4] - (*row)[6]) <= 0.005);
  }
  CHECK(estimate_row(r.out, 4, "ddp").empty());
  // activations, measured: the default batch of 128 is more than the 96 training images here
  const std::string act = r.out.substr(r.out.find("activations and temporaries per rank"));
  CHECK(act.find("1          128          -  (the training split has only 96 examples)") !=
        std::string::npos);
  CHECK(act.find("3            -          -  (--batch-size 128 does not split into 3 x 1 equal "
                 "micro-batches)") != std::string::npos);
  const std::vector<double> two = estimate_row(act, 2, "64");
  REQUIRE(two.size() == 1);
  // a batch of 32 (--batch-size 64 over 2 ranks) against one of 64 (over 1): the CNN's
  // activations grow with the batch (its fixed temporaries are a small part at 32 images:
  // measured 2026-12-03, 28.4 / 15.4 MiB)
  r = run_job(plus(cnn, {"--estimate-memory", "2", "--batch-size", "64"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  const std::string act64 = r.out.substr(r.out.find("activations and temporaries per rank"));
  const std::vector<double> b64 = estimate_row(act64, 1, "64"), b32 = estimate_row(act64, 2, "32");
  REQUIRE(b64.size() == 1);
  REQUIRE(b32.size() == 1);
  CHECK(b32[0] > 1.0);
  CHECK(b64[0] > 1.5 * b32[0]);
  CHECK(b64[0] < 2.5 * b32[0]);
  // --offload-optimizer plans for a GPU from this CPU: zero's state moves to the host column
  r = run_job(plus(cnn, {"--estimate-memory", "2", "--offload-optimizer", "1"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  const auto ddp = estimate_row(r.out, 2, "ddp"), z2 = estimate_row(r.out, 2, "zero2");
  REQUIRE(ddp.size() == 7);
  REQUIRE(z2.size() == 7);
  CHECK(ddp[5] == 0);
  CHECK(z2[2] == 0);
  CHECK(z2[5] > ddp[2] / 2);  // the state's half plus the step's copies
  r = run_job(plus(cnn, {"--estimate-memory", "-1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("--estimate-memory must be a number of ranks in [1, 1048576] (0: "
                           "train), got -1") != std::string::npos,
                r.out);
}

TEST_CASE("--estimate-memory on the GPU: activations measured on its allocator" *
          needs_gpu_trainer("estimate-memory")) {
  Data d("estimate_gpu");
  const std::vector<std::string> cnn = {
      "--model",           "cnn",  "--data-dir",          d.root + "/data",
      "--device",          "cuda", "--batch-size",        "64",
      "--estimate-memory", "2",    "--offload-optimizer", "1"};
  JobResult gpu = run_job(cnn, gpu_train_bin());
  REQUIRE_MESSAGE(gpu.code == 0, gpu.out);
  JobResult cpu =
      run_job(plus(std::vector<std::string>(cnn.begin(), cnn.begin() + 4),
                   {"--batch-size", "64", "--estimate-memory", "2", "--offload-optimizer", "1"}));
  REQUIRE_MESSAGE(cpu.code == 0, cpu.out);
  // the model states are computed, so the same on either device
  for (const char* kind : {"ddp", "zero1", "zero2"}) {
    CAPTURE(kind);
    CHECK(estimate_row(gpu.out, 2, kind) == estimate_row(cpu.out, 2, kind));
  }
  const auto at = gpu.out.find("activations and temporaries per rank");
  REQUIRE(at != std::string::npos);
  const std::string act = gpu.out.substr(at);
  CHECK(act.find("measured on cuda:0") != std::string::npos);
  const std::vector<double> b64 = estimate_row(act, 1, "64"), b32 = estimate_row(act, 2, "32");
  REQUIRE(b64.size() == 1);
  REQUIRE(b32.size() == 1);
  CHECK(b64[0] > b32[0]);
  CHECK(b32[0] > 1.0);
}

TEST_CASE("--accumulate K: K micro-batches make the step of the whole batch") {
  Data d("accumulate");
  JobResult whole = run_job(d.pos("single", "k1"));
  REQUIRE_MESSAGE(whole.code == 0, whole.out);
  for (const char* k : {"2", "4"}) {
    CAPTURE(k);
    JobResult r = run_job(plus(d.pos("single", std::string("k") + k), {"--accumulate", k}));
    REQUIRE_MESSAGE(r.code == 0, r.out);
    CHECK(r.out.find(std::string("precision 32; ") + k + " micro-batch(es) of " +
                     std::to_string(8 / std::atoi(k)) + " per rank per step") != std::string::npos);
    CHECK(max_param_diff(d.dir("k1"), d.dir(std::string("k") + k)) < kAccumTol);
    // the printed loss is the whole batch's mean (each micro-batch's weighted 1/K)
    CHECK(final_loss(r.out) == doctest::Approx(final_loss(whole.out)).epsilon(1e-5));
  }
  // Steps of 4 examples each (what a split that stepped per micro-batch would do) land far away.
  JobResult small = run_job(plus(d.pos("single", "b4"), {"--batch-size", "4"}));
  REQUIRE_MESSAGE(small.code == 0, small.out);
  CHECK(max_param_diff(d.dir("k1"), d.dir("b4")) > 100 * kAccumTol);
  // Bad values are refused before anything runs.
  for (const char* k : {"3", "0", "16"}) {
    JobResult e = run_job(plus(d.pos("single", "e"), {"--accumulate", k}));
    CHECK(e.code == 1);
    CHECK_MESSAGE(
        e.out.find(std::string("bert_pos: --accumulate ") + k +
                   " must be >= 1 and divide each rank's 8 examples of a batch "
                   "(--batch-size 8 over 1 rank(s)) into equal micro-batches") != std::string::npos,
        e.out);
  }
}

TEST_CASE(
    "--accumulate over 2 ranks (ddp: no_sync; zero2) makes single's step, and K may change "
    "on resume" *
    needs_mpi("--accumulate on 2 ranks")) {
  Data d("accumulate_ranks");
  JobResult whole = run_job(d.pos("single", "k1"));
  REQUIRE_MESSAGE(whole.code == 0, whole.out);
  for (const char* strategy : {"ddp", "zero2"}) {
    CAPTURE(strategy);
    const std::string ckpt = std::string(strategy) + "_k2";
    auto r = sl::testing::run_ranks(2, sl_train_bin(),
                                    plus(d.pos(strategy, ckpt), {"--accumulate", "2"}), 120);
    REQUIRE_MESSAGE(r.exit_code == 0, r.report());
    // 2 ranks x 2 micro-batches of 2: the gradients are averaged over ranks instead of summed in
    // one batch, the same reassociation as on one rank.
    CHECK(max_param_diff(d.dir("k1"), d.dir(ckpt)) < kAccumTol);
  }
  // Half the ranks, twice the micro-batches: zero2 on 2 ranks stops after epoch 1; one process
  // resumes with --accumulate 2 and ends where the uninterrupted single run did.
  auto first = sl::testing::run_ranks(
      2, sl_train_bin(), plus(d.pos("zero2", "moved"), {"--stop-after-epochs", "1"}), 120);
  REQUIRE_MESSAGE(first.exit_code == 0, first.report());
  JobResult rest = run_job(plus(d.pos("single", "moved"), {"--resume", "1", "--accumulate", "2"}));
  REQUIRE_MESSAGE(rest.code == 0, rest.out);
  CHECK(rest.out.find("resumed from") != std::string::npos);
  CHECK(max_param_diff(d.dir("k1"), d.dir("moved")) < kAccumTol);
}

TEST_CASE("--precision bf16-mixed and f16-mixed: autocast trains and resumes bit-identical") {
  Data d("precision_mixed");
  JobResult f32 = run_job(d.cnn("f32"));
  REQUIRE_MESSAGE(f32.code == 0, f32.out);
  for (const char* p : {"bf16-mixed", "f16-mixed"}) {
    CAPTURE(p);
    const std::vector<std::string> args = plus(d.cnn(p), {"--precision", p});
    JobResult r = run_job(args);
    REQUIRE_MESSAGE(r.code == 0, r.out);
    // Autocast really ran the convolutions and linear layers in 16 bits: another end state.
    CHECK(state_digest_of(r.out) != state_digest_of(f32.out));
    // The epoch losses fall as in float32 (the tiny data's labels are one bright row).
    CHECK(std::isfinite(final_loss(r.out)));
    CHECK(final_loss(r.out) < number_after(r.out, "epoch 1/3  loss "));
    check_resume(args);
  }
  // f16 scales the loss (GradScaler's 65536 at first) and reports it with the skipped steps.
  JobResult f16 = run_job(plus(d.cnn("f16b"), {"--precision", "f16-mixed"}));
  REQUIRE_MESSAGE(f16.code == 0, f16.out);
  CHECK_MESSAGE(f16.out.find("precision f16-mixed with dynamic loss scaling") != std::string::npos,
                f16.out);
  CHECK(number_after(f16.out, "loss scale ") >= 1);
  CHECK(f16.out.find("step(s) skipped (inf/NaN)") != std::string::npos);
  // dp's replica threads run under the scope too.
  JobResult dp =
      run_job(plus(plus(d.cnn("dp"), {"--strategy", "dp"}), {"--precision", "bf16-mixed"}));
  REQUIRE_MESSAGE(dp.code == 0, dp.out);
  CHECK(std::isfinite(final_loss(dp.out)));
  // A batch larger than the data set leaves no step to take.
  JobResult big = run_job(plus(d.cnn("e"), {"--batch-size", "128"}));
  CHECK(big.code == 1);
  CHECK_MESSAGE(big.out.find("cnn: --batch-size 128 is larger than the 96 training examples") !=
                    std::string::npos,
                big.out);
  JobResult e = run_job(plus(d.cnn("e"), {"--precision", "fp8"}));
  CHECK(e.code == 1);
  CHECK_MESSAGE(e.out.find("cnn: --precision must be 32, bf16-mixed, f16-mixed or bf16-true, got "
                           "'fp8'") != std::string::npos,
                e.out);
}

TEST_CASE("--precision bf16-true: bfloat16 parameters, float32 master weights, 2+2+12 bytes") {
  Data d("precision_true");
  const std::vector<std::string> args = plus(d.pos("single", "t"), {"--precision", "bf16-true"});
  JobResult r = run_job(args);
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(final_loss(r.out) < number_after(r.out, "epoch 1/3  loss "));
  // The checkpoint holds bfloat16 parameters (and BERT's integer position buffers as they were).
  int64_t floating = 0;
  for (const auto& [name, t] : dist::consolidate_sharded_checkpoint(d.dir("t"))) {
    CAPTURE(name);
    if (!is_floating(t.dtype())) continue;
    CHECK(t.dtype() == DType::bf16);
    ++floating;
  }
  CHECK(floating > 10);
  // Per parameter: 2 bytes of bf16 weights, 2 of bf16 gradients, and AdamW's float32 state:
  // 4 (master copy) + 4 + 4 (two moments), the ZeRO paper's mixed-precision accounting (K = 12).
  // The report prints MiB to 6 significant digits.
  const double psi = number_after(r.out, "Psi="), mib = 1024.0 * 1024.0;
  REQUIRE(psi > 1000);
  CHECK(number_after(r.out, "params ") * mib == doctest::Approx(2 * psi).epsilon(1e-5));
  CHECK(number_after(r.out, "grads ") * mib == doctest::Approx(2 * psi).epsilon(1e-5));
  CHECK(number_after(r.out, "master weights ") * mib == doctest::Approx(4 * psi).epsilon(1e-5));
  CHECK(number_after(r.out, "optimizer state ") * mib == doctest::Approx(8 * psi).epsilon(1e-5));
  // --estimate-memory, before any training, printed the same bytes (its table: MiB to 3
  // decimals, so within half a unit of its last digit)
  JobResult est = run_job(plus(args, {"--estimate-memory", "1"}));
  REQUIRE_MESSAGE(est.code == 0, est.out);
  const std::vector<double> row = estimate_row(est.out, 1, "single");
  REQUIRE(row.size() == 7);
  const char* keys[] = {"params ", "grads ", "optimizer state ", "master weights "};
  for (size_t i = 0; i < 4; ++i) {
    CAPTURE(keys[i]);
    CHECK(std::abs(row[i] - number_after(r.out, keys[i])) <= 0.0005 + 1e-9);
  }
  CHECK(est.out.find("epoch 1/") == std::string::npos);  // it trained nothing
  check_resume(plus(d.pos("single", "t2"), {"--precision", "bf16-true"}));
  // Its checkpoint holds bf16 tensors: a float32 run does not resume from it.
  JobResult e = run_job(plus(d.pos("single", "t"), {"--resume", "1"}));
  CHECK(e.code == 1);
  CHECK_MESSAGE(e.out.find("was written with another configuration") != std::string::npos, e.out);
  CHECK_MESSAGE(e.out.find("--precision's parameter dtype bfloat16 there, float32 (32, bf16-mixed "
                           "or f16-mixed) in this run") != std::string::npos,
                e.out);
}

TEST_CASE("--precision bf16-mixed on the GPU as on the CPU" * needs_gpu_trainer("bf16-mixed")) {
  Data d("precision_gpu");
  JobResult cpu = run_job(plus(d.cnn("cpu"), {"--precision", "bf16-mixed"}));
  REQUIRE_MESSAGE(cpu.code == 0, cpu.out);
  JobResult gpu = run_job(plus(d.cnn("gpu"), {"--precision", "bf16-mixed", "--device", "cuda"}),
                          gpu_train_bin());
  REQUIRE_MESSAGE(gpu.code == 0, gpu.out);
  if (cuda_is_available()) {
    // Real GPU kernels sum in other orders (as the cnn job's GPU test): close, not equal.
    CHECK(final_loss(gpu.out) == doctest::Approx(final_loss(cpu.out)).epsilon(1e-2));
  } else {
    // The fake GPU runs the CPU's kernels under the CUDA autocast scope: the same casts, the
    // same bits.
    CHECK(state_digest_of(gpu.out) == state_digest_of(cpu.out));
  }
}

TEST_CASE("--optimizer lamb: trains, resumes bit-identical; its checkpoint is not AdamW's") {
  Data d("optimizer_lamb");
  auto lamb = [&](const std::string& ckpt) {
    return plus(d.pos("single", ckpt), {"--optimizer", "lamb"});
  };
  check_resume(lamb("l"));
  JobResult adamw = run_job(d.pos("single", "a"));
  REQUIRE_MESSAGE(adamw.code == 0, adamw.out);
  JobResult l = run_job(lamb("l2"));
  REQUIRE_MESSAGE(l.code == 0, l.out);
  CHECK(l.out.find("Lamb lr 0.01") != std::string::npos);
  CHECK(adamw.out.find("AdamW lr 0.01") != std::string::npos);
  CHECK(state_digest_of(l.out) != state_digest_of(adamw.out));  // another update rule
  // an AdamW run does not resume from a Lamb checkpoint (nor the reverse): the configuration
  // names the optimizer
  JobResult e = run_job(plus(d.pos("single", "l2"), {"--resume", "1"}));
  CHECK(e.code == 1);
  CHECK_MESSAGE(e.out.find("was written with another configuration") != std::string::npos, e.out);
  CHECK_MESSAGE(e.out.find("--optimizer Lamb there, AdamW in this run") != std::string::npos,
                e.out);
  JobResult e2 = run_job(plus(lamb("a"), {"--resume", "1"}));
  CHECK(e2.code == 1);
  CHECK_MESSAGE(e2.out.find("was written with another configuration") != std::string::npos, e2.out);
  JobResult bad = run_job(plus(d.pos("single", "b"), {"--optimizer", "adam"}));
  CHECK(bad.code == 1);
  CHECK_MESSAGE(bad.out.find("bert_pos: --optimizer must be adamw, lamb, sgd, rmsprop or adagrad, "
                             "got 'adam'") != std::string::npos,
                bad.out);
}

TEST_CASE("--optimizer sgd: momentum, torchvision's step schedule, resumes bit-identical") {
  Data d("optimizer_sgd");
  // the cnn job: BatchNorm and biases in the group without decay
  auto sgd = [&](const std::string& ckpt, const std::vector<std::string>& flags = {}) {
    return plus(plus(d.cnn(ckpt), {"--optimizer", "sgd", "--lr-schedule", "step:2"}), flags);
  };
  check_resume(sgd("s"));
  JobResult s = run_job(sgd("s2"));
  REQUIRE_MESSAGE(s.code == 0, s.out);
  CHECK_MESSAGE(
      s.out.find("SGD lr 0.01 momentum 0.9 wd 0.01, x0.1 after epochs 2") != std::string::npos,
      s.out);
  CHECK(final_loss(s.out) < number_after(s.out, "epoch 1/3  loss "));
  // another update rule than AdamW's, and the momentum matters
  JobResult adamw = run_job(d.cnn("a"));
  REQUIRE_MESSAGE(adamw.code == 0, adamw.out);
  CHECK(state_digest_of(s.out) != state_digest_of(adamw.out));
  JobResult plain = run_job(sgd("m0", {"--momentum", "0"}));
  REQUIRE_MESSAGE(plain.code == 0, plain.out);
  CHECK(plain.out.find("SGD lr 0.01 momentum 0 wd") != std::string::npos);
  CHECK(state_digest_of(plain.out) != state_digest_of(s.out));
  // without momentum SGD keeps no state: the checkpoint has no momentum buffer
  CHECK(optimizer_files_have(d.dir("s2"), "momentum_buffer"));
  CHECK_FALSE(optimizer_files_have(d.dir("m0"), "momentum_buffer"));
  check_resume(sgd("m5", {"--momentum", "0.5"}));
  // The optimizer and its momentum are the configuration's: neither changes on resume.
  auto fails_with = [&](const std::vector<std::string>& args, const std::string& message) {
    JobResult r = run_job(args);
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find(message) != std::string::npos, r.out);
    return r.out;
  };
  std::string out =
      fails_with(plus(d.cnn("s2"), {"--resume", "1"}), "was written with another configuration");
  CHECK_MESSAGE(out.find("--optimizer SGD there, AdamW in this run") != std::string::npos, out);
  out = fails_with(plus(sgd("s2"), {"--momentum", "0.8", "--resume", "1"}),
                   "was written with another configuration");
  CHECK_MESSAGE(out.find("--momentum 0.9 there, 0.8 in this run") != std::string::npos, out);
  fails_with(plus(sgd("a"), {"--resume", "1"}), "was written with another configuration");
  // Bad values fail before any work, naming the flag and the value.
  fails_with(sgd("e", {"--momentum", "-0.1"}), "--momentum: expected a number >= 0, got -0.1");
  fails_with(sgd("e", {"--momentum", "nan"}), "--momentum: expected a finite number, got 'nan'");
  fails_with(sgd("e", {"--momentum", "fast"}), "--momentum: expected a number, got 'fast'");
  fails_with(sgd("e", {"--momentum", "1"}), "cnn: --momentum must lie in [0, 1), got 1");
  for (const char* other : {"adamw", "lamb"}) {
    fails_with(plus(d.cnn("e"), {"--optimizer", other, "--momentum", "0.9"}),
               std::string("cnn: --momentum 0.9 applies to --optimizer sgd and rmsprop only, got "
                           "--optimizer ") +
                   other + " (whose moments have their own fixed betas)");
  }
  CHECK_FALSE(std::filesystem::exists(d.dir("e")));
}

TEST_CASE("--estimate-memory with --optimizer sgd: one float32 momentum buffer, K = 4") {
  Data d("estimate_sgd");
  // The job's own cnn: Psi = 421738 parameters. The expected MiB below are multiples of Psi /
  // 2^20 worked out by hand (python), not read from the code: 4 Psi = 1.608803, 2 Psi = 0.804401,
  // 6 Psi = 2.413204, 7 Psi = 2.815405, 8 Psi = 3.217606, 10 Psi = 4.022007, 12 Psi = 4.826408.
  // Zero's rows pad each bucket to a multiple of 2 elements: within the table's 3 decimals.
  const std::vector<std::string> cnn = {"--model",        "cnn",         "--data-dir",
                                        d.root + "/data", "--optimizer", "sgd"};
  auto table = [&](const std::vector<std::string>& flags) {
    JobResult r = run_job(plus(plus(cnn, flags), {"--estimate-memory", "2"}));
    REQUIRE_MESSAGE(r.code == 0, r.out);
    CHECK(r.out.find("Psi = 421738 parameters") != std::string::npos);
    return r.out;
  };
  // {params, grads, optimizer, masters, device, host, ZeRO paper} of each row
  auto check_row = [](const std::string& out, int n, const char* kind,
                      const std::vector<double>& want) {
    CAPTURE(kind);
    CAPTURE(n);
    const std::vector<double> row = estimate_row(out, n, kind);
    REQUIRE(row.size() == 7);
    for (size_t i = 0; i < 7; ++i) {
      CAPTURE(i);
      CHECK(std::abs(row[i] - want[i]) <= 0.0015);
    }
  };
  const double p4 = 1.608803, p2 = 0.804401;
  std::string out = table({});  // momentum 0.9: K = 4
  CHECK_MESSAGE(out.find("K = 4 (SGD)") != std::string::npos, out);
  check_row(out, 1, "single", {p4, p4, p4, 0, 4.826408, 0, 4.826408});
  check_row(out, 2, "ddp", {p4, p4, p4, 0, 4.826408, 0, 4.826408});
  check_row(out, 2, "zero1", {p4, p4, p2, 0, 4.022007, 0, 4.022007});
  check_row(out, 2, "zero2", {p4, p2, p2, 0, 3.217606, 0, 3.217606});
  out = table({"--momentum", "0"});  // no buffer at all: K = 0
  CHECK_MESSAGE(out.find("K = 0 (SGD)") != std::string::npos, out);
  check_row(out, 1, "single", {p4, p4, 0, 0, 3.217606, 0, 3.217606});
  check_row(out, 2, "zero1", {p4, p4, 0, 0, 3.217606, 0, 3.217606});
  check_row(out, 2, "zero2", {p4, p2, 0, 0, 2.413204, 0, 2.413204});
  // bfloat16 parameters: a float32 master and a float32 buffer, K = 8 (2 + 2 + 8 Psi; zero2 on 2
  // ranks 2 + 1 + 4 Psi)
  out = table({"--precision", "bf16-true"});
  CHECK_MESSAGE(out.find("K = 8 (SGD, masters)") != std::string::npos, out);
  check_row(out, 1, "single", {p2, p2, p4, p4, 4.826408, 0, 4.826408});
  check_row(out, 2, "zero2", {p2, p2 / 2, p2, p2, 2.815405, 0, 2.815405});
  // zero's offloaded optimizer state is the buffer's half: in the host column, not the device's
  out = table({"--offload-optimizer", "1"});
  check_row(out, 2, "zero1", {p4, p4, 0, 0, 3.217606, p2 + 2 * p2, 4.022007});
}

TEST_CASE("--optimizer sgd on 2 ranks: dp, ddp, zero1 and zero2 end alike; zero1 resumes" *
          needs_mpi("sgd on 2 ranks")) {
  // Two ranks add each gradient element once (a + b, the same float in any collective) and SGD's
  // update is elementwise, so sharding the momentum buffer changes no bit.
  Data d("sgd_ranks");
  auto args = [&](const std::string& strategy, const std::string& ckpt) {
    return plus(plus(d.cnn(ckpt), {"--strategy", strategy}),
                {"--optimizer", "sgd", "--momentum", "0.8", "--weight-decay", "1e-4"});
  };
  auto run = [&](const std::string& strategy, const std::string& ckpt,
                 const std::vector<std::string>& flags) {
    auto r = sl::testing::run_ranks(2, sl_train_bin(), plus(args(strategy, ckpt), flags), 120);
    REQUIRE_MESSAGE(r.exit_code == 0, r.report());
    return r.rank_stdout[0];
  };
  const std::string ddp = run("ddp", "ddp", {});
  CHECK_MESSAGE(ddp.find("SGD lr 0.01 momentum 0.8 wd 0.0001") != std::string::npos, ddp);
  for (const char* kind : {"zero1", "zero2"}) {
    CAPTURE(kind);
    const std::string z = run(kind, kind, {});
    CHECK_MESSAGE(state_digest_of(z) == state_digest_of(ddp), ddp, z);
  }
  // dp: two replica threads in one process, the same sum of two and the same update
  JobResult dp = run_job(args("dp", "dp"));
  REQUIRE_MESSAGE(dp.code == 0, dp.out);
  CHECK_MESSAGE(state_digest_of(dp.out) == state_digest_of(ddp), ddp, dp.out);
  // the sharded momentum buffer goes through the checkpoint
  run("zero1", "part", {"--stop-after-epochs", "1"});
  const std::string rest = run("zero1", "part", {"--resume", "1"});
  CHECK(rest.find("resumed from") != std::string::npos);
  CHECK_MESSAGE(state_digest_of(rest) == state_digest_of(ddp), ddp, rest);
}

TEST_CASE("--optimizer rmsprop and adagrad: train, resume bit-identical, L2 decay groups") {
  Data d("optimizer_rmsprop_adagrad");
  // the cnn job: BatchNorm and biases in the group without decay
  auto with = [&](const std::string& optimizer, const std::string& ckpt,
                  const std::vector<std::string>& flags = {}) {
    return plus(plus(d.cnn(ckpt), {"--optimizer", optimizer, "--lr", "0.001"}), flags);
  };
  auto fails_with = [&](const std::vector<std::string>& args, const std::string& message) {
    JobResult r = run_job(args);
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find(message) != std::string::npos, r.out);
    return r.out;
  };
  JobResult adamw = run_job(plus(d.cnn("a"), {"--lr", "0.001"}));
  REQUIRE_MESSAGE(adamw.code == 0, adamw.out);
  // torch.optim.RMSprop's default momentum is 0: no buffer, square_avg only
  check_resume(with("rmsprop", "r"));
  JobResult r = run_job(with("rmsprop", "r2"));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find("RMSprop lr 0.001 momentum 0 wd 0.01, cosine") != std::string::npos,
                r.out);
  CHECK(final_loss(r.out) < number_after(r.out, "epoch 1/3  loss "));
  CHECK(state_digest_of(r.out) != state_digest_of(adamw.out));  // another update rule
  CHECK(optimizer_files_have(d.dir("r2"), "square_avg"));
  CHECK_FALSE(optimizer_files_have(d.dir("r2"), "momentum_buffer"));
  // with momentum: its buffer goes through the checkpoint too
  check_resume(with("rmsprop", "rm", {"--momentum", "0.5"}));
  JobResult rm = run_job(with("rmsprop", "rm2", {"--momentum", "0.5"}));
  REQUIRE_MESSAGE(rm.code == 0, rm.out);
  CHECK(rm.out.find("RMSprop lr 0.001 momentum 0.5 wd 0.01") != std::string::npos);
  CHECK(state_digest_of(rm.out) != state_digest_of(r.out));
  CHECK(optimizer_files_have(d.dir("rm2"), "momentum_buffer"));
  check_resume(with("adagrad", "g"));
  JobResult g = run_job(with("adagrad", "g2"));
  REQUIRE_MESSAGE(g.code == 0, g.out);
  CHECK_MESSAGE(g.out.find("Adagrad lr 0.001 wd 0.01, cosine") != std::string::npos, g.out);
  CHECK(final_loss(g.out) < number_after(g.out, "epoch 1/3  loss "));
  CHECK(state_digest_of(g.out) != state_digest_of(adamw.out));
  CHECK(state_digest_of(g.out) != state_digest_of(r.out));
  CHECK(optimizer_files_have(d.dir("g2"), "sum"));
  // the groups: --weight-decay on the weights, none on biases and BatchNorm; torch's defaults
  // for the rest (RMSprop alpha 0.99, eps 1e-8, not centered; Adagrad eps 1e-10, no lr_decay)
  for (const auto& [dir, keys] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"rm2", {"alpha", "eps", "centered"}}, {"g2", {"eps", "lr_decay"}}}) {
    CAPTURE(dir);
    const serialize::Json groups = dist::read_sharded_optimizer_meta(d.dir(dir)).at("param_groups");
    REQUIRE(groups.size() == 2);
    CHECK(groups[0].at("weight_decay").as_double() == 0.01);
    CHECK(groups[1].at("weight_decay").as_double() == 0.0);
    for (size_t i = 0; i < 2; ++i) {
      CHECK(groups[i].at("lr").is_number());
      if (dir == "rm2") {
        CHECK(groups[i].at("momentum").as_double() == 0.5);
        CHECK(groups[i].at("alpha").as_double() == 0.99);
        CHECK(groups[i].at("eps").as_double() == 1e-8);
        CHECK(groups[i].at("centered").as_bool() == false);
      } else {
        CHECK(groups[i].at("eps").as_double() == 1e-10);
        CHECK(groups[i].at("lr_decay").as_double() == 0.0);
      }
    }
  }
  // The optimizer and its momentum are the configuration's: neither changes on resume.
  std::string out = fails_with(plus(d.cnn("r2"), {"--lr", "0.001", "--resume", "1"}),
                               "was written with another configuration");
  CHECK_MESSAGE(out.find("--optimizer RMSprop there, AdamW in this run") != std::string::npos, out);
  out = fails_with(plus(with("adagrad", "r2"), {"--resume", "1"}),
                   "was written with another configuration");
  CHECK_MESSAGE(out.find("--optimizer RMSprop there, Adagrad in this run") != std::string::npos,
                out);
  out = fails_with(plus(with("rmsprop", "r2"), {"--momentum", "0.5", "--resume", "1"}),
                   "was written with another configuration");
  CHECK_MESSAGE(out.find("--momentum 0 there, 0.5 in this run") != std::string::npos, out);
  out = fails_with(plus(with("sgd", "g2"), {"--resume", "1"}),
                   "was written with another configuration");
  CHECK_MESSAGE(out.find("--optimizer Adagrad there, SGD in this run") != std::string::npos, out);
  // Adagrad has no momentum; bad values fail before any work
  fails_with(with("adagrad", "e", {"--momentum", "0.9"}),
             "cnn: --momentum 0.9 applies to --optimizer sgd and rmsprop only, got --optimizer "
             "adagrad (which has no momentum)");
  fails_with(with("rmsprop", "e", {"--momentum", "1"}),
             "cnn: --momentum must lie in [0, 1), got 1");
  CHECK_FALSE(std::filesystem::exists(d.dir("e")));
}

TEST_CASE("--estimate-memory with --optimizer rmsprop and adagrad: K from their state buffers") {
  Data d("estimate_rmsprop_adagrad");
  // The job's own cnn: Psi = 421738. The MiB below are multiples of Psi / 2^20 worked out by hand
  // (python), as in the sgd case: 2 Psi = 0.804401, 4 Psi = 1.608803, 8 Psi = 3.217606, 10 Psi =
  // 4.022007, 12 Psi = 4.826408, 16 Psi = 6.435211. RMSprop keeps square_avg (4 Psi) and with
  // momentum > 0 a momentum buffer (4 Psi more); Adagrad keeps its sum (4 Psi).
  auto table = [&](const std::vector<std::string>& flags) {
    JobResult r = run_job(plus(plus({"--model", "cnn", "--data-dir", d.root + "/data"}, flags),
                               {"--estimate-memory", "2"}));
    REQUIRE_MESSAGE(r.code == 0, r.out);
    CHECK(r.out.find("Psi = 421738 parameters") != std::string::npos);
    return r.out;
  };
  auto check_row = [](const std::string& out, int n, const char* kind,
                      const std::vector<double>& want) {
    CAPTURE(kind);
    CAPTURE(n);
    const std::vector<double> row = estimate_row(out, n, kind);
    REQUIRE(row.size() == 7);
    for (size_t i = 0; i < 7; ++i) {
      CAPTURE(i);
      CHECK(std::abs(row[i] - want[i]) <= 0.0015);  // the table's 3 decimals, zero's padding
    }
  };
  const double p2 = 0.804401, p4 = 1.608803, p8 = 3.217606;
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--optimizer", "rmsprop"}, {"--optimizer", "adagrad"}}) {
    CAPTURE(flags[1]);
    const std::string out = table(flags);
    CHECK_MESSAGE(out.find(flags[1] == "rmsprop" ? "K = 4 (RMSprop)" : "K = 4 (Adagrad)") !=
                      std::string::npos,
                  out);
    check_row(out, 1, "single", {p4, p4, p4, 0, 4.826408, 0, 4.826408});
    check_row(out, 2, "ddp", {p4, p4, p4, 0, 4.826408, 0, 4.826408});
    check_row(out, 2, "zero1", {p4, p4, p2, 0, 4.022007, 0, 4.022007});
    check_row(out, 2, "zero2", {p4, p2, p2, 0, p8, 0, p8});
  }
  std::string out = table({"--optimizer", "rmsprop", "--momentum", "0.5"});  // K = 8
  CHECK_MESSAGE(out.find("K = 8 (RMSprop)") != std::string::npos, out);
  check_row(out, 1, "single", {p4, p4, p8, 0, 6.435211, 0, 6.435211});
  check_row(out, 2, "zero1", {p4, p4, p4, 0, 4.826408, 0, 4.826408});
  check_row(out, 2, "zero2", {p4, p2, p4, 0, 4.022007, 0, 4.022007});
  // bfloat16 parameters: a float32 master and a float32 sum, K = 8 (2 + 2 + 8 Psi)
  out = table({"--optimizer", "adagrad", "--precision", "bf16-true"});
  CHECK_MESSAGE(out.find("K = 8 (Adagrad, masters)") != std::string::npos, out);
  check_row(out, 1, "single", {p2, p2, p4, p4, 4.826408, 0, 4.826408});
}

TEST_CASE("--optimizer rmsprop and adagrad on 2 ranks: dp, ddp, zero1, zero2 end alike" *
          needs_mpi("rmsprop and adagrad on 2 ranks")) {
  // As SGD's: two ranks add each gradient element once (a + b in any collective), and both
  // updates are elementwise, so sharding their state changes no bit.
  Data d("rmsprop_adagrad_ranks");
  for (const std::vector<std::string>& opt :
       {std::vector<std::string>{"--optimizer", "rmsprop", "--momentum", "0.5"},
        {"--optimizer", "adagrad"}}) {
    CAPTURE(opt[1]);
    auto args = [&](const std::string& strategy, const std::string& ckpt) {
      return plus(plus(plus(d.cnn(opt[1] + ckpt), {"--strategy", strategy}), opt),
                  {"--lr", "0.001", "--weight-decay", "1e-4"});
    };
    auto run = [&](const std::string& strategy, const std::string& ckpt,
                   const std::vector<std::string>& flags) {
      auto r = sl::testing::run_ranks(2, sl_train_bin(), plus(args(strategy, ckpt), flags), 120);
      REQUIRE_MESSAGE(r.exit_code == 0, r.report());
      return r.rank_stdout[0];
    };
    const std::string ddp = run("ddp", "ddp", {});
    CHECK_MESSAGE(ddp.find(opt[1] == "rmsprop" ? "RMSprop lr 0.001 momentum 0.5 wd 0.0001"
                                               : "Adagrad lr 0.001 wd 0.0001") != std::string::npos,
                  ddp);
    for (const char* kind : {"zero1", "zero2"}) {
      CAPTURE(kind);
      const std::string z = run(kind, kind, {});
      CHECK_MESSAGE(state_digest_of(z) == state_digest_of(ddp), ddp, z);
    }
    JobResult dp = run_job(args("dp", "dp"));
    REQUIRE_MESSAGE(dp.code == 0, dp.out);
    CHECK_MESSAGE(state_digest_of(dp.out) == state_digest_of(ddp), ddp, dp.out);
    // the sharded state goes through the checkpoint
    run("zero2", "part", {"--stop-after-epochs", "1"});
    const std::string rest = run("zero2", "part", {"--resume", "1"});
    CHECK(rest.find("resumed from") != std::string::npos);
    CHECK_MESSAGE(state_digest_of(rest) == state_digest_of(ddp), ddp, rest);
  }
}

TEST_CASE("--checkpoint-every: a run stopped inside an epoch resumes there, bit for bit") {
  Data d("checkpoint_every");
  // 3 epochs of 3 steps; checkpoints after steps 2, 4 and 8 (inside epochs) and at each end.
  const std::vector<std::string> every = {"--checkpoint-every", "2"};
  JobResult full = run_job(plus(d.cnn("full"), every));
  REQUIRE_MESSAGE(full.code == 0, full.out);
  CHECK(full.out.find("  step 1/3  checkpoint: " + d.dir("full")) != std::string::npos);
  // Stopped after step 4 (a checkpoint) or 5 (resumed from step 4's, so step 5 runs again).
  for (const char* stop : {"4", "5"}) {
    CAPTURE(stop);
    const std::string ckpt = std::string("part") + stop;
    JobResult first = run_job(plus(plus(d.cnn(ckpt), every), {"--stop-after-steps", stop}));
    REQUIRE_MESSAGE(first.code == 0, first.out);
    CHECK(first.out.find(std::string("stopped after step ") + stop) != std::string::npos);
    CHECK(first.out.find("epoch 2/3") == std::string::npos);
    JobResult rest = run_job(plus(plus(d.cnn(ckpt), every), {"--resume", "1"}));
    REQUIRE_MESSAGE(rest.code == 0, rest.out);
    CHECK_MESSAGE(rest.out.find("resumed from " + d.dir(ckpt) +
                                ": 1 epoch(s) and 1 step(s) of the next") != std::string::npos,
                  rest.out);
    CHECK(state_digest_of(rest.out) == state_digest_of(full.out));
  }
  // Writing the checkpoints changes nothing in the run itself.
  JobResult plain = run_job(d.cnn("plain"));
  CHECK(state_digest_of(plain.out) == state_digest_of(full.out));
  JobResult e = run_job(plus(d.cnn("e"), {"--checkpoint-every", "-1"}));
  CHECK_MESSAGE(e.out.find("cnn: --checkpoint-every must be >= 0") != std::string::npos, e.out);
}

TEST_CASE("a flag no job reads fails before any work, with the closest known flag") {
  Data d("unknown_flags");
  JobResult r = run_job(plus(d.cnn("e"), {"--precison", "bf16-mixed"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("cnn: unknown flag --precison (did you mean --precision?); this job "
                           "reads --accumulate, --batch-size, --bucket-mb, --channels1,") !=
                    std::string::npos,
                r.out);
  CHECK(r.out.find("fashion-mnist:") == std::string::npos);  // failed before loading the data
  // A flag of another job is foreign here: --init belongs to bert_pos, not bert.
  r = run_job(plus(d.pos("single", "e"), {"--model", "bert", "--init", d.dir("x")}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("bert: unknown flag --init; this job reads") != std::string::npos,
                r.out);
  r = run_job({"--model", "mlp", "--data-dir", d.root + "/data", "--hiden", "4"});
  CHECK(r.code == 1);
  CHECK_MESSAGE(
      r.out.find("mlp: unknown flag --hiden (did you mean --hidden?)") != std::string::npos, r.out);
}

TEST_CASE("flag values out of range fail with the flag's name; none falls back to a default") {
  // Before: --lr 0 / -1 / nan and --batch-size 0 / -1 silently ran with the job's defaults, and
  // --epochs 99999999999999999999 was read as -1.
  Data d("bad_values");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--lr", "0"}, "--lr: expected a number > 0, got 0"},
      {{"--lr", "-1"}, "--lr: expected a number > 0, got -1"},
      {{"--lr", "nan"}, "--lr: expected a finite number, got 'nan'"},
      {{"--lr", "1e999"}, "--lr: expected a finite number, got '1e999'"},
      {{"--batch-size", "0"}, "--batch-size: expected an integer >= 1, got 0"},
      {{"--batch-size", "-1"}, "--batch-size: expected an integer >= 1, got -1"},
      {{"--epochs", "99999999999999999999"},
       "--epochs: 99999999999999999999 is out of range (a 64-bit integer)"},
      {{"--epochs", "3000000000"}, "--epochs: expected an integer in [1, 2147483647], got "},
      {{"--threads", "-2"}, "--threads: expected an integer in [0, 4096], got -2"},
      {{"--log-every", "-1"}, "--log-every: expected an integer >= 0, got -1"},
      {{"--resume", "2"}, "--resume: expected an integer in [0, 1], got 2"},
      {{"--weight-decay", "-0.5"}, "--weight-decay: expected a number >= 0, got -0.5"},
      {{"--dp-replicas", "0"}, "--dp-replicas: expected an integer in [1, 1024], got 0"},
  };
  for (const auto& [flags, want] : cases) {
    CAPTURE(flags[0]);
    CAPTURE(flags[1]);
    JobResult r = run_job(plus(d.cnn("e"), flags));
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find(want) != std::string::npos, r.out);
    CHECK(r.out.find("fashion-mnist:") == std::string::npos);  // failed before loading the data
  }
  // dp on the CPU with more replicas than device indices: a clear error, not the allocator's
  JobResult r = run_job(plus(d.cnn("e"), {"--strategy", "dp", "--dp-replicas", "100"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("dp: dp_replicas 100 from cpu would need cpu:99") != std::string::npos,
                r.out);
}

TEST_CASE("a flag given but ignored under the other flags is refused, naming both") {
  // Before: each was accepted and did nothing (--lr-gamma under cosine, --bucket-mb with single).
  Data d("ignored_flags");
  const std::string gamma_tail = " (it is the factor of --lr-schedule exp and step:E1,E2,... only)";
  std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--lr-gamma", "0.5"},
       "cnn: --lr-gamma 0.5 has no effect under --lr-schedule auto" + gamma_tail},
      {{"--lr-schedule", "cosine", "--lr-gamma", "0.5"},
       "cnn: --lr-gamma 0.5 has no effect under --lr-schedule cosine" + gamma_tail},
      {{"--lr-schedule", "linear", "--lr-gamma", "0.1"},  // even at its default value: given
       "cnn: --lr-gamma 0.1 has no effect under --lr-schedule linear" + gamma_tail},
      {{"--lr-schedule", "constant", "--lr-gamma", "2"},
       "cnn: --lr-gamma 2 has no effect under --lr-schedule constant" + gamma_tail},
      {{"--dp-replicas", "3"},
       "cnn: --dp-replicas 3 has no effect under --strategy single (it is the number of "
       "--strategy dp's model replicas)"},
      {{"--strategy", "ddp", "--dp-replicas", "2"},
       "cnn: --dp-replicas 2 has no effect under --strategy ddp"},
      {{"--bucket-mb", "10"},
       "cnn: --bucket-mb 10 has no effect under --strategy single (it sizes the gradient buckets "
       "that --strategy ddp, zero1 and zero2 communicate, and --estimate-memory's rows)"},
      {{"--strategy", "dp", "--first-bucket-mb", "2"},
       "cnn: --first-bucket-mb 2 has no effect under --strategy dp"},
      {{"--reduce-dtype", "bf16"},
       "cnn: --reduce-dtype applies to gradients sent between processes (--strategy ddp, zero1 "
       "or zero2), not single"},
      {{"--sync-batchnorm", "1"},
       "cnn: --sync-batchnorm 1 needs one process per rank (--strategy ddp, zero1 or zero2), not "
       "single"},
  };
  // --estimate-memory exits before training: the flags of the run's course do nothing there
  const std::string estimate_tail =
      " has no effect with --estimate-memory 2 (it prints the estimate and exits before training)";
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"resume", "1"},
           {"resume", "0"},  // given: even at its default
           {"checkpoint-every", "2"},
           {"stop-after-epochs", "1"},
           {"stop-after-steps", "2"},
           {"log-every", "1"},
           {"profile", d.dir("t.json")},
           {"profile-from", "0"},
           {"profile-steps", "2"}}) {
    cases.push_back({{"--" + flag, value, "--estimate-memory", "2"},
                     "cnn: --" + flag + " " + value + estimate_tail});
  }
  for (const auto& [flags, want] : cases) {
    CAPTURE(want);
    JobResult r = run_job(plus(d.cnn("e"), flags));
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find(want) != std::string::npos, r.out);
    CHECK(r.out.find("fashion-mnist:") == std::string::npos);  // failed before loading the data
  }
  // where they act, they are taken: gamma by exp, buckets by --estimate-memory's rows and ddp
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--lr-schedule", "exp", "--lr-gamma", "0.5", "--epochs", "1"},
        {"--bucket-mb", "10", "--first-bucket-mb", "2", "--estimate-memory", "2"},
        {"--strategy", "ddp", "--bucket-mb", "10", "--epochs", "1"}}) {
    CAPTURE(flags[1]);
    JobResult r = run_job(plus(d.cnn("ok"), flags));
    CHECK_MESSAGE(r.code == 0, r.out);
  }
}

TEST_CASE("--cudnn-benchmark 1 on a model without convolutions is refused, naming it" *
          needs_gpu_trainer("cudnn benchmark without convolutions")) {
  // Before: accepted, and the run was the run without it (cuDNN's benchmark picks convolution
  // algorithms; BERT has none). The cnn job, which has, trains with it (test_cnn_job.cpp).
  Data d("cudnn_no_conv");
  JobResult r = run_job(plus(d.pos("single", "e"), {"--device", "cuda", "--cudnn-benchmark", "1"}),
                        gpu_train_bin());
  CHECK(r.code == 1);
  const size_t at = r.out.find("bert_pos: --cudnn-benchmark 1 has no effect on the model Bert");
  CHECK_MESSAGE(at != std::string::npos, r.out);
  CHECK_MESSAGE(r.out.find(": it has no convolution (the benchmark picks cuDNN's convolution "
                           "algorithms only)",
                           at) != std::string::npos,
                r.out);
  CHECK(r.out.find("epoch 1/3") == std::string::npos);
  CHECK_FALSE(std::filesystem::exists(d.dir("e")));
  // at its default, or 0 given, it is no flag at all
  r = run_job(plus(d.pos("single", "z"),
                   {"--device", "cuda", "--cudnn-benchmark", "0", "--stop-after-epochs", "1"}),
              gpu_train_bin());
  CHECK_MESSAGE(r.code == 0, r.out);
}

TEST_CASE("--sync-batchnorm 1 on a model without BatchNorm is refused on every rank" *
          needs_mpi("sync batchnorm without BatchNorm")) {
  // Before: accepted, printing "sync batchnorm: 0 BatchNorm layer(s) use the statistics of all 2
  // rank(s)", and the run was the run without it (bert_pos has LayerNorms only).
  Data d("sync_bn_none");
  auto r = sl::testing::run_ranks(2, sl_train_bin(),
                                  plus(d.pos("ddp", "e"), {"--sync-batchnorm", "1"}), 120);
  CHECK(r.exit_code != 0);
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    CHECK_MESSAGE(
        r.rank_stderr[rank].find("bert_pos: --sync-batchnorm 1 has no effect on the model Bert") !=
            std::string::npos,
        r.report());
    CHECK_MESSAGE(
        r.rank_stderr[rank].find(": it has no BatchNorm layer to synchronise") != std::string::npos,
        r.report());
  }
  CHECK(r.all_output().find("epoch 1/3") == std::string::npos);
}

TEST_CASE("parse_int_flag / parse_number_flag / get_bool: ranges, overflow, non-finite") {
  using sl::train::parse_int_flag;
  using sl::train::parse_number_flag;
  CHECK(parse_int_flag("--n", "-7") == -7);
  CHECK(parse_int_flag("--n", "9223372036854775807") == INT64_MAX);
  SL_CHECK_THROWS(parse_int_flag("--n", "9223372036854775808"), ValueError,
                  "--n: 9223372036854775808 is out of range (a 64-bit integer)");
  SL_CHECK_THROWS(parse_int_flag("--n", "4x"), ValueError, "--n: expected an integer, got '4x'");
  SL_CHECK_THROWS(parse_int_flag("--n", "5", 0, 4), ValueError,
                  "--n: expected an integer in [0, 4], got 5");
  CHECK(parse_int_flag("--n", "4", 0, 4) == 4);
  // only an optional '-' and digits, as parse_positive_ints takes its items (strtoll alone took
  // a leading blank and a '+')
  for (const std::string bad : {" 1", "+2", "1 ", "", "-", "- 1", "\t3"}) {
    CAPTURE(bad);
    const std::string want = "--n: expected an integer, got '" + bad + "'";
    SL_CHECK_THROWS(parse_int_flag("--n", bad), ValueError, want.c_str());
  }
  CHECK(parse_number_flag("--x", "2.5e-3") == 2.5e-3);
  CHECK(parse_number_flag("--x", "-1e+2") == -100.0);
  for (const std::string bad : {" 1.5", "+1.5", "1.5 ", ""}) {
    CAPTURE(bad);
    const std::string want = "--x: expected a number, got '" + bad + "'";
    SL_CHECK_THROWS(parse_number_flag("--x", bad), ValueError, want.c_str());
  }
  SL_CHECK_THROWS(parse_number_flag("--x", "inf"), ValueError,
                  "--x: expected a finite number, got 'inf'");
  SL_CHECK_THROWS(parse_number_flag("--x", "1.5", 0.0, 1.0), ValueError,
                  "--x: expected a number in [0, 1], got 1.5");
  sl::train::Options o;
  o.extra = {{"on", "1"}, {"off", "0"}, {"bad", "2"}};
  CHECK(o.get_bool("on", false));
  CHECK_FALSE(o.get_bool("off", true));
  CHECK(o.get_bool("absent", true));
  SL_CHECK_THROWS(o.get_bool("bad", false), ValueError,
                  "--bad: expected an integer in [0, 1], got 2");
}

TEST_CASE("parse_positive_ints: --lr-schedule step:'s epochs and the resnet job's --blocks") {
  using sl::train::parse_positive_ints;
  using V = std::vector<int64_t>;
  CHECK(parse_positive_ints("30,60,80", true) == V{30, 60, 80});
  CHECK(parse_positive_ints("7", true) == V{7});
  CHECK(parse_positive_ints("2,2,1", false) == V{2, 2, 1});  // repeats only when not increasing
  CHECK_FALSE(parse_positive_ints("2,2", true).has_value());
  CHECK_FALSE(parse_positive_ints("3,1", true).has_value());
  CHECK(parse_positive_ints("9223372036854775807", false) == V{INT64_MAX});
  for (const char* bad : {"", ",", "1,", ",1", "1,,2", "0", "-1", "1x", "x", "1.5",
                          "9223372036854775808", " 1", "+2", "1, 2", "1 ,2", "1,+2", "-0"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_positive_ints(bad, false).has_value());
    CHECK_FALSE(parse_positive_ints(bad, true).has_value());
  }
}

TEST_CASE("sl_train --model NAME --help lists the job's flags with the code's defaults") {
  // Every job's table is also checked against its code by every run of the job in these tests
  // (Options::check_all_read): a flag read but not listed, or another default, fails the run.
  for (const char* job : {"mlp", "cnn", "resnet", "bert", "bert_pos", "bert_cls", "deepspeech2"}) {
    CAPTURE(job);
    JobResult r = run_job({"--model", job, "--help"});
    CHECK(r.code == 0);
    CHECK(r.out.find(std::string("sl_train --model ") + job + ": ") == 0);
    CHECK(r.out.find("  --epochs 2 ") != std::string::npos);
    CHECK(r.out.find("Flags of " + std::string(job)) != std::string::npos);
  }
  JobResult r = run_job({"--help", "--model", "cnn"});  // --help first works too
  CHECK(r.out.find("  --channels1 32 ") != std::string::npos);
  CHECK(r.out.find("  --precision 32 ") != std::string::npos);
  CHECK(r.out.find("  --text-file") == std::string::npos);  // bert's, not cnn's
  r = run_job({"--model", "bert", "--help"});
  CHECK(r.out.find("  --mask-prob 0.15 ") != std::string::npos);
  r = run_job({"--help"});  // no job: the general usage
  CHECK(r.code == 0);
  CHECK(r.out.find("sl_train --model NAME --help") != std::string::npos);
}

TEST_CASE("check_all_read holds a job to its flag table") {
  using sl::train::FlagDocs;
  using sl::train::Options;
  const FlagDocs docs = {{"steps", "10", "x"}, {"rate", "0.01", "y"}, {"dir", "(derived)", "z"}};
  Options o;
  o.documented = &docs;
  o.get_int("steps", 10);
  o.get_double("rate", 0.01);
  o.get_string("dir", "anything");  // a default in parentheses is computed: not compared
  CHECK_NOTHROW(o.check_all_read("job"));
  o.get_int("depth", 3);
  CHECK_THROWS_WITH_AS(o.check_all_read("job"),
                       "job job reads --depth but its flag table (--help) does not list it",
                       std::logic_error);
  Options p;
  p.documented = &docs;
  p.get_double("rate", 0.02);
  CHECK_THROWS_WITH_AS(p.check_all_read("job"),
                       "job job: --rate's default is '0.02' in the code but '0.01' in "
                       "its flag table (--help)",
                       std::logic_error);
  Options q;  // an unknown flag is still the user's error, reported first
  q.documented = &docs;
  q.extra["stpes"] = "3";
  q.get_int("steps", 10);
  CHECK_THROWS_AS(q.check_all_read("job"), ValueError);
}
