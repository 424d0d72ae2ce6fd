// Strategies in one process: single and dp against the plain reference loop, and ddp/zero1/
// zero2 over a one-rank group (their multi-rank behaviour is tested under mpirun in
// tests/dist/ranks/test_strategy_ranks.cpp).
#include "../support/testing.h"
#include "dist/flat_strategy.h"
#include "support/tiny_training.h"

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

const TrainConfig kConfigs[] = {
    {.opt = OptKind::sgd},
    {.opt = OptKind::adam, .accum = 2, .clip = 0.5},
    {.opt = OptKind::adamw, .accum = 3, .clip = 0.3},
    {.opt = OptKind::lamb},
    {.opt = OptKind::lamb, .accum = 2, .clip = 0.4},
    {.opt = OptKind::rmsprop},
    {.opt = OptKind::adagrad, .accum = 2, .clip = 0.4},
    {.opt = OptKind::sgd_mixed},
    {.opt = OptKind::adam_mixed, .clip = 0.5},
    {.opt = OptKind::rmsprop_mixed},
    {.opt = OptKind::adamax, .clip = 0.4},
    {.opt = OptKind::nadam, .accum = 2},
    {.opt = OptKind::radam},
    // a gradient penalty built with grad(create_graph): its gradient is a second derivative
    {.opt = OptKind::adam, .penalty = 0.5},
    {.opt = OptKind::sgd, .accum = 2, .clip = 0.3, .penalty = 0.5},
};

}  // namespace

TEST_CASE("strategy names parse; unknown ones are a ValueError listing the choices") {
  CHECK(parse_strategy("zero2") == StrategyKind::zero2);
  CHECK(std::string(strategy_name(StrategyKind::dp)) == "dp");
  SL_CHECK_THROWS(parse_strategy("zero3"), ValueError,
                  "strategy: unknown strategy 'zero3' (expected single, dp, ddp, zero1 or zero2)");
}

TEST_CASE("single equals the plain training loop exactly") {
  for (const TrainConfig& c : kConfigs) {
    CAPTURE(c.str());
    if (c.accum != 1) continue;  // the reference has no micro-batches
    check_same_params(sl::testing::train_strategy("single", c, nullptr),
                      sl::testing::train_reference(c), 0, 0);
  }
}

TEST_CASE("dp over 2 and 3 logical CPU devices equals single") {
  for (const TrainConfig& c : kConfigs) {
    for (int k : {2, 3}) {
      CAPTURE(c.str());
      CAPTURE(k);
      // Replicas sum their shares' gradients in another order than one big batch: f32 rounding
      // (1e-7 relative per step) amplified over 10 Adam steps stays far below 1e-5.
      check_same_params(sl::testing::train_strategy("dp", c, nullptr, {.dp_replicas = k}),
                        sl::testing::train_reference(c), 1e-5, 1e-6);
    }
  }
}

TEST_CASE("dp's replica threads run under the caller's autocast scope") {
  manual_seed(5);
  auto net = std::make_shared<nn::Linear>(6, 3);
  optim::SGD sgd(net->parameters(), {.lr = 0.1});
  auto dp = make_strategy("dp", net, sgd, {.dp_replicas = 2, .replica_factory = [] {
                                             return std::make_shared<nn::Linear>(6, 3);
                                           }});
  Tensor x = randn({8, 6});
  Tensor ref, out;
  {
    AutocastGuard bf16(DeviceKind::cpu, DType::bf16);
    ref = net->forward(x);
    out = dp->forward(x);  // rows 4..7 run on cpu:1 in another thread
  }
  // Autocast lowers the linear layer to bfloat16 on both replicas. Without the
  // scope in the second thread its rows would come out in float32.
  REQUIRE(ref.dtype() == DType::bf16);
  CHECK(out.dtype() == DType::bf16);
  // Each row's products are the same bf16 inputs summed in float32 and rounded once to bf16; a
  // GEMM over 4 rows may sum in another order than over 8, which moves a result by at most one
  // bf16 rounding step (2^-8 relative).
  SL_CHECK_CLOSE(out.to(DType::f32), ref.to(DType::f32), 1.0 / 128, 1e-3);
}

TEST_CASE("ddp, zero1 and zero2 on one rank equal single") {
  auto pg = make_single_group();
  for (const TrainConfig& c : kConfigs) {
    RunResult ref = sl::testing::train_reference(c);
    for (const char* kind : {"ddp", "zero1", "zero2"}) {
      CAPTURE(c.str());
      CAPTURE(kind);
      // Micro-batches add gradients in another order than one batch (f32 rounding).
      check_same_params(sl::testing::train_strategy(kind, c, pg), ref, 1e-5, 1e-6);
    }
  }
}

TEST_CASE("a parameter without a gradient is left alone in every mode, as single leaves it") {
  // fc2 takes part in every other step's forward only. Single's optimizer skips it on the others
  // (its .grad is undefined): no weight decay, no moment decay, no step. The flat modes hold a
  // zero gradient for it there, which they must not apply (Note [Unused parameters]); zero's
  // per-parameter step counts keep Adam's and Lamb's bias corrections and Adagrad's lr decay,
  // and its per-parameter momentum flags SGD's first momentum step of a parameter first used
  // later (which copies the gradient instead of dampening it).
  auto pg = make_single_group();
  std::vector<TrainConfig> configs;
  for (OptKind ok : {OptKind::adamw, OptKind::sgd_mixed, OptKind::lamb, OptKind::rmsprop,
                     OptKind::adagrad, OptKind::adamax, OptKind::nadam}) {
    configs.push_back({.opt = ok, .steps = 5, .fc2_every = 2});
  }
  // RAdam's rectified branch from a parameter's step 6: fc2 used on every other of 12 steps
  configs.push_back({.opt = OptKind::radam, .steps = 12, .fc2_every = 2});
  // NAdam: fc2 first used at step 2, so its mu_product runs behind fc1's (split runs in zero)
  configs.push_back({.opt = OptKind::nadam, .steps = 5, .fc2_from = 2});
  configs.push_back({.opt = OptKind::sgd_dampened, .steps = 5, .fc2_from = 2});
  configs.push_back({.opt = OptKind::adamw, .steps = 3, .fc2_from = 100});  // never used
  for (const TrainConfig& c : configs) {
    CAPTURE(c.str());
    RunResult ref = sl::testing::train_reference(c);
    for (const char* kind : {"single", "ddp", "zero1", "zero2"}) {
      CAPTURE(std::string(kind));
      // one rank: the same kernels on the same numbers, so exactly the reference's values
      check_same_params(sl::testing::train_strategy(kind, c, pg), ref, 0, 0);
    }
  }
}

TEST_CASE("dp leaves a parameter alone when no replica computed its gradient") {
  // dp's master keeps .grad undefined unless some replica's forward used the parameter, so the
  // optimizer skips it as in single. With fc2_rank, fc2 is used by one replica only: its gradient
  // comes from that replica's share alone (the reference forwards the shares one by one, each
  // with its replica's fc2 setting; dp splits 12 rows into equal chunks for 2 and 3 replicas,
  // so the gathered output's mean is the mean of the shares' means).
  std::vector<TrainConfig> configs;
  for (OptKind ok : {OptKind::adamw, OptKind::sgd_mixed, OptKind::adagrad}) {
    configs.push_back({.opt = ok, .steps = 5, .fc2_every = 2});
  }
  configs.push_back({.opt = OptKind::sgd_dampened, .steps = 5, .fc2_from = 2});
  configs.push_back({.opt = OptKind::adamw, .steps = 3, .fc2_from = 100});  // never used
  for (int r : {0, 1, 2}) configs.push_back({.opt = OptKind::adamw, .steps = 5, .fc2_rank = r});
  for (const TrainConfig& c : configs) {
    for (int k : {2, 3}) {
      if (c.fc2_rank >= k) continue;
      CAPTURE(c.str());
      CAPTURE(k);
      RunResult ref = sl::testing::train_reference(c, c.fc2_rank >= 0 ? k : 1);
      // f32 summation order across replicas, as in the dp test above
      check_same_params(sl::testing::train_strategy("dp", c, nullptr, {.dp_replicas = k}), ref,
                        1e-5, 1e-6);
    }
  }
}

TEST_CASE("zero2 consumes gradients: no .grad, shard holds them; memory report by category") {
  auto pg = make_single_group();
  auto net = sl::testing::make_tiny_net();
  auto opt = sl::testing::make_optimizer(OptKind::adamw, *net);
  auto s = make_strategy("zero2", net, *opt, {.group = pg, .bucket_cap_bytes = 16});
  auto [x, y] = sl::testing::global_batch(0, 4);
  s->zero_grad();
  s->backward((s->forward(x) - y).square().mean());
  for (auto& [n, p] : net->named_parameters()) CHECK(!p.grad().defined());
  auto* fs = dynamic_cast<FlatStrategy*>(s.get());
  REQUIRE(fs);
  CHECK(fs->grad_shards()[0].abs().sum().item<float>() > 0);
  s->step();
  MemoryReport m = s->memory_report();
  CHECK(m.numel == 35 + 7 + 21 + 3 + 1);
  // f32 group 66 elements, f64 group 1 element
  CHECK(m.param_bytes == 66 * 4 + 8);
  CHECK(m.grad_bytes == 66 * 4 + 8);
  CHECK(m.optimizer_state_bytes == 2 * (66 * 4 + 8));
  CHECK(m.master_weight_bytes == 0);
  CHECK(m.comm_buffer_bytes > 0);  // staging buffers existed during backward
}

TEST_CASE("dynamic loss scaling: a non-finite step is skipped and the scale backs off") {
  auto pg = make_single_group();
  for (const char* kind : {"single", "ddp", "zero2"}) {
    CAPTURE(kind);
    auto net = sl::testing::make_tiny_net();
    auto opt = sl::testing::make_optimizer(OptKind::sgd, *net);
    optim::GradScalerOptions so;
    so.init_scale = 1024;
    so.growth_interval = 2;
    auto s = make_strategy(kind, net, *opt, {.group = pg, .loss_scaling = so});
    auto [x, y] = sl::testing::global_batch(0, 4);
    Tensor before = net->fc1->weight.detach().clone();
    x.select(0, 1).fill_(std::numeric_limits<double>::infinity());
    s->zero_grad();
    s->backward((s->forward(x) - y).square().mean());
    StepResult r = s->step();
    CHECK(!r.taken);
    CHECK(r.found_nonfinite);
    CHECK(r.loss_scale == 1024);
    CHECK(s->loss_scale() == 512);
    SL_CHECK_CLOSE(net->fc1->weight, before, 0, 0);
    // two clean steps: taken, gradients unscaled (the update equals an unscaled run's), growth
    auto [x2, y2] = sl::testing::global_batch(1, 4);
    for (int i = 0; i < 2; ++i) {
      s->zero_grad();
      s->backward((s->forward(x2) - y2).square().mean());
      CHECK(s->step().taken);
    }
    CHECK(s->loss_scale() == 1024);
  }
}

TEST_CASE("strategy errors") {
  auto net = sl::testing::make_tiny_net();
  optim::SGD partial({net->fc1->weight}, {.lr = 0.1});
  SL_CHECK_THROWS(make_strategy("ddp", net, partial, {.group = make_single_group()}), ValueError,
                  "make_strategy: trainable parameter 'scale' is not in the optimizer");
  auto opt = sl::testing::make_optimizer(OptKind::sgd, *net);
  SL_CHECK_THROWS(make_strategy("dp", net, *opt, {.dp_replicas = 2}), ValueError,
                  "dp: replica_factory is required");
  auto factory = [] { return std::static_pointer_cast<nn::Module>(sl::testing::make_tiny_net()); };
  SL_CHECK_THROWS(make_strategy("dp", net, *opt,
                                {.dp_devices = {kCPU, Device(DeviceKind::cpu, 1), kCPU},
                                 .replica_factory = factory}),
                  ValueError,
                  "dp: dp_devices lists cpu twice (at 0 and 2); each replica needs a device of "
                  "its own");
  // replicas on cpu:0..cpu:99 would pass the last device index (kMaxDevicesPerKind = 64)
  SL_CHECK_THROWS(
      make_strategy("dp", net, *opt, {.dp_replicas = 100, .replica_factory = factory}), ValueError,
      "dp: dp_replicas 100 from cpu would need cpu:99, past the last device index (63)");
  SL_CHECK_THROWS(
      make_strategy("zero2", net, *opt, {.group = make_single_group(), .max_grad_norm = -1}),
      ValueError, "make_strategy: max_grad_norm must be >= 0, got -1");
}

TEST_CASE("ddp, zero1 and zero2 refuse a backward with create_graph, naming the parameter") {
  // Their hooks reduce gradients as values: a .grad() with a graph would silently lose it.
  // A gradient penalty's usual form, grad(create_graph) then a plain backward, is trained in
  // the tables above (TrainConfig::penalty).
  for (const char* kind : {"ddp", "zero1", "zero2"}) {
    CAPTURE(kind);
    auto net = sl::testing::make_tiny_net();
    auto opt = sl::testing::make_optimizer(OptKind::sgd, *net);
    auto strategy = make_strategy(kind, net, *opt, {.group = make_single_group()});
    auto [x, y] = sl::testing::global_batch(0, 4);
    Tensor loss = (strategy->forward(x) - y).square().mean();
    try {
      loss.backward(Tensor(), false, /*create_graph=*/true);
      FAIL("no AutogradError");
    } catch (const AutogradError& e) {
      const std::string what = e.what();
      CHECK(what.find(std::string(kind) + ": parameter '") != std::string::npos);
      CHECK(what.find("create_graph") != std::string::npos);
    }
    // no .grad() is left holding its graph (a reference cycle through the parameter's
    // AccumulateGrad that would leak it)
    for (const Tensor& p : net->parameters()) {
      CHECK(!(p.grad().defined() && p.grad().requires_grad()));
    }
  }
}

TEST_CASE("sync_batchnorm: dp refuses it; on one rank BatchNorm stays local") {
  manual_seed(5);
  auto bn = std::make_shared<nn::BatchNorm1d>(3);
  auto net = std::make_shared<nn::Sequential>(
      std::initializer_list<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(4, 3), bn});
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  SL_CHECK_THROWS(
      make_strategy("dp", net, opt,
                    {.sync_batchnorm = true,
                     .replica_factory = [] { return std::make_shared<nn::Sequential>(); }}),
      ValueError, "make_strategy: sync_batchnorm needs one process per rank");
  for (const std::string kind : {"single", "ddp", "zero2"}) {
    CAPTURE(kind);
    auto s = make_strategy(kind, net, opt, {.group = make_single_group(), .sync_batchnorm = true});
    CHECK(s->synced_batchnorms() == 0);  // nothing to combine on one rank
    CHECK(bn->stats_sync == nullptr);
  }
}

TEST_CASE("reduce_dtype: a non-floating dtype and dp are refused; single trains as without it") {
  auto net = sl::testing::make_tiny_net();
  auto opt = sl::testing::make_optimizer(OptKind::sgd, *net);
  for (DType dt : {DType::i64, DType::i32, DType::b8}) {
    CAPTURE(dtype_name(dt));
    SL_CHECK_THROWS(
        make_strategy("ddp", net, *opt, {.group = make_single_group(), .reduce_dtype = dt}),
        DTypeError, "make_strategy: reduce_dtype must be a floating dtype");
  }
  SL_CHECK_THROWS(make_strategy("dp", net, *opt,
                                {.reduce_dtype = DType::bf16,
                                 .replica_factory = [] { return sl::testing::make_tiny_net(); }}),
                  ValueError, "make_strategy: reduce_dtype applies to gradients communicated");
  // One process communicates nothing: the option changes no bit.
  const TrainConfig c{.opt = OptKind::adamw, .steps = 4, .clip = 0.3};
  check_same_params(sl::testing::train_strategy("single", c, nullptr, {.reduce_dtype = DType::f16}),
                    sl::testing::train_strategy("single", c, nullptr), 0, 0);
}

TEST_CASE("offload_optimizer: refused for single and ddp, and for parameters on the CPU") {
  auto net = sl::testing::make_tiny_net();
  auto opt = sl::testing::make_optimizer(OptKind::adamw, *net);
  for (const char* kind : {"single", "ddp"}) {
    CAPTURE(kind);
    const std::string msg = std::string(
                                "make_strategy: offload_optimizer needs zero1 or zero2 (the "
                                "optimizer state of the rank's shard moves to the host), "
                                "not ") +
                            kind;
    SL_CHECK_THROWS(
        make_strategy(kind, net, *opt, {.group = make_single_group(), .offload_optimizer = true}),
        ValueError, msg.c_str());
  }
  SL_CHECK_THROWS(
      make_strategy("zero2", net, *opt, {.group = make_single_group(), .offload_optimizer = true}),
      ValueError,
      "zero2: offload_optimizer moves the optimizer state from the GPU to the host, "
      "but the parameters are on cpu already");
}

TEST_CASE("buckets are launched from the gradient hooks while backward still runs") {
  for (const char* kind : {"ddp", "zero1", "zero2"}) {
    CAPTURE(kind);
    auto pg = make_single_group();
    auto net = sl::testing::make_tiny_net();
    auto opt = sl::testing::make_optimizer(OptKind::sgd, *net);
    // fc1.weight is the first parameter of the forward, so its gradient arrives last; this
    // hook (registered before the strategy's) sees how many collectives were issued by then.
    int64_t issued_before_last = -1;
    net->fc1->weight.register_hook([&](const Tensor& g) {
      issued_before_last = static_cast<int64_t>(pg->next_seq());
      return g;
    });
    auto s = make_strategy(kind, net, *opt, {.group = pg, .bucket_cap_bytes = 16});
    auto [x, y] = sl::testing::global_batch(0, 4);
    s->zero_grad();
    uint64_t start = pg->next_seq();
    s->backward((s->forward(x) - y).square().mean());
    // buckets: [fc2.bias fc2.weight] [fc1.bias] [fc1.weight] (f32), [scale] (f64): the first
    // one went out before fc1.weight's gradient existed
    CHECK(issued_before_last >= static_cast<int64_t>(start) + 1);
    CHECK(pg->next_seq() == start + 4);  // one collective per bucket in all
  }
}

TEST_CASE("a small first bucket starts communicating before backward reaches the first layer") {
  // The tiny net's float32 parameters (66 elements, 264 bytes) fit one 25 MB bucket: without a
  // first cap their gradients wait for fc1's, which backward computes last; a first cap (1 MiB
  // by default, here 16 bytes) sends fc2's before. Observed with the profiler: the collectives
  // issued before fc1's LinearBackward (the last one) starts.
  for (const char* kind : {"ddp", "zero2"}) {
    for (int64_t first : {int64_t{16}, kDefaultBucketCapBytes}) {
      CAPTURE(kind);
      CAPTURE(first);
      auto pg = make_single_group();
      auto net = sl::testing::make_tiny_net();
      auto opt = sl::testing::make_optimizer(OptKind::sgd, *net);
      auto s = make_strategy(kind, net, *opt, {.group = pg, .first_bucket_cap_bytes = first});
      auto [x, y] = sl::testing::global_batch(0, 4);
      s->zero_grad();
      const uint64_t start = pg->next_seq();
      Tensor loss = (s->forward(x) - y).square().mean();
      profiler::start();
      s->backward(loss);
      const profiler::Profile p = profiler::stop();
      int64_t last_linear = -1;
      for (const profiler::Event& e : p.events) {
        if (e.category == profiler::Category::autograd && std::string(e.name) == "LinearBackward") {
          last_linear = e.start_ns;
        }
      }
      REQUIRE(last_linear >= 0);
      int issued_before = 0;
      for (const profiler::Event& e : p.events) {
        issued_before +=
            e.category == profiler::Category::comm && e.async && e.start_ns < last_linear;
      }
      // scale (the model's own parameter, so the first; a float64 bucket of its own) goes out at
      // once; fc2's gradients only with a first cap
      const bool small = first == 16;
      CHECK(issued_before == (small ? 2 : 1));
      // f32: [fc2.bias fc2.weight] [fc1.bias fc1.weight], or all four in one; f64: [scale]
      CHECK(pg->next_seq() == start + (small ? 3 : 2));
    }
  }
}

TEST_CASE("the reference run actually trains (the comparisons above are not vacuous)") {
  TrainConfig c{.opt = OptKind::adamw};
  RunResult trained = sl::testing::train_reference(c);
  auto init = sl::testing::make_tiny_net();
  auto ps = init->parameters();
  for (size_t i = 0; i < ps.size(); ++i) {
    CHECK((trained.params[i] - ps[i].detach()).abs().max().item<double>() > 1e-3);
  }
}

TEST_CASE("zero2 keeps no full gradient buffer: staging peaks at a bucket, not the model") {
  auto pg = make_single_group();
  auto net = sl::testing::make_tiny_net();
  auto opt = sl::testing::make_optimizer(OptKind::adam, *net);
  auto s = make_strategy("zero2", net, *opt, {.group = pg, .bucket_cap_bytes = 16});
  auto [x, y] = sl::testing::global_batch(0, 4);
  s->zero_grad();
  s->backward((s->forward(x) - y).square().mean());
  s->step();
  MemoryReport m = s->memory_report();
  const int64_t full_grads = 66 * 4 + 8, largest_bucket = 35 * 4;
  CHECK(m.comm_buffer_bytes >= largest_bucket);
  // scale's (f64) bucket waits for the three f32 buckets before it; each f32 bucket is freed
  // when its reduce-scatter completes (at once on one rank)
  CHECK(m.comm_buffer_bytes <= largest_bucket + 8);
  CHECK(m.comm_buffer_bytes < full_grads);
}

TEST_CASE("lamb with bf16 parameters and master weights: zero1/zero2 on one rank equal single") {
  // One rank owns every piece, so each parameter is one segment of a run and the sharded step
  // is the unsharded one's arithmetic on the same float32 master values: bit for bit.
  auto pg = make_single_group();
  auto train = [&](const std::string& kind) {
    auto net = sl::testing::make_tiny_net();
    net->to(DType::bf16);
    auto [decay, no_decay] = optim::split_no_decay(net->named_parameters(), {"bias", "scale"});
    optim::Lamb opt(std::vector<optim::ParamGroup<optim::LambOptions>>{
        {decay, {.lr = 0.02, .weight_decay = 0.05, .master_weights = true}},
        {no_decay, {.lr = 0.02, .weight_decay = 0.0, .master_weights = true}}});
    auto s = make_strategy(kind, net, opt, {.group = pg, .bucket_cap_bytes = 16});
    for (int step = 0; step < 4; ++step) {
      auto [x, y] = sl::testing::global_batch(step, 8);
      s->zero_grad();
      s->backward((s->forward(x.to(DType::bf16)) - y.to(DType::bf16)).square().mean());
      s->step();
    }
    if (kind != "single") CHECK(s->memory_report().master_weight_bytes > 0);
    std::vector<Tensor> out;
    for (auto& [n, p] : net->named_parameters()) out.push_back(p.detach().clone());
    return out;
  };
  std::vector<Tensor> ref = train("single");
  for (const char* kind : {"zero1", "zero2"}) {
    CAPTURE(std::string(kind));
    std::vector<Tensor> z = train(kind);
    REQUIRE(z.size() == ref.size());
    for (size_t i = 0; i < z.size(); ++i) {
      CHECK(z[i].dtype() == DType::bf16);
      SL_CHECK_CLOSE(z[i], ref[i], 0, 0);
    }
  }
}
