// The main job end to end (sl_train --model cnn, tools/train/cnn.cpp) on a tiny synthetic
// Fashion-MNIST written as IDX files: a run stopped after its first epoch and resumed from the
// epoch checkpoint ends bit-identical to the uninterrupted run (compared by the job's "state
// digest", a hash of every parameter and buffer), under single and, when MPI is available, under
// zero2 on 2 ranks; a 2-rank zero2 checkpoint resumes as single; --sync-batchnorm 1 on 2 ranks
// trains as one rank on the whole batch; --reduce-dtype bf16 gives ddp's and zero2's state alike;
// --lr-schedule's schedules set the lr they promise and resume bit-identical;
// on a GPU (--device cuda: a real
// one, or in builds without CUDA the fake GPU of Note [Fake GPU] through sl_train_fake) it trains
// as on the CPU, resumes, and its checkpoint continues on the CPU; bad flags fail clearly.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "../dist/mpi_launch.h"
#include "core/device.h"
#include "dist/checkpoint.h"
#include "job_testing.h"
#include "support/testing.h"

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

struct Env {
  std::string root, data;
  Env() {
    root =
        (std::filesystem::temp_directory_path() / ("sl_test_cnn_job_" + std::to_string(::getpid())))
            .string();
    std::filesystem::remove_all(root);
    data = root + "/data";
    std::filesystem::create_directories(data);
    sl::testing::write_fashion_split(data, "train", 96, 1);
    sl::testing::write_fashion_split(data, "t10k", 40, 2);
  }
  ~Env() { std::filesystem::remove_all(root); }
  /// Flags of the tiny configuration; 3 epochs of 96 / 32 = 3 steps.
  std::vector<std::string> args(const std::string& strategy, const std::string& ckpt) const {
    return plus(plus({"--model", "cnn", "--strategy", strategy, "--data-dir", data},
                     sl::testing::tiny_cnn_flags()),
                {"--checkpoint-dir", root + "/" + ckpt});
  }
};

/// A GPU run's output `gpu` against the run it should equal, `ref` (the CPU's, or the GPU's
/// with another placement): on the fake GPU, whose kernels are the CPU's, the same state digest;
/// on a real GPU, which sums in other orders than the CPU, the epoch loss within 1e-3 (relative
/// above 1). `context` goes into the failure message (both runs' reports).
void check_trains_alike(const std::string& ref, const std::string& gpu,
                        const std::string& context) {
  if (!cuda_is_available()) {
    CHECK_MESSAGE(state_digest_of(gpu) == state_digest_of(ref), context);
  } else {
    const double l = final_loss(ref);
    CHECK_MESSAGE(std::fabs(final_loss(gpu) - l) <= 1e-3 * std::max(1.0, std::fabs(l)), context);
  }
}

/// The 2-rank zero2 job with `flags` (1 epoch) on the CPU and with --device cuda, checked with
/// check_trains_alike; returns rank 0's output of the GPU run.
std::string check_two_gpu_ranks_as_cpu(const Env& env, const std::vector<std::string>& flags) {
  auto args = [&](const std::string& ckpt) {
    return plus(plus(env.args("zero2", ckpt), flags), {"--stop-after-epochs", "1"});
  };
  auto cpu = sl::testing::run_ranks(2, sl_train_bin(), args("cpu"), 120);
  REQUIRE_MESSAGE(cpu.exit_code == 0, cpu.report());
  auto gpu =
      sl::testing::run_ranks(2, gpu_train_bin(), plus(args("gpu"), {"--device", "cuda"}), 120);
  REQUIRE_MESSAGE(gpu.exit_code == 0, gpu.report());
  check_trains_alike(cpu.rank_stdout[0], gpu.rank_stdout[0], cpu.report() + gpu.report());
  return gpu.rank_stdout[0];
}

}  // namespace

TEST_CASE("cnn job: single, stopped after epoch 1 and resumed, ends bit-identical") {
  Env env;
  JobResult full = run_job(env.args("single", "a"));
  REQUIRE_MESSAGE(full.code == 0, full.out);
  CHECK(full.out.find("epoch 3/3") != std::string::npos);
  CHECK(std::filesystem::exists(env.root + "/a/manifest.json"));
  JobResult first = run_job(plus(env.args("single", "b"), {"--stop-after-epochs", "1"}));
  REQUIRE_MESSAGE(first.code == 0, first.out);
  CHECK(first.out.find("epoch 2/3") == std::string::npos);
  JobResult rest = run_job(plus(env.args("single", "b"), {"--resume", "1"}));
  REQUIRE_MESSAGE(rest.code == 0, rest.out);
  CHECK(rest.out.find("resumed from") != std::string::npos);
  CHECK(rest.out.find("epoch 1/3") == std::string::npos);
  CHECK(state_digest_of(full.out).size() == 16);
  CHECK_MESSAGE(state_digest_of(rest.out) == state_digest_of(full.out), full.out, "\n---\n",
                rest.out);
  // The digest is not trivially constant: the stopped run's state differs.
  CHECK(state_digest_of(first.out) != state_digest_of(full.out));
}

TEST_CASE(
    "cnn job: zero2 on 2 ranks resumes bit-identical, and a 2-rank checkpoint loads as single" *
    needs_mpi("cnn job on 2 ranks")) {
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
  CHECK_MESSAGE(state_digest_of(rest.rank_stdout[0]) == state_digest_of(full.rank_stdout[0]),
                full.report(), rest.report());
  // N -> M and mode -> mode: the zero2 checkpoint of 2 ranks continues in one process.
  JobResult single = run_job(plus(env.args("single", "c"), {"--resume", "1"}));
  REQUIRE_MESSAGE(single.code == 0, single.out);
  CHECK(single.out.find("resumed from") != std::string::npos);
  CHECK(single.out.find("epoch 3/3") != std::string::npos);
}

TEST_CASE("cnn job: --device cuda trains as on the CPU, resumes, and continues on the CPU" *
          needs_gpu_trainer("cnn job")) {
  const std::string bin = gpu_train_bin();
  const bool fake = !cuda_is_available();  // this process sees no GPU: bin is sl_train_fake
  Env env;
  JobResult cpu = run_job(env.args("single", "cpu"));
  REQUIRE_MESSAGE(cpu.code == 0, cpu.out);
  JobResult gpu = run_job(plus(env.args("single", "gpu"), {"--device", "cuda"}), bin);
  REQUIRE_MESSAGE(gpu.code == 0, gpu.out);
  CHECK(gpu.out.find("on cuda:0") != std::string::npos);
  CHECK(gpu.out.find("epoch 3/3") != std::string::npos);
  JobResult first = run_job(
      plus(env.args("single", "g1"), {"--device", "cuda", "--stop-after-epochs", "1"}), bin);
  REQUIRE_MESSAGE(first.code == 0, first.out);
  std::filesystem::copy(env.root + "/g1", env.root + "/g2",
                        std::filesystem::copy_options::recursive);
  JobResult rest =
      run_job(plus(env.args("single", "g1"), {"--device", "cuda", "--resume", "1"}), bin);
  REQUIRE_MESSAGE(rest.code == 0, rest.out);
  CHECK(rest.out.find("resumed from") != std::string::npos);
  // the GPU's checkpoint holds CPU tensors: it continues on the CPU
  JobResult on_cpu = run_job(plus(env.args("single", "g2"), {"--resume", "1"}));
  REQUIRE_MESSAGE(on_cpu.code == 0, on_cpu.out);
  CHECK(on_cpu.out.find("epoch 3/3") != std::string::npos);
  // dp with more replicas than GPUs is refused before it starts
  JobResult dp =
      run_job(plus(env.args("dp", "dp"), {"--device", "cuda", "--dp-replicas", "65"}), bin);
  CHECK(dp.code == 1);
  CHECK_MESSAGE(dp.out.find("cnn: --strategy dp with --dp-replicas 65 from cuda:0 needs GPUs") !=
                    std::string::npos,
                dp.out);
  if (fake) {
    // The fake GPU runs the CPU's kernels on the same values in the same order, so every run
    // ends in the CPU run's exact state.
    CHECK_MESSAGE(state_digest_of(gpu.out) == state_digest_of(cpu.out), cpu.out, "\n---\n",
                  gpu.out);
    CHECK(state_digest_of(rest.out) == state_digest_of(cpu.out));
    CHECK(state_digest_of(on_cpu.out) == state_digest_of(cpu.out));
  } else {
    // A GPU's kernels sum in other orders (and cuDNN may pick other algorithms from run to run),
    // so the states are not bit-identical; 9 AdamW steps from the same start on the same
    // batches end within a thousandth of the CPU's training loss.
    for (const JobResult* r : {&gpu, &rest, &on_cpu}) {
      CHECK_MESSAGE(std::fabs(final_loss(r->out) - final_loss(cpu.out)) <=
                        1e-3 * std::max(1.0, std::fabs(final_loss(cpu.out))),
                    cpu.out, "\n---\n", r->out);
    }
  }
}

TEST_CASE(
    "cnn job: zero2 on 2 ranks with --device cuda trains as on the CPU, and its "
    "checkpoint continues on the CPU" *
    needs_gpu_trainer("cnn job", 2)) {
  const std::string bin = gpu_train_bin();
  const bool fake = !cuda_is_available();
  Env env;
  // with clipping, so the global gradient norm is reduced over the group too
  auto zero2 = [&](const std::string& ckpt) {
    return plus(env.args("zero2", ckpt), {"--max-grad-norm", "0.5"});
  };
  auto cpu = sl::testing::run_ranks(2, sl_train_bin(), zero2("cpu"), 120);
  REQUIRE_MESSAGE(cpu.exit_code == 0, cpu.report());
  auto gpu = sl::testing::run_ranks(
      2, bin, plus(zero2("gpu"), {"--device", "cuda", "--stop-after-epochs", "2"}), 120);
  REQUIRE_MESSAGE(gpu.exit_code == 0, gpu.report());
  CHECK(gpu.rank_stdout[0].find("strategy zero2 on 2 rank(s)") != std::string::npos);
  // the GPUs' sharded checkpoint (written through NCCL's group) finishes on the CPU ranks
  auto rest = sl::testing::run_ranks(2, sl_train_bin(), plus(zero2("gpu"), {"--resume", "1"}), 120);
  REQUIRE_MESSAGE(rest.exit_code == 0, rest.report());
  const std::string& out = rest.rank_stdout[0];
  CHECK(out.find("resumed from") != std::string::npos);
  CHECK(out.find("epoch 3/3") != std::string::npos);
  if (fake) {
    // the fake NCCL reduces over MPI in MPI's order: the CPU run's exact state
    CHECK_MESSAGE(state_digest_of(out) == state_digest_of(cpu.rank_stdout[0]), cpu.report(),
                  rest.report());
  } else {
    // see the single-rank case above
    CHECK_MESSAGE(std::fabs(final_loss(out) - final_loss(cpu.rank_stdout[0])) <=
                      1e-3 * std::max(1.0, std::fabs(final_loss(cpu.rank_stdout[0]))),
                  cpu.report(), rest.report());
  }
}

TEST_CASE("cnn job: --sync-batchnorm 1 on 2 ranks trains as one rank on the whole batch" *
          needs_mpi("sync batchnorm on 2 ranks")) {
  Env env;
  JobResult one = run_job(env.args("single", "one"));
  REQUIRE_MESSAGE(one.code == 0, one.out);
  auto synced = sl::testing::run_ranks(
      2, sl_train_bin(), plus(env.args("zero2", "synced"), {"--sync-batchnorm", "1"}), 120);
  REQUIRE_MESSAGE(synced.exit_code == 0, synced.report());
  auto local = sl::testing::run_ranks(2, sl_train_bin(), env.args("zero2", "local"), 120);
  REQUIRE_MESSAGE(local.exit_code == 0, local.report());
  const std::string& out = synced.rank_stdout[0];
  CHECK_MESSAGE(out.find("sync batchnorm: 2 BatchNorm layer(s) use the statistics of all 2 "
                         "rank(s)") != std::string::npos,
                out);
  const double l_one = final_loss(one.out), l_synced = final_loss(out),
               l_local = final_loss(local.rank_stdout[0]);
  // The epoch's loss is printed with 6 decimals; the synced run differs from the single one only
  // in float32 summation order (measured: the same 6 decimals), the unsynced one by 7.5e-4.
  CHECK_MESSAGE(std::fabs(l_synced - l_one) <= 5e-6, one.out, out);
  CHECK_MESSAGE(std::fabs(l_local - l_one) > 1e-4, one.out, local.rank_stdout[0]);
}

TEST_CASE("cnn job: bucket sizes change the collectives on 2 ranks, not the result" *
          needs_mpi("buckets on 2 ranks")) {
  // Two ranks add each element once (a + b, in either order the same float), so any bucketing
  // gives the same state; Adam's update is elementwise.
  Env env;
  auto profiled = [&](const std::string& ckpt, const std::vector<std::string>& flags) {
    auto run = sl::testing::run_ranks(
        2, sl_train_bin(),
        plus(plus(env.args("zero2", ckpt), flags),
             {"--stop-after-epochs", "1", "--profile", env.root + "/" + ckpt + ".json",
              "--profile-from", "0", "--profile-steps", "3"}),
        120);
    REQUIRE_MESSAGE(run.exit_code == 0, run.report());
    return run.rank_stdout[0];
  };
  const std::string one = profiled("one", {"--first-bucket-mb", "25"});
  const std::string many = profiled("many", {"--bucket-mb", "0.01", "--first-bucket-mb", "0.001"});
  CHECK(state_digest_of(one) == state_digest_of(many));
  // the summary's reduce_scatter line: one bucket per step (3 steps) against several
  CHECK_MESSAGE(one.find("reduce_scatter       3 call(s)") != std::string::npos, one);
  CHECK_MESSAGE(many.find("reduce_scatter       3 call(s)") == std::string::npos, many);
}

TEST_CASE("cnn job: --sync-batchnorm 1 with --device cuda on 2 ranks trains as on the CPU" *
          needs_gpu_trainer("cnn job with sync batchnorm", 2)) {
  // SyncBatchNorm's collectives on the GPU go through the NCCL group (on the fake GPU: its
  // stand-in, which reduces over MPI in MPI's order).
  Env env;
  const std::string out = check_two_gpu_ranks_as_cpu(env, {"--sync-batchnorm", "1"});
  CHECK(out.find("sync batchnorm: 2 BatchNorm layer(s)") != std::string::npos);
}

TEST_CASE("cnn job: --reduce-dtype bf16 on 2 ranks: ddp and zero2 end alike, near float32" *
          needs_mpi("reduce dtype on 2 ranks")) {
  Env env;
  auto run = [&](const std::string& strategy, const std::vector<std::string>& flags) {
    auto r =
        sl::testing::run_ranks(2, sl_train_bin(), plus(env.args(strategy, strategy), flags), 120);
    REQUIRE_MESSAGE(r.exit_code == 0, r.report());
    return r.rank_stdout[0];
  };
  const std::string f32 = run("zero1", {});
  const std::string ddp = run("ddp", {"--reduce-dtype", "bf16"});
  const std::string z2 = run("zero2", {"--reduce-dtype", "bfloat16"});
  CHECK_MESSAGE(ddp.find("gradients are reduced in bfloat16") != std::string::npos, ddp);
  // Two ranks: one bf16 sum of two values, in either collective the same bits (the ranks test of
  // Note [Gradient communication dtype]); AdamW's update is elementwise.
  CHECK_MESSAGE(state_digest_of(z2) == state_digest_of(ddp), ddp, z2);
  CHECK_MESSAGE(state_digest_of(z2) != state_digest_of(f32), f32, z2);
  // 9 AdamW steps on gradients within 2^-8 of float32's: the last epoch's loss moves by less
  // than 1e-3 (measured: 2.3e-4; unsynchronised BatchNorm statistics cost 7.5e-4, test above)
  CHECK_MESSAGE(std::fabs(final_loss(z2) - final_loss(f32)) < 1e-3, f32, z2);
}

TEST_CASE("cnn job: --reduce-dtype bf16 with --device cuda on 2 ranks trains as on the CPU" *
          needs_gpu_trainer("cnn job with reduce dtype", 2)) {
  // The casts and the division run on the GPU, the bf16 sums in the NCCL group (on the fake GPU:
  // its stand-in, which sums over MPI as the CPU run does).
  Env env;
  const std::string out = check_two_gpu_ranks_as_cpu(env, {"--reduce-dtype", "bf16"});
  CHECK(out.find("gradients are reduced in bfloat16") != std::string::npos);
}

TEST_CASE("cnn job: --offload-optimizer 1 trains as with the optimizer on the GPU" *
          needs_gpu_trainer("cnn job with the optimizer offloaded", 1)) {
  // Note [Optimizer offload]: the AdamW update of the zero1/zero2 shard runs on the CPU.
  Env env;
  for (const char* kind : {"zero1", "zero2"}) {
    CAPTURE(kind);
    auto args = [&](const std::string& ckpt) {
      return plus(env.args(kind, ckpt), {"--device", "cuda", "--stop-after-epochs", "1"});
    };
    JobResult on_gpu = run_job(args(std::string(kind) + "g"), gpu_train_bin());
    REQUIRE_MESSAGE(on_gpu.code == 0, on_gpu.out);
    JobResult offloaded =
        run_job(plus(args(std::string(kind) + "h"), {"--offload-optimizer", "1"}), gpu_train_bin());
    REQUIRE_MESSAGE(offloaded.code == 0, offloaded.out);
    CHECK_MESSAGE(offloaded.out.find("offloaded to the host") != std::string::npos, offloaded.out);
    // the CUDA AdamW kernel rounds as the CPU's (Note [Optimizer kernels over flat spans]), but
    // allow what the GPU-against-CPU cases allow
    check_trains_alike(on_gpu.out, offloaded.out, on_gpu.out + "\n---\n" + offloaded.out);
  }
}

TEST_CASE("cnn job: --cudnn-benchmark 1 and --tf32 1 train on the GPU" *
          needs_gpu_trainer("cnn job with --cudnn-benchmark and --tf32", 1)) {
  // The switches of sl::cuda (set_cudnn_benchmark, set_allow_tf32) from the command line. On the
  // fake GPU the kernels are the CPU's, which neither switch changes: the same state digest.
  Env env;
  auto args = [&](const std::string& ckpt, std::vector<std::string> flags) {
    return plus(plus(env.args("single", ckpt), {"--device", "cuda", "--stop-after-epochs", "1"}),
                flags);
  };
  JobResult plain = run_job(args("p", {}), gpu_train_bin());
  REQUIRE_MESSAGE(plain.code == 0, plain.out);
  // algorithms chosen by timing: the same arithmetic in another order
  JobResult bench = run_job(args("b", {"--cudnn-benchmark", "1"}), gpu_train_bin());
  REQUIRE_MESSAGE(bench.code == 0, bench.out);
  check_trains_alike(plain.out, bench.out, plain.out + "\n---\n" + bench.out);
  JobResult tf32 = run_job(args("t", {"--tf32", "1"}), gpu_train_bin());
  REQUIRE_MESSAGE(tf32.code == 0, tf32.out);
  if (!cuda_is_available()) {
    CHECK_MESSAGE(state_digest_of(tf32.out) == state_digest_of(plain.out), tf32.out);
  } else {
    // TF32 rounds the products' inputs to 11 significant bits (relative error up to 2^-11 each,
    // about 1e-3 per product); three steps of the tiny network move the loss by about that
    // relative amount. 1e-2 leaves a factor of 10 (not yet measured on a GPU).
    const double l = final_loss(plain.out);
    CHECK_MESSAGE(std::fabs(final_loss(tf32.out) - l) <= 1e-2 * std::max(1.0, std::fabs(l)),
                  (plain.out + "\n---\n" + tf32.out));
  }
}

TEST_CASE("cnn job: --offload-optimizer 1 on 2 GPU ranks, with LAMB's norms across them" *
          needs_gpu_trainer("cnn job with the optimizer offloaded", 2)) {
  // Each rank updates its own shard on the CPU; LAMB's per-parameter norm sums go from the host
  // through the NCCL group (on the fake GPU: its stand-in) and back.
  Env env;
  auto run = [&](const std::string& ckpt, const std::vector<std::string>& flags) {
    auto r = sl::testing::run_ranks(
        2, gpu_train_bin(),
        plus(plus(env.args("zero2", ckpt),
                  {"--device", "cuda", "--optimizer", "lamb", "--stop-after-epochs", "1"}),
             flags),
        120);
    REQUIRE_MESSAGE(r.exit_code == 0, r.report());
    return r.rank_stdout[0];
  };
  const std::string on_gpu = run("g", {}), offloaded = run("h", {"--offload-optimizer", "1"});
  CHECK_MESSAGE(offloaded.find("offloaded to the host") != std::string::npos, offloaded);
  check_trains_alike(on_gpu, offloaded, on_gpu + "\n---\n" + offloaded);
}

TEST_CASE("cnn job: errors are clear") {
  Env env;
  JobResult r = run_job(plus(env.args("single", "none"), {"--resume", "1"}));
  CHECK(r.code == 1);
  CHECK(r.out.find("cnn: --resume 1 but there is no checkpoint at") != std::string::npos);
  r = run_job(env.args("zero3", "x"));
  CHECK(r.code == 1);
  CHECK(r.out.find("zero3") != std::string::npos);
  // A checkpoint of another configuration is refused, not silently loaded.
  REQUIRE(run_job(plus(env.args("single", "d"), {"--stop-after-epochs", "1"})).code == 0);
  r = run_job(plus(env.args("single", "d"), {"--resume", "1", "--batch-size", "16"}));
  CHECK(r.code == 1);
  CHECK(r.out.find("was written with another configuration") != std::string::npos);
  // devices: one past the visible GPUs, a logical CPU device, a name that is no device
  r = run_job(plus(env.args("single", "e"), {"--device", "cuda:63"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("cnn: --device cuda:63 is not available") != std::string::npos, r.out);
  r = run_job(plus(env.args("single", "e"), {"--device", "cpu:1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("is a logical CPU device") != std::string::npos, r.out);
  r = run_job(plus(env.args("single", "e"), {"--max-grad-norm", "-1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("cnn: --max-grad-norm must be >= 0") != std::string::npos, r.out);
  r = run_job(plus(env.args("ddp", "e"), {"--bucket-mb", "0"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(
      r.out.find("cnn: --bucket-mb must lie in (0, 1048576] MiB, got 0") != std::string::npos,
      r.out);
  r = run_job(plus(env.args("ddp", "e"), {"--first-bucket-mb", "nan"}));
  CHECK(r.code == 1);
  // refused where every number flag is read: no NaN or infinity reaches a job
  CHECK_MESSAGE(
      r.out.find("--first-bucket-mb: expected a finite number, got 'nan'") != std::string::npos,
      r.out);
  r = run_job(plus(env.args("single", "e"), {"--sync-batchnorm", "2"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("cnn: --sync-batchnorm must be 0 or 1, got 2") != std::string::npos,
                r.out);
  r = run_job(plus(env.args("dp", "e"), {"--sync-batchnorm", "1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(
      r.out.find("cnn: --sync-batchnorm 1 needs one process per rank") != std::string::npos, r.out);
  CHECK(r.out.find("epoch 1/3") == std::string::npos);
  for (const char* bad : {"int64", "fp8"}) {
    r = run_job(plus(env.args("ddp", "e"), {"--reduce-dtype", bad}));
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find(std::string("cnn: --reduce-dtype must be same, bf16, f16, f32 or f64, "
                                         "got '") +
                             bad + "'") != std::string::npos,
                  r.out);
  }
  r = run_job(plus(env.args("dp", "e"), {"--reduce-dtype", "bf16"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("cnn: --reduce-dtype applies to gradients sent between processes") !=
                    std::string::npos,
                r.out);
  r = run_job(plus(env.args("ddp", "e"), {"--offload-optimizer", "1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(
      r.out.find("cnn: --offload-optimizer 1 needs --strategy zero1 or zero2") != std::string::npos,
      r.out);
  r = run_job(plus(env.args("zero2", "e"), {"--offload-optimizer", "1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("cnn: --offload-optimizer 1 moves the optimizer state from the GPU to "
                           "the host; with --device cpu") != std::string::npos,
                r.out);
  r = run_job(plus(env.args("zero2", "e"), {"--offload-optimizer", "2"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("cnn: --offload-optimizer must be 0 or 1, got 2") != std::string::npos,
                r.out);
  for (const std::string flag : {"cudnn-benchmark", "tf32"}) {
    r = run_job(plus(env.args("single", "e"), {"--" + flag, "2"}));
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find("cnn: --" + flag + " must be 0 or 1, got 2") != std::string::npos,
                  r.out);
    r = run_job(plus(env.args("single", "e"), {"--" + flag, "1"}));
    CHECK(r.code == 1);
    CHECK_MESSAGE(
        r.out.find("cnn: --" + flag + " 1 changes how GPU kernels compute") != std::string::npos,
        r.out);
    CHECK_MESSAGE(r.out.find("it needs --device cuda, got --device cpu") != std::string::npos,
                  r.out);
    CHECK(r.out.find("epoch 1/3") == std::string::npos);
  }
  r = run_job(plus(env.args("single", "e"), {"--device", "tpu"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("tpu") != std::string::npos, r.out);
  if (!cuda_is_available()) {
    r = run_job(plus(env.args("single", "e"), {"--device", "cuda"}));
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find("cnn: --device cuda but no GPU is visible") != std::string::npos,
                  r.out);
  }
}

namespace {

/// The lr the run's last step set, from the checkpoint's scheduler state.
double checkpoint_lr(const std::string& dir) {
  return dist::read_sharded_manifest(dir).at("extra").at("scheduler").at("last_lr")[0].as_double();
}

}  // namespace

TEST_CASE("cnn job: --lr-schedule exp, step and constant set the lr per epoch and resume") {
  Env env;
  // 3 epochs of 3 steps at lr 0.01. Halving is exact in binary, so the expected lrs are exact.
  JobResult r = run_job(plus(env.args("single", "step"), {"--lr-schedule", "step:1,2", "--lr-gamma",
                                                          "0.5", "--stop-after-epochs", "1"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find("x0.5 after epochs 1,2") != std::string::npos, r.out);
  CHECK(checkpoint_lr(env.root + "/step") == 0.01 * 0.5);  // halved after epoch 1
  r = run_job(plus(env.args("single", "step"),
                   {"--lr-schedule", "step:1,2", "--lr-gamma", "0.5", "--resume", "1"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(checkpoint_lr(env.root + "/step") == 0.01 * 0.25);  // and again after epoch 2
  r = run_job(plus(env.args("single", "exp"), {"--lr-schedule", "exp", "--lr-gamma", "0.5"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(checkpoint_lr(env.root + "/exp") == 0.01 * 0.125);  // halved after each of 3 epochs
  // A warmup of 2 steps rises from lr / 3 to lr (LinearLR), then the constant schedule holds it.
  r = run_job(plus(env.args("single", "const"), {"--lr-schedule", "constant", "--warmup-steps", "2",
                                                 "--stop-after-steps", "1"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find("linear warmup (2 steps), then constant") != std::string::npos, r.out);
  r = run_job(
      plus(env.args("single", "const2"), {"--lr-schedule", "constant", "--warmup-steps", "2",
                                          "--checkpoint-every", "1", "--stop-after-steps", "1"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(checkpoint_lr(env.root + "/const2") == doctest::Approx(0.01 * 2 / 3).epsilon(1e-15));
  r = run_job(plus(env.args("single", "const2"),
                   {"--lr-schedule", "constant", "--warmup-steps", "2", "--resume", "1"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(checkpoint_lr(env.root + "/const2") == 0.01);
  // Stopped and resumed under a schedule, a run ends as the uninterrupted one.
  sl::testing::check_resume(
      plus(env.args("single", "resume"), {"--lr-schedule", "step:2", "--lr-gamma", "0.3"}));
}

TEST_CASE("cnn job: bad --lr-schedule values fail before training, naming the flag") {
  Env env;
  auto fails_with = [&](const std::vector<std::string>& flags, const std::string& message) {
    JobResult r = run_job(plus(env.args("single", "bad"), flags));
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find(message) != std::string::npos, r.out);
  };
  fails_with({"--lr-schedule", "poly"},
             "cnn: --lr-schedule must be auto, linear, cosine, exp, step:E1,E2,... or constant, "
             "got 'poly'");
  for (const char* spec : {"step:", "step:2,1", "step:0", "step:1,,2", "step:1x", "step:1,"}) {
    CAPTURE(spec);
    fails_with({"--lr-schedule", spec}, "epoch counts that are positive and increasing");
  }
  fails_with({"--lr-schedule", "exp", "--lr-gamma", "0"}, "cnn: --lr-gamma must be > 0, got 0");
  // The schedule is part of the configuration: a checkpoint resumes only under its own.
  REQUIRE(run_job(plus(env.args("single", "c"), {"--stop-after-epochs", "1"})).code == 0);
  fails_with({"--checkpoint-dir", env.root + "/c", "--lr-schedule", "exp", "--resume", "1"},
             "was written with another configuration");
}
