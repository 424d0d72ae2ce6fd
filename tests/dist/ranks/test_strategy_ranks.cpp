// Strategies across ranks (run under mpirun with 2 and 3 ranks): ddp equals the one-process
// reference on the same global batch; zero1 and zero2 equal ddp; every rank skips a step whose
// gradients hold an inf on one rank; identical runs are bit-identical.
#include "../../support/testing.h"
#include "../support/tiny_training.h"
#include "dist/checkpoint.h"
#include "dist/flat_layout.h"
#include "dist/flat_strategy.h"
#include "dist/process_group.h"

using namespace sl;
using namespace sl::dist;
using sl::testing::OptKind;
using sl::testing::RunResult;
using sl::testing::TrainConfig;

namespace {

void check_same_params(const RunResult& a, const RunResult& b, double rtol, double atol) {
  REQUIRE(a.params.size() == b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) {
    CAPTURE(i);
    SL_CHECK_CLOSE(a.params[i], b.params[i], rtol, atol);
  }
}

/// Rank 0's tensor equals every other rank's, bit for bit.
void check_same_on_every_rank(const Tensor& t) {
  auto pg = world();
  Tensor mine = t.to(DType::f64).contiguous().clone();
  Tensor root = mine.clone();
  pg->broadcast(root, 0)->wait();
  Tensor differs = full({1}, (mine - root).abs().max().item<double>(), {.dtype = DType::f64});
  pg->allreduce(differs, ReduceOp::max)->wait();
  CHECK(differs.item<double>() == 0.0);
}

/// How many of the tiny net's parameters have pieces on more than one rank of `pg` under the
/// flat layout of config c (its bucket size).
int params_split_across_ranks(const ProcessGroupPtr& pg, const TrainConfig& c) {
  auto net = sl::testing::make_tiny_net();
  std::vector<ParamSpec> specs;
  for (const auto& [n, p] : net->named_parameters()) specs.push_back({p.numel(), p.dtype()});
  FlatLayout layout(specs, pg->size(), c.bucket_cap);
  std::vector<int> owners(specs.size(), 0);
  for (int r = 0; r < pg->size(); ++r) {
    for (const Piece& pc : layout.pieces_of_rank(r)) owners[static_cast<size_t>(pc.param)] += 1;
  }
  int split = 0;
  for (int o : owners) split += o > 1 ? 1 : 0;
  return split;
}

}  // namespace

TEST_CASE("ddp equals the one-process reference; zero1 and zero2 equal ddp") {
  auto pg = world();
  const TrainConfig configs[] = {
      {.opt = OptKind::sgd},
      {.opt = OptKind::sgd, .accum = 2, .clip = 0.2},
      {.opt = OptKind::adam},
      {.opt = OptKind::adam, .accum = 2, .clip = 0.3},
      {.opt = OptKind::adamw, .clip = 0.3},
      {.opt = OptKind::adamw, .accum = 2},
      {.opt = OptKind::rmsprop, .clip = 0.3},
      {.opt = OptKind::adagrad, .accum = 2},
      {.opt = OptKind::adamax, .clip = 0.3},
      {.opt = OptKind::nadam, .accum = 2},
      // NAdam's per-parameter scalar mu_product, with the parameters split between ranks: fc2
      // first used at step 2, so its product runs 2 steps behind fc1's; with clipping
      {.opt = OptKind::nadam, .steps = 6, .fc2_from = 2},
      {.opt = OptKind::nadam, .clip = 0.3},
      {.opt = OptKind::radam},
      // a gradient penalty (double backward) in the loss
      {.opt = OptKind::adam, .penalty = 0.5},
      {.opt = OptKind::sgd, .accum = 2, .clip = 0.3, .penalty = 0.5},
  };
  for (const TrainConfig& c : configs) {
    CAPTURE(c.str());
    // fc1.weight, fc1.bias, fc2.weight and fc2.bias straddle a rank boundary (16-byte buckets):
    // a state that one rank kept for its piece only would part from ddp's
    REQUIRE(params_split_across_ranks(pg, c) >= 3);
    RunResult ref = sl::testing::train_reference(c);
    RunResult ddp = sl::testing::train_strategy("ddp", c, pg);
    // The ranks' shares are summed in another order than one batch (f32 rounding).
    check_same_params(ddp, ref, 1e-5, 1e-6);
    for (const char* kind : {"zero1", "zero2"}) {
      CAPTURE(kind);
      RunResult z = sl::testing::train_strategy(kind, c, pg);
      check_same_params(z, ddp, 1e-5, 1e-6);
      for (const auto& r : z.steps) CHECK(r.taken);
      for (const Tensor& p : z.params) check_same_on_every_rank(p);
    }
  }
}

TEST_CASE("lamb: zero1 and zero2 equal ddp and the reference, with parameters split across ranks") {
  // LAMB's trust ratio is over whole parameters; with the tests' 16-byte buckets every
  // parameter has a bucket of its own, cut into one slice per rank, so each parameter larger
  // than the world size is split between ranks. A rank that took the norms of its piece only
  // would apply another ratio than ddp (which sees whole parameters).
  auto pg = world();
  const TrainConfig c{.opt = OptKind::lamb};
  // fc1.weight, fc1.bias, fc2.weight and fc2.bias straddle a boundary
  REQUIRE(params_split_across_ranks(pg, c) >= 3);
  RunResult ref = sl::testing::train_reference(c);
  RunResult ddp = sl::testing::train_strategy("ddp", c, pg);
  // ddp: the ranks' gradient shares are summed in another order than one batch (f32 rounding)
  check_same_params(ddp, ref, 1e-5, 1e-6);
  for (const char* kind : {"zero1", "zero2"}) {
    CAPTURE(std::string(kind));
    RunResult z = sl::testing::train_strategy(kind, c, pg);
    // the same averaged gradients as ddp; the squared norms are summed per piece and then over
    // ranks, in another order than ddp's whole-tensor sum (double), which can flip the last
    // bit of lr * r in float: f32 rounding over 10 steps, as the other optimizers
    check_same_params(z, ddp, 1e-5, 1e-6);
    for (const auto& r : z.steps) CHECK(r.taken);
    for (const Tensor& p : z.params) check_same_on_every_rank(p);
  }
}

TEST_CASE("nadam: every rank's mu_product of every parameter equals ddp's, split or not held") {
  // NAdam keeps a scalar per parameter that its step reads; zero runs the step on pieces, so each
  // rank advances the product of every stepped parameter, whether it holds a piece of it, part of
  // it or all of it, and the sharded checkpoint saves one rank's. ddp's come from optim::NAdam
  // on whole parameters (another code path). fc2 first used at step 2: its product runs behind.
  // 16-byte buckets cut every parameter between the ranks; one large bucket per dtype gives each
  // rank a contiguous range, so some rank holds none of some parameter (rank 0 included).
  auto pg = world();
  for (int64_t cap : {int64_t{16}, int64_t{1} << 20}) {
    const TrainConfig c{.opt = OptKind::nadam, .steps = 5, .bucket_cap = cap, .fc2_from = 2};
    CAPTURE(cap);
    REQUIRE(params_split_across_ranks(pg, c) >= 1);
    sl::testing::TinyTrainer ddp("ddp", c, pg);
    ddp.run(0, c.steps);
    const serialize::StateDict want = full_optimizer_state(*ddp.strategy);
    size_t products = 0;
    for (const auto& [k, v] : want) products += k.rfind("mu_product/", 0) == 0 ? 1 : 0;
    REQUIRE(products == ddp.net->named_parameters().size());  // every parameter stepped by now
    for (const char* kind : {"zero1", "zero2"}) {
      CAPTURE(std::string(kind));
      sl::testing::TinyTrainer z(kind, c, pg);
      z.run(0, c.steps);
      const serialize::StateDict got = full_optimizer_state(*z.strategy);
      CHECK(got.keys() == want.keys());
      for (const auto& [k, v] : want) {
        CAPTURE(k);
        REQUIRE(got.contains(k));
        if (k.rfind("mu_product/", 0) == 0 || k.rfind("step/", 0) == 0) {
          // a product of step-count functions in the same order: exact; and every rank's own
          SL_CHECK_CLOSE(got.at(k), v, 0, 0);
          check_same_on_every_rank(got.at(k));
        } else {
          // exp_avg, exp_avg_sq: the same averaged gradients as the main table's (f32 rounding)
          SL_CHECK_CLOSE(got.at(k), v, 1e-5, 1e-7);
        }
      }
      // and what each rank itself holds (not only the gathered state): its product of every
      // parameter, which the next step of a piece it is given (another world size) would read
      auto* flat = dynamic_cast<dist::FlatStrategy*>(z.strategy.get());
      REQUIRE(flat);
      const auto named = z.net->named_parameters();
      for (size_t i = 0; i < named.size(); ++i) {
        CAPTURE(named[i].first);
        CHECK(flat->sharded_optimizer()->mu_product(static_cast<int>(i)) ==
              want.at("mu_product/" + named[i].first).item<double>());
      }
    }
  }
}

TEST_CASE("a parameter one rank uses is updated on every rank; one no rank uses is left alone") {
  // fc2 takes part in rank 0's forward on even steps only: on those, every rank must apply the
  // average of rank 0's gradient and the others' zeros (the other ranks have no gradient of
  // their own for it); on odd steps no rank has one and the optimizer must skip it
  // (Note [Unused parameters]). The reference is one process whose loss is the mean of the
  // ranks' shares, each forwarded with its rank's setting.
  auto pg = world();
  for (OptKind ok : {OptKind::adamw, OptKind::sgd_mixed, OptKind::adagrad, OptKind::nadam}) {
    const TrainConfig c{.opt = ok, .steps = 5, .fc2_every = 2, .fc2_rank = 0};
    CAPTURE(c.str());
    RunResult ref = sl::testing::train_reference(c, pg->size());
    for (const char* kind : {"ddp", "zero1", "zero2"}) {
      CAPTURE(std::string(kind));
      RunResult r = sl::testing::train_strategy(kind, c, pg);
      // the ranks' shares are summed in another order than the reference's (f32 rounding)
      check_same_params(r, ref, 1e-5, 1e-6);
      for (const Tensor& p : r.params) check_same_on_every_rank(p);
    }
  }
}

TEST_CASE("an inf in one rank's gradients makes every rank skip that step") {
  auto pg = world();
  TrainConfig c{.opt = OptKind::adam, .steps = 5, .inf_step = 2, .inf_rank = pg->size() - 1};
  for (const char* kind : {"ddp", "zero1", "zero2"}) {
    CAPTURE(kind);
    RunResult r = sl::testing::train_strategy(kind, c, pg);
    for (int s = 0; s < c.steps; ++s) {
      CAPTURE(s);
      CHECK(r.steps[static_cast<size_t>(s)].taken == (s != c.inf_step));
      CHECK(r.steps[static_cast<size_t>(s)].found_nonfinite == (s == c.inf_step));
    }
    for (const Tensor& p : r.params) {
      CHECK(p.isfinite().all().item<bool>());
      check_same_on_every_rank(p);
    }
  }
}

TEST_CASE("two identical zero2 and ddp runs are bit-identical") {
  auto pg = world();
  TrainConfig c{.opt = OptKind::adamw, .accum = 2, .clip = 0.3};
  for (const char* kind : {"ddp", "zero2"}) {
    CAPTURE(kind);
    RunResult a = sl::testing::train_strategy(kind, c, pg);
    RunResult b = sl::testing::train_strategy(kind, c, pg);
    check_same_params(a, b, 0, 0);
    CHECK(a.losses == b.losses);
  }
}

TEST_CASE("ddp and zero broadcast parameters at start and buffers before each forward") {
  auto pg = world();
  struct Counting : nn::Module {
    Counting() : Module("Counting") {
      lin = register_module("lin", std::make_shared<nn::Linear>(2, 2));
      seen = register_buffer("seen", zeros({3}));
    }
    std::shared_ptr<nn::Linear> lin;
    Tensor seen;
    Tensor forward(const Tensor& x) override {
      {
        NoGradGuard ng;
        seen.add_(1.0);  // like BatchNorm's running statistics: changes in forward
      }
      return lin->forward(x);
    }
  };
  for (const char* kind : {"ddp", "zero1", "zero2"}) {
    CAPTURE(kind);
    manual_seed(100 + static_cast<uint64_t>(pg->rank()));  // every rank starts different
    auto net = std::make_shared<Counting>();
    {
      NoGradGuard ng;
      net->seen.fill_(10.0 * pg->rank());
    }
    optim::SGD opt(net->parameters(), {.lr = 0.1});
    auto s = make_strategy(kind, net, opt, {.group = pg});
    for (auto& [n, p] : net->named_parameters()) check_same_on_every_rank(p);
    check_same_on_every_rank(net->seen);  // rank 0's: 0
    CHECK(net->seen.to_vector<float>() == std::vector<float>{0, 0, 0});
    {
      NoGradGuard ng;
      net->seen.fill_(5.0 + pg->rank());  // ranks drift apart between forwards
    }
    s->zero_grad();
    s->backward(s->forward(ones({1, 2})).sum());
    s->step();
    CHECK(net->seen.to_vector<float>() == std::vector<float>{6, 6, 6});  // rank 0's 5, + 1
  }
}
