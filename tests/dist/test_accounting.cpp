// estimate_memory (dist/accounting.h) on one process: single and dp against what they hold after
// a step, to the byte, and its errors. ddp/zero1/zero2 on 2-4 ranks are compared in
// tests/dist/ranks/test_accounting_ranks.cpp, the offloaded bytes in
// tests/cuda/test_cuda_offload.cpp.
#include "../support/testing.h"
#include "dist/accounting.h"
#include "support/tiny_training.h"

using namespace sl;
using namespace sl::dist;

namespace {

void check_same_model_states(const MemoryReport& est, const MemoryReport& m) {
  INFO(m.str(), "\nestimated:\n", est.str());
  CHECK(est.strategy == m.strategy);
  CHECK(est.numel == m.numel);
  CHECK(est.param_bytes == m.param_bytes);
  CHECK(est.grad_bytes == m.grad_bytes);
  CHECK(est.optimizer_state_bytes == m.optimizer_state_bytes);
  CHECK(est.master_weight_bytes == m.master_weight_bytes);
  CHECK(est.offloaded_bytes == m.offloaded_bytes);
}

}  // namespace

TEST_CASE("accounting: estimate_memory matches single and dp after a step") {
  using sl::testing::OptKind;
  for (OptKind k : {OptKind::sgd, OptKind::adam, OptKind::adamw, OptKind::lamb, OptKind::rmsprop,
                    OptKind::adagrad, OptKind::adamax, OptKind::nadam, OptKind::radam}) {
    for (const std::string kind : {"single", "dp"}) {
      CAPTURE(kind);
      CAPTURE(sl::testing::opt_name(k));
      auto net = sl::testing::make_tiny_net();
      auto opt = sl::testing::make_optimizer(k, *net);
      StrategyOptions so{.dp_replicas = 2,
                         .replica_factory = [] { return sl::testing::make_tiny_net(); }};
      MemoryReport est = estimate_memory(parse_strategy(kind), *net, *opt, 1, so);
      auto s = make_strategy(kind, net, *opt, so);
      auto [x, y] = sl::testing::global_batch(0, 12);
      s->zero_grad();
      s->backward((s->forward(x) - y).square().mean());
      REQUIRE(s->step().taken);
      check_same_model_states(est, s->memory_report());
      // the rules, so that a match of two zeros would show: Adam-like optimizers keep two
      // tensors of each parameter's size (the tiny net's float32 and float64 parameters)
      if (k != OptKind::sgd && k != OptKind::rmsprop && k != OptKind::adagrad) {
        CHECK(est.optimizer_state_bytes == 2 * est.param_bytes);
      }
      if (k == OptKind::adagrad) CHECK(est.optimizer_state_bytes == est.param_bytes);
    }
  }
}

TEST_CASE("accounting: estimate_memory keeps float32 state beside bf16 parameters' masters") {
  auto net = sl::testing::make_tiny_net();
  net->fc1->to(DType::bf16);
  optim::Adam opt(net->parameters(), {.amsgrad = true, .master_weights = true});
  MemoryReport est = estimate_memory(StrategyKind::single, *net, opt, 1);
  const int64_t bf16 = net->fc1->weight.numel() + net->fc1->bias.numel();
  const int64_t f32 = net->fc2->weight.numel() + net->fc2->bias.numel();
  CHECK(est.master_weight_bytes == 4 * bf16);
  CHECK(est.optimizer_state_bytes == 3 * (4 * bf16 + 4 * f32 + 8 * net->scale.numel()));
  CHECK(est.param_bytes == 2 * bf16 + 4 * f32 + 8 * net->scale.numel());
}

TEST_CASE("accounting: estimate_memory's errors") {
  auto net = sl::testing::make_tiny_net();
  auto opt = sl::testing::make_optimizer(sl::testing::OptKind::adamw, *net);
  SL_CHECK_THROWS(estimate_memory(StrategyKind::zero2, *net, *opt, 0), ValueError,
                  "estimate_memory: world_size must be >= 1, got 0");
  SL_CHECK_THROWS(estimate_memory(StrategyKind::single, *net, *opt, 4), ValueError,
                  "estimate_memory: single trains on one rank, got world_size 4");
  SL_CHECK_THROWS(estimate_memory(StrategyKind::ddp, *net, *opt, 2, {.offload_optimizer = true}),
                  ValueError, "offload_optimizer needs zero1 or zero2");
  SL_CHECK_THROWS(estimate_memory(StrategyKind::zero1, *net, *opt, 2, {.bucket_cap_bytes = 0}),
                  ValueError, "bucket caps must be >= 1, got 0");
  auto other = sl::testing::make_tiny_net();
  SL_CHECK_THROWS(estimate_memory(StrategyKind::zero2, *other, *opt, 2), ValueError,
                  "estimate_memory: trainable parameter 'scale' is not in the optimizer");
  // offload is planned whatever the parameters' device (here the CPU)
  MemoryReport off =
      estimate_memory(StrategyKind::zero2, *net, *opt, 2, {.offload_optimizer = true});
  CHECK(off.optimizer_state_bytes == 0);
  CHECK(off.offloaded_bytes > 0);
}
