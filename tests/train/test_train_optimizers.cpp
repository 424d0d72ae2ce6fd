// The trainer's --optimizer lamb, sgd, rmsprop, adagrad, adamax, nadam and radam and their
// hyperparameter flags (tools/train/supervised.h, optimizer_flags.h), end to end through sl_train
// on tiny synthetic data: each trains, resumes bit-identical and refuses a resume under another
// optimizer or other hyperparameters (--momentum, --rmsprop-alpha, --rmsprop-centered,
// --adagrad-lr-decay); their weight-decay groups and torch's defaults land in the checkpoint;
// --estimate-memory counts their state buffers (against multiples of the parameter count worked
// out by hand); dp, ddp, zero1 and zero2 on 2 ranks end in the same state; a hyperparameter flag
// of another optimizer is refused.
#include <cmath>
#include <filesystem>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../dist/mpi_launch.h"
#include "dist/checkpoint.h"
#include "job_testing.h"
#include "support/testing.h"
#include "train_options_testing.h"

using sl::testing::check_resume;
using sl::testing::estimate_row;
using sl::testing::final_loss;
using sl::testing::JobResult;
using sl::testing::needs_mpi;
using sl::testing::number_after;
using sl::testing::optimizer_files_have;
using sl::testing::plus;
using sl::testing::run_job;
using sl::testing::sl_train_bin;
using sl::testing::state_digest_of;

using namespace sl;

namespace {

using Data = sl::testing::TrainData;

}  // namespace

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
  CHECK_MESSAGE(bad.out.find("bert_pos: --optimizer must be adamw, lamb, sgd, rmsprop, adagrad, "
                             "adamax, nadam or radam, got 'adam'") != std::string::npos,
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

TEST_CASE("--optimizer adamax, nadam and radam: train, resume bit-identical, L2 decay groups") {
  Data d("optimizer_adam_family");
  // the cnn job: BatchNorm and biases in the group without decay
  auto with = [&](const std::string& optimizer, const std::string& ckpt) {
    return plus(d.cnn(ckpt), {"--optimizer", optimizer, "--lr", "0.001"});
  };
  auto fails_with = [&](const std::vector<std::string>& args, const std::string& message) {
    JobResult r = run_job(args);
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find(message) != std::string::npos, r.out);
    return r.out;
  };
  JobResult adamw = run_job(plus(d.cnn("a"), {"--lr", "0.001"}));
  REQUIRE_MESSAGE(adamw.code == 0, adamw.out);
  struct Case {
    std::string flag, name;
    std::vector<std::string> state;  // the float32 tensors each parameter keeps
  };
  const std::vector<Case> cases = {{"adamax", "Adamax", {"exp_avg", "exp_inf"}},
                                   {"nadam", "NAdam", {"exp_avg", "exp_avg_sq"}},
                                   {"radam", "RAdam", {"exp_avg", "exp_avg_sq"}}};
  std::vector<std::string> digests = {state_digest_of(adamw.out)};
  for (const Case& c : cases) {
    CAPTURE(c.flag);
    check_resume(with(c.flag, c.flag + "_r"));
    const std::string ckpt = c.flag + "2";
    JobResult r = run_job(with(c.flag, ckpt));
    REQUIRE_MESSAGE(r.code == 0, r.out);
    CHECK_MESSAGE(r.out.find(c.name + " lr 0.001 wd 0.01, cosine") != std::string::npos, r.out);
    CHECK(final_loss(r.out) < number_after(r.out, "epoch 1/3  loss "));
    // another update rule than AdamW's and than each other's
    for (const std::string& other : digests) CHECK(state_digest_of(r.out) != other);
    digests.push_back(state_digest_of(r.out));
    for (const std::string& key : c.state) CHECK(optimizer_files_have(d.dir(ckpt), key));
    // Two float32 tensors per parameter, as allocated after training (the report prints MiB to
    // 6 significant digits): 8 bytes per parameter.
    const double psi = number_after(r.out, "Psi="), mib = 1024.0 * 1024.0;
    REQUIRE(psi > 1000);
    CHECK(number_after(r.out, "optimizer state ") * mib == doctest::Approx(8 * psi).epsilon(1e-5));
    // the groups: --weight-decay on the weights, none on biases and BatchNorm; PyTorch 1.13's
    // defaults for the rest (betas 0.9, 0.999; eps 1e-8; NAdam's momentum_decay 4e-3)
    const serialize::Json meta = dist::read_sharded_optimizer_meta(d.dir(ckpt));
    const serialize::Json& groups = meta.at("param_groups");
    REQUIRE(groups.size() == 2);
    CHECK(groups[0].at("weight_decay").as_double() == 0.01);
    CHECK(groups[1].at("weight_decay").as_double() == 0.0);
    for (size_t i = 0; i < 2; ++i) {
      CHECK(groups[i].at("betas")[0].as_double() == 0.9);
      CHECK(groups[i].at("betas")[1].as_double() == 0.999);
      CHECK(groups[i].at("eps").as_double() == 1e-8);
      if (c.flag == "nadam") CHECK(groups[i].at("momentum_decay").as_double() == 4e-3);
    }
    // NAdam's running product of its momentum coefficients, one per parameter, is saved too
    const serialize::Json* mu = meta.find("mu_products");
    CHECK((mu != nullptr) == (c.flag == "nadam"));
    if (mu) CHECK(mu->members().size() == meta.at("steps").members().size());
  }
  // The optimizer is the configuration's: a checkpoint resumes only under the one that wrote it.
  for (const auto& [ckpt, run, want] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"adamax2", "nadam", "--optimizer Adamax there, NAdam in this run"},
           {"nadam2", "radam", "--optimizer NAdam there, RAdam in this run"},
           {"radam2", "adamw", "--optimizer RAdam there, AdamW in this run"},
           {"a", "adamax", "--optimizer AdamW there, Adamax in this run"}}) {
    CAPTURE(ckpt);
    const std::string out = fails_with(plus(with(run, ckpt), {"--resume", "1"}),
                                       "was written with another configuration");
    CHECK_MESSAGE(out.find(want) != std::string::npos, out);
  }
  // their betas are fixed: no --momentum
  for (const char* o : {"adamax", "nadam", "radam"}) {
    fails_with(plus(with(o, "e"), {"--momentum", "0.9"}),
               std::string("cnn: --momentum 0.9 applies to --optimizer sgd and rmsprop only, got "
                           "--optimizer ") +
                   o + " (whose moments have their own fixed betas)");
  }
  CHECK_FALSE(std::filesystem::exists(d.dir("e")));
}

TEST_CASE("--estimate-memory with --optimizer adamax, nadam and radam: K = 8, 12 with masters") {
  Data d("estimate_adam_family");
  // The job's own cnn: Psi = 421738. The MiB below are multiples of Psi / 2^20 worked out by hand
  // (python), as in the sgd case: 2 Psi = 0.804401, 4 Psi = 1.608803, 8 Psi = 3.217606, 10 Psi =
  // 4.022007, 12 Psi = 4.826408, 16 Psi = 6.435211. Each keeps two float32 tensors per parameter
  // (Adamax exp_avg and exp_inf, NAdam and RAdam exp_avg and exp_avg_sq; NAdam's mu_product is one
  // host float64 per parameter tensor, not per element, and not counted).
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
  const double p2 = 0.804401, p4 = 1.608803, p8 = 3.217606, p12 = 4.826408, p16 = 6.435211;
  for (const auto& [flag, name] : std::vector<std::pair<std::string, std::string>>{
           {"adamax", "Adamax"}, {"nadam", "NAdam"}, {"radam", "RAdam"}}) {
    CAPTURE(flag);
    const std::vector<std::string> cnn = {
        "--model",     "cnn", "--data-dir",        d.root + "/data",
        "--optimizer", flag,  "--estimate-memory", "2"};
    JobResult r = run_job(cnn);
    REQUIRE_MESSAGE(r.code == 0, r.out);
    CHECK(r.out.find("Psi = 421738 parameters") != std::string::npos);
    CHECK_MESSAGE(r.out.find("K = 8 (" + name + ")") != std::string::npos, r.out);
    check_row(r.out, 1, "single", {p4, p4, p8, 0, p16, 0, p16});
    check_row(r.out, 2, "ddp", {p4, p4, p8, 0, p16, 0, p16});
    check_row(r.out, 2, "zero1", {p4, p4, p4, 0, p12, 0, p12});
    check_row(r.out, 2, "zero2", {p4, p2, p4, 0, 4.022007, 0, 4.022007});
    // bfloat16 parameters: a float32 master beside the two tensors, K = 12 (2 + 2 + 12 Psi)
    r = run_job(plus(cnn, {"--precision", "bf16-true"}));
    REQUIRE_MESSAGE(r.code == 0, r.out);
    CHECK_MESSAGE(r.out.find("K = 12 (" + name + ", masters)") != std::string::npos, r.out);
    check_row(r.out, 1, "single", {p2, p2, p8, p4, p16, 0, p16});
  }
}

TEST_CASE("--optimizer adamax, nadam and radam on 2 ranks: dp, ddp, zero1, zero2 end alike" *
          needs_mpi("adamax, nadam and radam on 2 ranks")) {
  // As SGD's: two ranks add each gradient element once (a + b in any collective), and the three
  // updates are elementwise (NAdam's mu_product and RAdam's rectification are per-parameter
  // scalars of the step count), so sharding their state changes no bit.
  Data d("adam_family_ranks");
  for (const std::string o : {"adamax", "nadam", "radam"}) {
    CAPTURE(o);
    auto args = [&](const std::string& strategy, const std::string& ckpt) {
      return plus(plus(d.cnn(o + ckpt), {"--strategy", strategy}),
                  {"--optimizer", o, "--lr", "0.001", "--weight-decay", "1e-4"});
    };
    auto run = [&](const std::string& strategy, const std::string& ckpt,
                   const std::vector<std::string>& flags) {
      auto r = sl::testing::run_ranks(2, sl_train_bin(), plus(args(strategy, ckpt), flags), 120);
      REQUIRE_MESSAGE(r.exit_code == 0, r.report());
      return r.rank_stdout[0];
    };
    const std::string ddp = run("ddp", "ddp", {});
    CHECK_MESSAGE(ddp.find(" lr 0.001 wd 0.0001") != std::string::npos, ddp);
    for (const char* kind : {"zero1", "zero2"}) {
      CAPTURE(kind);
      const std::string z = run(kind, kind, {});
      CHECK_MESSAGE(state_digest_of(z) == state_digest_of(ddp), ddp, z);
    }
    JobResult dp = run_job(args("dp", "dp"));
    REQUIRE_MESSAGE(dp.code == 0, dp.out);
    CHECK_MESSAGE(state_digest_of(dp.out) == state_digest_of(ddp), ddp, dp.out);
    // the sharded state (and NAdam's mu_products) go through the checkpoint
    run("zero2", "part", {"--stop-after-epochs", "1"});
    const std::string rest = run("zero2", "part", {"--resume", "1"});
    CHECK(rest.find("resumed from") != std::string::npos);
    CHECK_MESSAGE(state_digest_of(rest) == state_digest_of(ddp), ddp, rest);
  }
}

TEST_CASE(
    "--rmsprop-alpha, --rmsprop-centered, --adagrad-lr-decay: taken, recorded, refused else") {
  Data d("optimizer_hyperparameters");
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
  const std::vector<std::string> resume = {"--resume", "1"};
  JobResult plain = run_job(with("rmsprop", "r"));
  REQUIRE_MESSAGE(plain.code == 0, plain.out);
  // alpha and centered reach the update (each alone, and both) and go through the checkpoint
  const std::vector<std::string> tuned = {"--rmsprop-alpha", "0.9", "--rmsprop-centered", "1"};
  check_resume(with("rmsprop", "t", tuned));
  JobResult t = run_job(with("rmsprop", "t2", tuned));
  REQUIRE_MESSAGE(t.code == 0, t.out);
  CHECK_MESSAGE(t.out.find("RMSprop lr 0.001 momentum 0 alpha 0.9 centered wd 0.01, cosine") !=
                    std::string::npos,
                t.out);
  JobResult a = run_job(with("rmsprop", "a", {"--rmsprop-alpha", "0.9"}));
  REQUIRE_MESSAGE(a.code == 0, a.out);
  JobResult c = run_job(with("rmsprop", "c", {"--rmsprop-centered", "1"}));
  REQUIRE_MESSAGE(c.code == 0, c.out);
  const std::vector<std::string> digests = {state_digest_of(plain.out), state_digest_of(t.out),
                                            state_digest_of(a.out), state_digest_of(c.out)};
  for (size_t i = 0; i < digests.size(); ++i) {
    for (size_t j = 0; j < i; ++j) CHECK(digests[i] != digests[j]);
  }
  CHECK(optimizer_files_have(d.dir("t2"), "grad_avg"));  // centered: the gradient's average
  CHECK_FALSE(optimizer_files_have(d.dir("r"), "grad_avg"));
  const serialize::Json groups = dist::read_sharded_optimizer_meta(d.dir("t2")).at("param_groups");
  REQUIRE(groups.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(groups[i].at("alpha").as_double() == 0.9);
    CHECK(groups[i].at("centered").as_bool());
  }
  // the run's configuration records them (so the manifest alone refuses a change), as numbers
  const serialize::Json config = dist::read_sharded_manifest(d.dir("t2")).at("extra").at("config");
  CHECK(config.at("rmsprop_alpha").as_double() == 0.9);
  CHECK(config.at("rmsprop_centered").as_int() == 1);
  // Given at their defaults they are the defaults: the run is the plain one's, whose checkpoint
  // (written without the keys) resumes, at its end, to nothing to do.
  JobResult same =
      run_job(with("rmsprop", "s", {"--rmsprop-alpha", "0.99", "--rmsprop-centered", "0"}));
  REQUIRE_MESSAGE(same.code == 0, same.out);
  CHECK(state_digest_of(same.out) == state_digest_of(plain.out));
  JobResult again = run_job(
      plus(with("rmsprop", "r", {"--rmsprop-alpha", "0.99", "--rmsprop-centered", "0"}), resume));
  REQUIRE_MESSAGE(again.code == 0, again.out);
  CHECK(again.out.find("resume: nothing to do") != std::string::npos);
  // A checkpoint resumes only under the values that wrote it.
  fails_with(
      plus(with("rmsprop", "t2", {"--rmsprop-alpha", "0.8", "--rmsprop-centered", "1"}), resume),
      "--rmsprop-alpha 0.9 there, 0.8 in this run");
  fails_with(plus(with("rmsprop", "t2", {"--rmsprop-alpha", "0.9"}), resume),
             "--rmsprop-centered 1 there, 0 in this run");
  fails_with(plus(with("rmsprop", "r", {"--rmsprop-alpha", "0.9"}), resume),
             "--rmsprop-alpha 0.99 there, 0.9 in this run");
  fails_with(plus(with("rmsprop", "r", {"--rmsprop-centered", "1"}), resume),
             "--rmsprop-centered 0 there, 1 in this run");

  // Adagrad's lr_decay: lr / (1 + (step - 1) lr_decay) on top of the schedule
  JobResult g = run_job(with("adagrad", "g"));
  REQUIRE_MESSAGE(g.code == 0, g.out);
  const std::vector<std::string> decay = {"--adagrad-lr-decay", "0.1"};
  check_resume(with("adagrad", "gd", decay));
  JobResult gd = run_job(with("adagrad", "gd2", decay));
  REQUIRE_MESSAGE(gd.code == 0, gd.out);
  CHECK_MESSAGE(gd.out.find("Adagrad lr 0.001 lr_decay 0.1 wd 0.01, cosine") != std::string::npos,
                gd.out);
  CHECK(state_digest_of(gd.out) != state_digest_of(g.out));
  const serialize::Json ggroups =
      dist::read_sharded_optimizer_meta(d.dir("gd2")).at("param_groups");
  REQUIRE(ggroups.size() == 2);
  for (size_t i = 0; i < 2; ++i) CHECK(ggroups[i].at("lr_decay").as_double() == 0.1);
  CHECK(dist::read_sharded_manifest(d.dir("gd2"))
            .at("extra")
            .at("config")
            .at("adagrad_lr_decay")
            .as_double() == 0.1);
  CHECK(dist::read_sharded_manifest(d.dir("g")).at("extra").at("config").find("adagrad_lr_decay") ==
        nullptr);  // its default: not written, as before the flag existed
  fails_with(plus(with("adagrad", "gd2", {"--adagrad-lr-decay", "0.2"}), resume),
             "--adagrad-lr-decay 0.1 there, 0.2 in this run");
  fails_with(plus(with("adagrad", "gd2"), resume), "--adagrad-lr-decay 0.1 there, 0 in this run");
  fails_with(plus(with("adagrad", "g", decay), resume),
             "--adagrad-lr-decay 0 there, 0.1 in this run");

  // Another optimizer's hyperparameter would be ignored: refused, naming the flag, its value and
  // the optimizer (even at its default value: given).
  for (const auto& [flag, value, owner, other] :
       std::vector<std::tuple<std::string, std::string, std::string, std::string>>{
           {"rmsprop-alpha", "0.9", "rmsprop", "adamw"},
           {"rmsprop-alpha", "0.99", "rmsprop", "sgd"},
           {"rmsprop-centered", "1", "rmsprop", "adagrad"},
           {"rmsprop-centered", "0", "rmsprop", "lamb"},
           {"adagrad-lr-decay", "0.1", "adagrad", "rmsprop"},
           {"adagrad-lr-decay", "0", "adagrad", "nadam"}}) {
    CAPTURE(flag);
    CAPTURE(other);
    fails_with(with(other, "e", {"--" + flag, value}),
               "cnn: --" + flag + " " + value + " applies to --optimizer " + owner +
                   " only, got --optimizer " + other + " (which has no such hyperparameter)");
  }
  // PyTorch's ranges (alpha >= 0, lr_decay >= 0; centered a switch), named by the flag
  fails_with(with("rmsprop", "e", {"--rmsprop-alpha", "-0.1"}),
             "--rmsprop-alpha: expected a number >= 0, got -0.1");
  fails_with(with("rmsprop", "e", {"--rmsprop-alpha", "nan"}),
             "--rmsprop-alpha: expected a finite number, got 'nan'");
  fails_with(with("rmsprop", "e", {"--rmsprop-centered", "2"}),
             "--rmsprop-centered: expected an integer in [0, 1], got 2");
  fails_with(with("adagrad", "e", {"--adagrad-lr-decay", "-1"}),
             "--adagrad-lr-decay: expected a number >= 0, got -1");
  CHECK_FALSE(std::filesystem::exists(d.dir("e")));
  // centered RMSprop keeps grad_avg beside square_avg: K = 8, 12 with a momentum buffer
  for (const auto& [momentum, k] :
       std::vector<std::pair<std::string, std::string>>{{"0", "8"}, {"0.5", "12"}}) {
    JobResult e =
        run_job({"--model", "cnn", "--data-dir", d.root + "/data", "--optimizer", "rmsprop",
                 "--rmsprop-centered", "1", "--momentum", momentum, "--estimate-memory", "1"});
    REQUIRE_MESSAGE(e.code == 0, e.out);
    CHECK_MESSAGE(e.out.find("K = " + k + " (RMSprop)") != std::string::npos, e.out);
  }
}
