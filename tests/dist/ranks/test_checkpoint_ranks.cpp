// Checkpoint scenarios, launched one at a time by tests/dist/test_dist_launch.cpp with
// SL_TEST_CKPT_DIR (a fresh directory), SL_TEST_CKPT_MODE (the strategy), SL_TEST_CKPT_OPT
// ("adam", "lamb" or "nadam": see config()) and, for resume,
// SL_TEST_CKPT_EXACT=1 when the continuation must be bit-identical:
//   "scenario: save"   trains 5 steps, saves DIR/ck, records the full optimizer state and the
//                      uninterrupted run's next 5 global losses and final parameters (rank 0
//                      writes DIR/ref.safetensors);
//   "scenario: resume" loads DIR/ck with another world size and/or mode, checks the optimizer
//                      state bit for bit, trains the same 5 steps and compares.
#include <cstdlib>
#include <filesystem>

#include "../../support/testing.h"
#include "../support/tiny_training.h"
#include "dist/checkpoint.h"
#include "nn/serialize/safetensors.h"

using namespace sl;
using namespace sl::dist;
using sl::testing::OptKind;
using sl::testing::TinyTrainer;
using sl::testing::TrainConfig;

namespace {

constexpr int kSaveAt = 5, kSteps = 10;

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

TrainConfig config() {
  const std::string opt = env("SL_TEST_CKPT_OPT");
  if (opt == "lamb") return {.opt = OptKind::lamb, .clip = 0.5};
  // NAdam's per-parameter scalar mu_product: fc2 first used at step 2, so at the save (step 5)
  // fc2's product is 3 steps' and fc1's 5 steps'. One large bucket per dtype: each rank holds a
  // contiguous range of the flat buffer, so a parameter straddles a boundary and a rank can hold
  // none of others (on 2 ranks rank 1 holds part of fc1.weight only; on 3, rank 0 none of fc1),
  // whose products it must still know to save and to hand to their new owners.
  if (opt == "nadam") {
    return {.opt = OptKind::nadam, .clip = 0.5, .bucket_cap = int64_t{1} << 20, .fc2_from = 2};
  }
  REQUIRE_MESSAGE(opt == "adam", "SL_TEST_CKPT_OPT must be adam, lamb or nadam, got '", opt, "'");
  return {.opt = OptKind::adam, .clip = 0.5};
}

/// Global-batch losses: the mean over ranks of each rank's mean loss (equal shares).
Tensor global_losses(const std::vector<double>& mine) {
  Tensor t = from_vector<double>(mine);
  world()->allreduce(t, ReduceOp::avg)->wait();
  return t;
}

}  // namespace

TEST_CASE("scenario: save") {
  std::string dir = env("SL_TEST_CKPT_DIR"), mode = env("SL_TEST_CKPT_MODE");
  REQUIRE(!dir.empty());
  TinyTrainer t(mode, config(), world());
  t.run(0, kSaveAt);
  save_sharded_checkpoint(dir + "/ck", *t.strategy, t.extra());
  serialize::StateDict ref = full_optimizer_state(*t.strategy);
  ref.insert("losses", global_losses(t.run(kSaveAt, kSteps)));
  auto named = t.net->named_parameters();
  for (const auto& [name, p] : named) ref.insert("param/" + name, p.detach().clone());
  if (world()->rank() == 0) serialize::save_safetensors(dir + "/ref.safetensors", ref);
  world()->barrier()->wait();
}

TEST_CASE("scenario: resume") {
  std::string dir = env("SL_TEST_CKPT_DIR"), mode = env("SL_TEST_CKPT_MODE");
  bool exact = std::string(env("SL_TEST_CKPT_EXACT")) == "1";
  REQUIRE(!dir.empty());
  serialize::StateDict ref = serialize::load_safetensors(dir + "/ref.safetensors");
  TinyTrainer t(mode, config(), world());
  t.restore(load_sharded_checkpoint(dir + "/ck", *t.strategy));
  CHECK(t.strategy->steps_taken() == kSaveAt);
  // optimizer state after resharding: bit for bit
  serialize::StateDict state = full_optimizer_state(*t.strategy);
  for (const auto& [k, v] : state) {
    CAPTURE(k);
    REQUIRE(ref.contains(k));
    CHECK(v.dtype() == ref.at(k).dtype());
    SL_CHECK_CLOSE(v, ref.at(k), 0, 0);
  }
  Tensor losses = global_losses(t.run(kSaveAt, kSteps));
  auto named = t.net->named_parameters();
  if (exact) {
    SL_CHECK_CLOSE(losses, ref.at("losses"), 0, 0);
    for (const auto& [name, p] : named) SL_CHECK_CLOSE(p, ref.at("param/" + name), 0, 0);
  } else {
    // Another world size sums the gradient shares in another order: f32 rounding over 5 steps.
    SL_CHECK_CLOSE(losses, ref.at("losses"), 1e-5, 1e-7);
    for (const auto& [name, p] : named) SL_CHECK_CLOSE(p, ref.at("param/" + name), 1e-5, 1e-6);
  }
}
