// The shared training loop's --estimate-memory, --accumulate, --precision and --checkpoint-every
// (tools/train/supervised.h), end to end through sl_train on tiny synthetic data: K
// micro-batches make the whole batch's step (compared parameter by parameter through the
// checkpoints, single and over 2 ranks, and across a resume that changes K); autocast (bf16 and
// f16 with loss scaling) and bfloat16 parameters with float32 master weights train, resume
// bit-identical, and report the ZeRO paper's per-parameter bytes; a run stopped inside an epoch
// resumes there. The optimizers are in test_train_optimizers.cpp, the refused flags in
// test_train_refusals.cpp.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "../dist/mpi_launch.h"
#include "dist/checkpoint.h"
#include "job_testing.h"
#include "support/testing.h"
#include "train_options_testing.h"

using sl::testing::check_resume;
using sl::testing::estimate_row;
using sl::testing::final_loss;
using sl::testing::gpu_train_bin;
using sl::testing::JobResult;
using sl::testing::needs_gpu_trainer;
using sl::testing::needs_mpi;
using sl::testing::number_after;
using sl::testing::plus;
using sl::testing::run_job;
using sl::testing::sl_train_bin;
using sl::testing::state_digest_of;

using namespace sl;

namespace {

using Data = sl::testing::TrainData;

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
