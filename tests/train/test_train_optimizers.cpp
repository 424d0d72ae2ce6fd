// The trainer's --optimizer lamb, sgd, rmsprop, adagrad, adamax, nadam and radam and their
// hyperparameter flags (tools/train/supervised.h, optimizer_flags.h), end to end through sl_train
// on tiny synthetic data: each trains, resumes bit-identical and refuses a resume under another
// optimizer or other hyperparameters (--momentum, --rmsprop-alpha, --rmsprop-centered,
// --adagrad-lr-decay); their weight-decay groups and torch's defaults land in the checkpoint;
// --estimate-memory counts their state buffers (against multiples of the parameter count worked
// out by hand); dp, ddp, zero1 and zero2 on 2 ranks end in the same state; a hyperparameter flag
// of another optimizer is refused. What repeats per optimizer is a table of cases with one runner
// each: kTrainCases (check_trained), kEstimateCases (check_estimate), kRanksCases
// (check_ranks_alike).
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

/// Runs sl_train with `args`; checks that it fails (exit code 1) saying `message`; returns what
/// it printed.
std::string fails_with(const std::vector<std::string>& args, const std::string& message) {
  JobResult r = run_job(args);
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find(message) != std::string::npos, r.out);
  return r.out;
}

/// The words of `args`, space-separated (for CAPTURE).
std::string join(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

// --- trained on the cnn job: one table of cases, one runner ---

/// One optimizer trained on the cnn job at --lr 0.001 (BatchNorm and biases in the group without
/// decay) into checkpoint folder `ckpt`: what it prints of its optimizer (`summary`), the state
/// tensors its checkpoint holds and does not, what each saved group holds besides the weight decay
/// (numbers, switches, or a 2-entry array for betas), the float32 tensors per parameter the
/// report counts as optimizer state (0: not checked) and whether its loss falls over 3 epochs.
struct TrainCase {
  std::string ckpt;
  std::vector<std::string> flags;
  std::string summary;
  std::vector<std::string> state, no_state;
  std::vector<std::pair<std::string, serialize::Json>> group;
  int state_tensors;
  bool loss_falls;
};

// torch's defaults where a flag does not set them: RMSprop alpha 0.99, eps 1e-8, not centered;
// Adagrad eps 1e-10, no lr_decay; Adamax, NAdam and RAdam betas 0.9, 0.999 and eps 1e-8 (PyTorch
// 1.13), NAdam's momentum_decay 4e-3.
const std::vector<TrainCase> kTrainCases = {
    // torch.optim.RMSprop's default momentum is 0: no buffer, square_avg only
    {"r2",
     {"--optimizer", "rmsprop"},
     "RMSprop lr 0.001 momentum 0 wd 0.01, cosine",
     {"square_avg"},
     {"momentum_buffer"},
     {},
     0,
     true},
    // with momentum: its buffer goes through the checkpoint too
    {"rm2",
     {"--optimizer", "rmsprop", "--momentum", "0.5"},
     "RMSprop lr 0.001 momentum 0.5 wd 0.01",
     {"square_avg", "momentum_buffer"},
     {},
     {{"momentum", 0.5}, {"alpha", 0.99}, {"eps", 1e-8}, {"centered", false}},
     0,
     false},
    {"g2",
     {"--optimizer", "adagrad"},
     "Adagrad lr 0.001 wd 0.01, cosine",
     {"sum"},
     {},
     {{"eps", 1e-10}, {"lr_decay", 0.0}},
     0,
     true},
    // two float32 tensors per parameter each
    {"adamax2",
     {"--optimizer", "adamax"},
     "Adamax lr 0.001 wd 0.01, cosine",
     {"exp_avg", "exp_inf"},
     {},
     {{"betas", serialize::Json::array({0.9, 0.999})}, {"eps", 1e-8}},
     2,
     true},
    {"nadam2",
     {"--optimizer", "nadam"},
     "NAdam lr 0.001 wd 0.01, cosine",
     {"exp_avg", "exp_avg_sq"},
     {},
     {{"betas", serialize::Json::array({0.9, 0.999})}, {"eps", 1e-8}, {"momentum_decay", 4e-3}},
     2,
     true},
    {"radam2",
     {"--optimizer", "radam"},
     "RAdam lr 0.001 wd 0.01, cosine",
     {"exp_avg", "exp_avg_sq"},
     {},
     {{"betas", serialize::Json::array({0.9, 0.999})}, {"eps", 1e-8}},
     2,
     true},
};

/// The cnn job at --lr 0.001 with `flags`, into checkpoint folder `ckpt`.
std::vector<std::string> cnn_at_lr_1e3(const Data& d, const std::string& ckpt,
                                       const std::vector<std::string>& flags) {
  return plus(plus(d.cnn(ckpt), {"--lr", "0.001"}), flags);
}

/// Checks a saved group's `got` against `want`: the same bool, the same number, or an array of
/// the same numbers (each entry a check).
void check_group_value(const serialize::Json& got, const serialize::Json& want) {
  if (want.is_bool()) {
    CHECK(got.as_bool() == want.as_bool());
  } else if (want.is_array()) {
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < want.size(); ++k) CHECK(got[k].as_double() == want[k].as_double());
  } else {
    CHECK(got.as_double() == want.as_double());
  }
}

/// Runs c: it resumes bit-identical (check_resume into c.ckpt + "_r"), and a whole run into c.ckpt
/// prints c.summary, lowers its loss (c.loss_falls), ends in a state digest unlike each of
/// `digests` (another update rule than theirs: c's is appended) and saves c's state and groups:
/// --weight-decay 0.01 on the weights, none on biases and BatchNorm.
void check_trained(const Data& d, const TrainCase& c, std::vector<std::string>& digests) {
  check_resume(cnn_at_lr_1e3(d, c.ckpt + "_r", c.flags));
  JobResult r = run_job(cnn_at_lr_1e3(d, c.ckpt, c.flags));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find(c.summary) != std::string::npos, r.out);
  if (c.loss_falls) CHECK(final_loss(r.out) < number_after(r.out, "epoch 1/3  loss "));
  for (const std::string& other : digests) CHECK(state_digest_of(r.out) != other);
  digests.push_back(state_digest_of(r.out));
  for (const std::string& key : c.state) CHECK(optimizer_files_have(d.dir(c.ckpt), key));
  for (const std::string& key : c.no_state) CHECK_FALSE(optimizer_files_have(d.dir(c.ckpt), key));
  if (c.state_tensors > 0) {
    // as allocated after training (the report prints MiB to 6 significant digits): 4 bytes per
    // parameter for each float32 tensor
    const double psi = number_after(r.out, "Psi="), mib = 1024.0 * 1024.0;
    REQUIRE(psi > 1000);
    CHECK(number_after(r.out, "optimizer state ") * mib ==
          doctest::Approx(4 * c.state_tensors * psi).epsilon(1e-5));
  }
  const serialize::Json meta = dist::read_sharded_optimizer_meta(d.dir(c.ckpt));
  const serialize::Json& groups = meta.at("param_groups");
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].at("weight_decay").as_double() == 0.01);
  CHECK(groups[1].at("weight_decay").as_double() == 0.0);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(groups[i].at("lr").is_number());
    for (const auto& [key, want] : c.group) {
      CAPTURE(key);
      check_group_value(groups[i].at(key), want);
    }
  }
  // NAdam's running product of its momentum coefficients, one per parameter, is saved too
  const serialize::Json* mu = meta.find("mu_products");
  CHECK((mu != nullptr) == (c.flags[1] == "nadam"));
  if (mu) CHECK(mu->members().size() == meta.at("steps").members().size());
}

// --- --estimate-memory: one table of cases, one runner ---

// The job's own cnn: Psi = 421738 parameters. The expected MiB below are multiples of Psi / 2^20
// worked out by hand (python), not read from the code.
constexpr double kPsi2 = 0.804401, kPsi4 = 1.608803, kPsi6 = 2.413204, kPsi7 = 2.815405,
                 kPsi8 = 3.217606, kPsi10 = 4.022007, kPsi12 = 4.826408, kPsi16 = 6.435211;

/// One row of the memory table: `ranks` ranks of `kind`, and its {params, grads, optimizer,
/// masters, device, host, ZeRO paper} MiB.
struct EstimateRow {
  int ranks;
  const char* kind;
  std::vector<double> want;
};

/// The cnn job's --estimate-memory 2 with `flags`: the "K = ..." it prints (none to check when
/// empty) and rows of its table.
struct EstimateCase {
  std::vector<std::string> flags;
  std::string k;
  std::vector<EstimateRow> rows;
};

/// One float32 state tensor per parameter (SGD's momentum buffer, RMSprop's square_avg,
/// Adagrad's sum), float32 parameters: K = 4.
const std::vector<EstimateRow> kOneBufferRows = {
    {1, "single", {kPsi4, kPsi4, kPsi4, 0, kPsi12, 0, kPsi12}},
    {2, "ddp", {kPsi4, kPsi4, kPsi4, 0, kPsi12, 0, kPsi12}},
    {2, "zero1", {kPsi4, kPsi4, kPsi2, 0, kPsi10, 0, kPsi10}},
    {2, "zero2", {kPsi4, kPsi2, kPsi2, 0, kPsi8, 0, kPsi8}}};
/// Two float32 state tensors per parameter (Adamax's, NAdam's, RAdam's): K = 8.
const std::vector<EstimateRow> kTwoTensorRows = {
    {1, "single", {kPsi4, kPsi4, kPsi8, 0, kPsi16, 0, kPsi16}},
    {2, "ddp", {kPsi4, kPsi4, kPsi8, 0, kPsi16, 0, kPsi16}},
    {2, "zero1", {kPsi4, kPsi4, kPsi4, 0, kPsi12, 0, kPsi12}},
    {2, "zero2", {kPsi4, kPsi2, kPsi4, 0, kPsi10, 0, kPsi10}}};
/// The same with bfloat16 parameters: a float32 master beside them, K = 12 (2 + 2 + 12 Psi).
const std::vector<EstimateRow> kTwoTensorMasterRows = {
    {1, "single", {kPsi2, kPsi2, kPsi8, kPsi4, kPsi16, 0, kPsi16}}};

const std::vector<EstimateCase> kEstimateCases = {
    // SGD: momentum 0.9 by default, one float32 buffer: K = 4
    {{"--optimizer", "sgd"}, "K = 4 (SGD)", kOneBufferRows},
    // no buffer at all: K = 0
    {{"--optimizer", "sgd", "--momentum", "0"},
     "K = 0 (SGD)",
     {{1, "single", {kPsi4, kPsi4, 0, 0, kPsi8, 0, kPsi8}},
      {2, "zero1", {kPsi4, kPsi4, 0, 0, kPsi8, 0, kPsi8}},
      {2, "zero2", {kPsi4, kPsi2, 0, 0, kPsi6, 0, kPsi6}}}},
    // bfloat16 parameters: a float32 master and a float32 buffer, K = 8 (2 + 2 + 8 Psi; zero2 on
    // 2 ranks 2 + 1 + 4 Psi)
    {{"--optimizer", "sgd", "--precision", "bf16-true"},
     "K = 8 (SGD, masters)",
     {{1, "single", {kPsi2, kPsi2, kPsi4, kPsi4, kPsi12, 0, kPsi12}},
      {2, "zero2", {kPsi2, kPsi2 / 2, kPsi2, kPsi2, kPsi7, 0, kPsi7}}}},
    // zero's offloaded optimizer state is the buffer's half: in the host column, not the device's
    {{"--optimizer", "sgd", "--offload-optimizer", "1"},
     "",
     {{2, "zero1", {kPsi4, kPsi4, 0, 0, kPsi8, kPsi2 + 2 * kPsi2, kPsi10}}}},
    // RMSprop keeps square_avg (4 Psi), Adagrad its sum (4 Psi): K = 4
    {{"--optimizer", "rmsprop"}, "K = 4 (RMSprop)", kOneBufferRows},
    {{"--optimizer", "adagrad"}, "K = 4 (Adagrad)", kOneBufferRows},
    // RMSprop with momentum > 0: a momentum buffer beside square_avg, K = 8
    {{"--optimizer", "rmsprop", "--momentum", "0.5"},
     "K = 8 (RMSprop)",
     {{1, "single", {kPsi4, kPsi4, kPsi8, 0, kPsi16, 0, kPsi16}},
      {2, "zero1", {kPsi4, kPsi4, kPsi4, 0, kPsi12, 0, kPsi12}},
      {2, "zero2", {kPsi4, kPsi2, kPsi4, 0, kPsi10, 0, kPsi10}}}},
    // bfloat16 parameters: a float32 master and a float32 sum, K = 8 (2 + 2 + 8 Psi)
    {{"--optimizer", "adagrad", "--precision", "bf16-true"},
     "K = 8 (Adagrad, masters)",
     {{1, "single", {kPsi2, kPsi2, kPsi4, kPsi4, kPsi12, 0, kPsi12}}}},
    // Adamax (exp_avg, exp_inf), NAdam and RAdam (exp_avg, exp_avg_sq): two float32 tensors per
    // parameter, K = 8 (NAdam's mu_product is one host float64 per parameter tensor, not per
    // element, and not counted); with bfloat16 parameters a float32 master beside them, K = 12
    // (2 + 2 + 12 Psi)
    {{"--optimizer", "adamax"}, "K = 8 (Adamax)", kTwoTensorRows},
    {{"--optimizer", "adamax", "--precision", "bf16-true"},
     "K = 12 (Adamax, masters)",
     kTwoTensorMasterRows},
    {{"--optimizer", "nadam"}, "K = 8 (NAdam)", kTwoTensorRows},
    {{"--optimizer", "nadam", "--precision", "bf16-true"},
     "K = 12 (NAdam, masters)",
     kTwoTensorMasterRows},
    {{"--optimizer", "radam"}, "K = 8 (RAdam)", kTwoTensorRows},
    {{"--optimizer", "radam", "--precision", "bf16-true"},
     "K = 12 (RAdam, masters)",
     kTwoTensorMasterRows},
};

/// Runs the cnn job's --estimate-memory 2 with c.flags; checks its parameter count, its K and
/// each of c.rows to 0.0015 MiB (the table's 3 decimals, and zero's rows pad each bucket to a
/// multiple of 2 elements).
void check_estimate(const Data& d, const EstimateCase& c) {
  JobResult r = run_job(plus(plus({"--model", "cnn", "--data-dir", d.root + "/data"}, c.flags),
                             {"--estimate-memory", "2"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("Psi = 421738 parameters") != std::string::npos);
  if (!c.k.empty()) CHECK_MESSAGE(r.out.find(c.k) != std::string::npos, r.out);
  for (const EstimateRow& want : c.rows) {
    CAPTURE(want.kind);
    CAPTURE(want.ranks);
    const std::vector<double> row = estimate_row(r.out, want.ranks, want.kind);
    REQUIRE(row.size() == 7);
    for (size_t i = 0; i < 7; ++i) {
      CAPTURE(i);
      CHECK(std::abs(row[i] - want.want[i]) <= 0.0015);
    }
  }
}

// --- dp, ddp, zero1 and zero2 on 2 ranks: one table of cases, one runner ---

/// The cnn job on 2 ranks with an optimizer's `flags` (and --weight-decay 1e-4): what rank 0 prints
/// of it (`summary`) and the sharded mode whose state goes through a checkpoint (`resumed`).
struct RanksCase {
  std::vector<std::string> flags;
  std::string summary;
  std::string resumed;
};

const std::vector<RanksCase> kRanksCases = {
    {{"--optimizer", "sgd", "--momentum", "0.8"}, "SGD lr 0.01 momentum 0.8 wd 0.0001", "zero1"},
    {{"--optimizer", "rmsprop", "--momentum", "0.5", "--lr", "0.001"},
     "RMSprop lr 0.001 momentum 0.5 wd 0.0001",
     "zero2"},
    {{"--optimizer", "adagrad", "--lr", "0.001"}, "Adagrad lr 0.001 wd 0.0001", "zero2"},
    {{"--optimizer", "adamax", "--lr", "0.001"}, "Adamax lr 0.001 wd 0.0001", "zero2"},
    {{"--optimizer", "nadam", "--lr", "0.001"}, "NAdam lr 0.001 wd 0.0001", "zero2"},
    {{"--optimizer", "radam", "--lr", "0.001"}, "RAdam lr 0.001 wd 0.0001", "zero2"},
};

/// Runs c on 2 ranks under ddp, zero1 and zero2, and in one process under dp (two replica
/// threads); checks that all end in ddp's state digest, and that c.resumed stopped after epoch 1
/// and resumed from its checkpoint ends there too.
void check_ranks_alike(const Data& d, const RanksCase& c) {
  const std::string& optimizer = c.flags[1];
  auto args = [&](const std::string& strategy, const std::string& ckpt) {
    return plus(plus(plus(d.cnn(optimizer + "_" + ckpt), {"--strategy", strategy}), c.flags),
                {"--weight-decay", "1e-4"});
  };
  auto run = [&](const std::string& strategy, const std::string& ckpt,
                 const std::vector<std::string>& flags) {
    auto r = sl::testing::run_ranks(2, sl_train_bin(), plus(args(strategy, ckpt), flags), 120);
    REQUIRE_MESSAGE(r.exit_code == 0, r.report());
    return r.rank_stdout[0];
  };
  const std::string ddp = run("ddp", "ddp", {});
  CHECK_MESSAGE(ddp.find(c.summary) != std::string::npos, ddp);
  for (const char* kind : {"zero1", "zero2"}) {
    CAPTURE(kind);
    const std::string z = run(kind, kind, {});
    CHECK_MESSAGE(state_digest_of(z) == state_digest_of(ddp), ddp, z);
  }
  JobResult dp = run_job(args("dp", "dp"));
  REQUIRE_MESSAGE(dp.code == 0, dp.out);
  CHECK_MESSAGE(state_digest_of(dp.out) == state_digest_of(ddp), ddp, dp.out);
  // the sharded state (momentum buffers, square_avg, sums, moments, NAdam's mu_products) goes
  // through the checkpoint
  run(c.resumed, "part", {"--stop-after-epochs", "1"});
  const std::string rest = run(c.resumed, "part", {"--resume", "1"});
  CHECK(rest.find("resumed from") != std::string::npos);
  CHECK_MESSAGE(state_digest_of(rest) == state_digest_of(ddp), ddp, rest);
}

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

TEST_CASE(
    "--optimizer rmsprop, adagrad, adamax, nadam and radam: train, resume bit-identical, L2 decay "
    "groups") {
  Data d("optimizer_trained");
  JobResult adamw = run_job(cnn_at_lr_1e3(d, "a", {}));
  REQUIRE_MESSAGE(adamw.code == 0, adamw.out);
  std::vector<std::string> digests = {state_digest_of(adamw.out)};
  for (const TrainCase& c : kTrainCases) {
    CAPTURE(c.ckpt);
    check_trained(d, c, digests);
  }
  // The optimizer and its momentum are the configuration's: a checkpoint resumes only under the
  // ones that wrote it.
  for (const auto& [ckpt, flags, want] :
       std::vector<std::tuple<std::string, std::vector<std::string>, std::string>>{
           {"r2", {}, "--optimizer RMSprop there, AdamW in this run"},
           {"r2", {"--optimizer", "adagrad"}, "--optimizer RMSprop there, Adagrad in this run"},
           {"r2",
            {"--optimizer", "rmsprop", "--momentum", "0.5"},
            "--momentum 0 there, 0.5 in this run"},
           {"g2", {"--optimizer", "sgd"}, "--optimizer Adagrad there, SGD in this run"},
           {"adamax2", {"--optimizer", "nadam"}, "--optimizer Adamax there, NAdam in this run"},
           {"nadam2", {"--optimizer", "radam"}, "--optimizer NAdam there, RAdam in this run"},
           {"radam2", {"--optimizer", "adamw"}, "--optimizer RAdam there, AdamW in this run"},
           {"a", {"--optimizer", "adamax"}, "--optimizer AdamW there, Adamax in this run"}}) {
    CAPTURE(ckpt);
    const std::string out = fails_with(plus(cnn_at_lr_1e3(d, ckpt, flags), {"--resume", "1"}),
                                       "was written with another configuration");
    CHECK_MESSAGE(out.find(want) != std::string::npos, out);
  }
  // Bad values fail before any work: Adagrad has no momentum, Adamax's, NAdam's and RAdam's betas
  // are fixed, RMSprop's momentum lies in [0, 1).
  const std::string other = "cnn: --momentum 0.9 applies to --optimizer sgd and rmsprop only, got ";
  for (const auto& [flags, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--optimizer", "adagrad", "--momentum", "0.9"},
            other + "--optimizer adagrad (which has no momentum)"},
           {{"--optimizer", "rmsprop", "--momentum", "1"},
            "cnn: --momentum must lie in [0, 1), got 1"},
           {{"--optimizer", "adamax", "--momentum", "0.9"},
            other + "--optimizer adamax (whose moments have their own fixed betas)"},
           {{"--optimizer", "nadam", "--momentum", "0.9"},
            other + "--optimizer nadam (whose moments have their own fixed betas)"},
           {{"--optimizer", "radam", "--momentum", "0.9"},
            other + "--optimizer radam (whose moments have their own fixed betas)"}}) {
    CAPTURE(message);
    fails_with(cnn_at_lr_1e3(d, "e", flags), message);
    CHECK_FALSE(std::filesystem::exists(d.dir("e")));
  }
}

TEST_CASE(
    "--rmsprop-alpha, --rmsprop-centered, --adagrad-lr-decay: taken, recorded, refused else") {
  Data d("optimizer_hyperparameters");
  auto with = [&](const std::string& optimizer, const std::string& ckpt,
                  const std::vector<std::string>& flags = {}) {
    return plus(plus(d.cnn(ckpt), {"--optimizer", optimizer, "--lr", "0.001"}), flags);
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

TEST_CASE("--estimate-memory with each optimizer: K from its state buffers, the MiB of each row") {
  Data d("estimate_optimizers");
  for (const EstimateCase& c : kEstimateCases) {
    const std::string flags = join(c.flags);
    CAPTURE(flags);
    check_estimate(d, c);
  }
}

TEST_CASE(
    "each optimizer on 2 ranks: dp, ddp, zero1 and zero2 end alike; the sharded state resumes" *
    needs_mpi("optimizers on 2 ranks")) {
  // Two ranks add each gradient element once (a + b, the same float in any collective) and each
  // update is elementwise (NAdam's mu_product and RAdam's rectification are per-parameter scalars
  // of the step count), so sharding the state changes no bit.
  Data d("optimizer_ranks");
  for (const RanksCase& c : kRanksCases) {
    const std::string flags = join(c.flags);
    CAPTURE(flags);
    check_ranks_alike(d, c);
  }
}
