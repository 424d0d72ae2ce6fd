// The trainer's flag checks (tools/train/registry.h, supervised.h), end to end through sl_train
// and on the parsers directly: a flag no job reads fails with the closest known flag; values out
// of range fail naming the flag, none falls back to a default; a flag that the other flags make
// ineffective is refused, naming both, and so are --tf32 1 under bf16-true (and on the CPU under
// the mixed precisions) and stop points that would stop nothing; --help lists each job's flags,
// and check_all_read keeps the table from drifting from the code.
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../dist/mpi_launch.h"
#include "job_testing.h"
#include "registry.h"
#include "support/testing.h"
#include "train_options_testing.h"

using sl::testing::gpu_train_bin;
using sl::testing::JobResult;
using sl::testing::needs_gpu_trainer;
using sl::testing::needs_mpi;
using sl::testing::plus;
using sl::testing::run_job;
using sl::testing::sl_train_bin;

using namespace sl;

namespace {

using Data = sl::testing::TrainData;

}  // namespace

TEST_CASE("a flag no job reads fails before any work, with the closest known flag") {
  Data d("unknown_flags");
  JobResult r = run_job(plus(d.cnn("e"), {"--precison", "bf16-mixed"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("cnn: unknown flag --precison (did you mean --precision?); this job "
                           "reads --accumulate, --adagrad-lr-decay, --batch-size, --bucket-mb,") !=
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

TEST_CASE("a flag that would do nothing is refused: --tf32 1 under bf16-true, idle stop points") {
  // Before: --tf32 1 --precision bf16-true trained as without it (no float32 product is left),
  // --stop-after-epochs 0 trained nothing and --stop-after-steps 0 took one step, and a stop
  // point past a fresh run's end ran the whole run.
  Data d("idle_flags");
  auto fails_with = [&](const std::vector<std::string>& flags, const std::string& message) {
    JobResult r = run_job(plus(d.cnn("e"), flags));  // 3 epochs of 3 steps
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find(message) != std::string::npos, r.out);
    CHECK(r.out.find("epoch 1/3") == std::string::npos);
    return r.out;
  };
  // refused where the device would be checked: the precision alone decides
  fails_with({"--tf32", "1", "--precision", "bf16-true"},
             "cnn: --tf32 1 has no effect with --precision bf16-true (its matmuls and "
             "convolutions run in bfloat16; TF32 rounds float32 ones only)");
  std::string out = fails_with({"--stop-after-epochs", "0"},
                               "cnn: --stop-after-epochs must be >= 1 (-1: never), got 0 (the run "
                               "would stop before its first step and train nothing)");
  CHECK(out.find("fashion-mnist:") == std::string::npos);  // before loading the data
  out = fails_with({"--stop-after-steps", "0"},
                   "cnn: --stop-after-steps must be >= 1 (-1: never), got 0 (the run stops after "
                   "the step that reaches the stop point, so it would still take one)");
  CHECK(out.find("fashion-mnist:") == std::string::npos);
  for (const char* n : {"3", "5"}) {
    out = fails_with({"--stop-after-epochs", n},
                     std::string("cnn: --stop-after-epochs ") + n +
                         " stops nothing: the run ends after its --epochs 3 anyway (a stop point "
                         "must lie before the run's end)");
    CHECK(out.find("fashion-mnist:") == std::string::npos);
  }
  // the run's steps are known once the data is: checked then, before the first step
  fails_with({"--stop-after-steps", "10"},
             "cnn: --stop-after-steps 10 stops nothing: the run has 9 steps (--epochs 3 of 3 "
             "steps) and ends before it (a stop point must lie at or before the run's last step)");
  CHECK_FALSE(std::filesystem::exists(d.dir("e")));
  // At the last step it still stops something: the last evaluation and checkpoint, as a crash
  // after that step would.
  JobResult last = run_job(plus(d.cnn("last"), {"--stop-after-steps", "9"}));
  REQUIRE_MESSAGE(last.code == 0, last.out);
  CHECK(last.out.find("stopped after step 9 of the run") != std::string::npos);
  CHECK(last.out.find("epoch 2/3") != std::string::npos);
  CHECK(last.out.find("epoch 3/3") == std::string::npos);
  JobResult two = run_job(plus(d.cnn("two"), {"--stop-after-epochs", "2"}));
  REQUIRE_MESSAGE(two.code == 0, two.out);
  CHECK(two.out.find("epoch 2/3") != std::string::npos);
  CHECK(two.out.find("epoch 3/3") == std::string::npos);
  // On resume a stop point may be reached already (nothing to do, test_resume_check.cpp) or lie
  // at the end; 0 is refused there too.
  JobResult zero = run_job(plus(d.cnn("two"), {"--resume", "1", "--stop-after-epochs", "0"}));
  CHECK(zero.code == 1);
  CHECK_MESSAGE(zero.out.find("cnn: --stop-after-epochs must be >= 1 (-1: never), got 0") !=
                    std::string::npos,
                zero.out);
  JobResult rest = run_job(plus(d.cnn("two"), {"--resume", "1", "--stop-after-epochs", "3"}));
  REQUIRE_MESSAGE(rest.code == 0, rest.out);
  CHECK(rest.out.find("epoch 3/3") != std::string::npos);
}

TEST_CASE("--tf32 1 under bf16-mixed and f16-mixed on the CPU: refused for the device") {
  // TF32 and autocast are orthogonal (PyTorch's allow_tf32 holds under autocast), so the mixed
  // precisions do not refuse it as bf16-true does; on the CPU it still changes nothing, and the
  // device check refuses it before any work, as in float32.
  Data d("tf32_mixed_cpu");
  for (const char* p : {"bf16-mixed", "f16-mixed"}) {
    CAPTURE(std::string(p));
    JobResult r = run_job(plus(d.cnn("e"), {"--tf32", "1", "--precision", p}));
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find("cnn: --tf32 1 changes how GPU kernels compute (cuDNN convolutions, "
                             "float32 products): it needs --device cuda, got --device cpu") !=
                      std::string::npos,
                  r.out);
    CHECK(r.out.find("has no effect with --precision") == std::string::npos);
    CHECK(r.out.find("epoch 1/3") == std::string::npos);
    CHECK_FALSE(std::filesystem::exists(d.dir("e")));
  }
}

TEST_CASE("--tf32 1 with --device cuda: taken in float32, refused under bf16-true" *
          needs_gpu_trainer("tf32 under bf16-true")) {
  Data d("tf32_bf16_true");
  JobResult r =
      run_job(plus(d.cnn("e"), {"--device", "cuda", "--tf32", "1", "--precision", "bf16-true"}),
              gpu_train_bin());
  CHECK(r.code == 1);
  CHECK_MESSAGE(
      r.out.find("cnn: --tf32 1 has no effect with --precision bf16-true") != std::string::npos,
      r.out);
  CHECK_FALSE(std::filesystem::exists(d.dir("e")));
  // in float32 it is taken (the refusal is bf16-true's)
  r = run_job(plus(d.cnn("f"), {"--device", "cuda", "--tf32", "1", "--stop-after-epochs", "1"}),
              gpu_train_bin());
  CHECK_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("--tf32 1: TF32 rounds only") == std::string::npos);
  // and under the mixed precisions, as PyTorch's allow_tf32 under autocast, saying what it
  // reaches on the precision line
  for (const char* p : {"bf16-mixed", "f16-mixed"}) {
    CAPTURE(std::string(p));
    r = run_job(plus(d.cnn(std::string("m") + p), {"--device", "cuda", "--tf32", "1", "--precision",
                                                   p, "--stop-after-epochs", "1"}),
                gpu_train_bin());
    CHECK_MESSAGE(r.code == 0, r.out);
    CHECK_MESSAGE(r.out.find(std::string("precision ") + p) != std::string::npos, r.out);
    CHECK_MESSAGE(r.out.find("(--tf32 1: TF32 rounds only the float32 products autocast leaves; "
                             "its matmuls, linear layers, convolutions and LSTM/GRU run in 16 "
                             "bits)") != std::string::npos,
                  r.out);
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
