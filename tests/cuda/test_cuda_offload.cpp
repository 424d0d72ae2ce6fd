// ZeRO with the optimizer offloaded to the host (StrategyOptions::offload_optimizer, Note
// [Optimizer offload]): parameters on the GPU, state and update on the CPU. The same training
// as with the state on the GPU (SGD, AdamW and Lamb; float32 and bf16 with fp32 master
// weights), the GPU memory it frees, and sharded checkpoints that move between the two
// placements. On the fake GPU (Note [Fake GPU]) both placements run the CPU's kernels.
#include <unistd.h>
#include <filesystem>

#include "../dist/support/tiny_training.h"
#include "core/allocator.h"
#include "cuda_testing.h"
#include "dist/accounting.h"
#include "dist/checkpoint.h"
#include "dist/flat_strategy.h"
#include "optim/adam.h"

using namespace sl;
using namespace sl::dist;
using sl::testing::kGPU;
using sl::testing::OptKind;
using sl::testing::TrainConfig;

namespace {

/// The tiny net on the GPU, its optimizer, the scheduler and a strategy over a one-rank NCCL
/// group. `bf16`: the two Linear layers in bf16 with fp32 master weights, the float64 `scale`
/// as it is (two dtype groups: one with masters, one updated through the host's parameter copy).
struct GpuRun {
  GpuRun(const std::string& kind, const TrainConfig& c, bool offload, bool bf16 = false)
      : config(c) {
    net = sl::testing::make_tiny_net();
    net->to(kGPU);
    if (bf16) {
      net->fc1->to(DType::bf16);
      net->fc2->to(DType::bf16);
      auto [decay, no_decay] = optim::split_no_decay(net->named_parameters(), {"bias", "scale"});
      opt = std::make_unique<optim::AdamW>(std::vector<optim::ParamGroup<optim::AdamWOptions>>{
          {decay, {.lr = 0.02, .weight_decay = 0.05, .master_weights = true}},
          {no_decay, {.lr = 0.02, .weight_decay = 0, .master_weights = true}}});
    } else {
      opt = sl::testing::make_optimizer(c.opt, *net);
    }
    sched = std::make_unique<optim::StepLR>(*opt, 3, 0.5);
    strategy = make_strategy(kind, net, *opt,
                             {.group = make_nccl_group(make_single_group(), kGPU),
                              .bucket_cap_bytes = c.bucket_cap,
                              .max_grad_norm = c.clip,
                              .offload_optimizer = offload});
  }
  void run(int from, int to) {
    const DType dt = net->fc1->weight.dtype();
    for (int step = from; step < to; ++step) {
      auto [x, y] = sl::testing::global_batch(step, config.global_batch);
      x = x.to(kGPU).to(dt);
      y = y.to(kGPU).to(dt);
      strategy->zero_grad();
      int64_t micro = config.global_batch / config.accum;
      for (int m = 0; m < config.accum; ++m) {
        auto sync = strategy->no_sync(m + 1 < config.accum);
        Tensor out = strategy->forward(x.narrow(0, m * micro, micro));
        Tensor loss = (out - y.narrow(0, m * micro, micro)).to(DType::f32).square().mean();
        strategy->backward(loss / double(config.accum));
      }
      CHECK(strategy->step().taken);
      sched->step();
    }
  }
  std::vector<Tensor> params() const {
    std::vector<Tensor> out;
    for (const auto& [n, p] : net->named_parameters()) out.push_back(p.detach().cpu());
    return out;
  }
  ShardedOptimizer& sharded() {
    return *dynamic_cast<FlatStrategy&>(*strategy).sharded_optimizer();
  }

  TrainConfig config;
  std::shared_ptr<sl::testing::TinyNet> net;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<optim::StepLR> sched;
  std::unique_ptr<Strategy> strategy;
};

void check_equal_params(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    SL_CHECK_CLOSE(a[i], b[i], 0, 0);
  }
}

}  // namespace

TEST_CASE("offload_optimizer: zero1/zero2 with the state on the host train as with it on the GPU" *
          sl::testing::needs_gpu()) {
  const TrainConfig configs[] = {
      {.opt = OptKind::sgd, .steps = 4},
      {.opt = OptKind::adamw, .steps = 4, .accum = 2, .clip = 0.3},
      {.opt = OptKind::lamb, .steps = 4},
  };
  for (const TrainConfig& c : configs) {
    for (const char* kind : {"zero1", "zero2"}) {
      CAPTURE(c.str());
      CAPTURE(kind);
      GpuRun on_gpu(kind, c, false), offloaded(kind, c, true);
      CHECK(!on_gpu.sharded().offloaded());
      CHECK(offloaded.sharded().offloaded());
      on_gpu.run(0, c.steps);
      offloaded.run(0, c.steps);
      for (const ShardState& s : offloaded.sharded().state()) {
        for (const auto& [name, t] : s.named()) {
          CAPTURE(name);
          CHECK(t.device() == kCPU);
        }
      }
      if (c.opt == OptKind::lamb && !sl::testing::fake_gpu_installed()) {
        // LAMB's norms are sums whose order differs between the GPU's kernels and the CPU's:
        // f32 rounding of the trust ratio over 4 steps of lr 0.02
        for (size_t i = 0; i < on_gpu.params().size(); ++i) {
          SL_CHECK_CLOSE(offloaded.params()[i], on_gpu.params()[i], 1e-5, 1e-6);
        }
      } else {
        // SGD and AdamW: the CUDA kernels round every statement as the CPU's do (Note [Optimizer
        // kernels over flat spans]); on the fake GPU both are the CPU's kernels
        check_equal_params(offloaded.params(), on_gpu.params());
      }
    }
  }
}

TEST_CASE("offload_optimizer: bf16 parameters update fp32 master weights on the host" *
          sl::testing::needs_gpu()) {
  const TrainConfig c{.opt = OptKind::adamw, .steps = 4};
  GpuRun on_gpu("zero2", c, false, true), offloaded("zero2", c, true, true);
  on_gpu.run(0, c.steps);
  offloaded.run(0, c.steps);
  check_equal_params(offloaded.params(), on_gpu.params());
  CHECK(offloaded.net->fc1->weight.dtype() == DType::bf16);
  const FlatLayout& L = dynamic_cast<FlatStrategy&>(*offloaded.strategy).flat().layout();
  REQUIRE(L.groups().size() == 2);
  for (size_t g = 0; g < L.groups().size(); ++g) {
    const ShardState& s = offloaded.sharded().state()[g];
    CAPTURE(dtype_name(L.groups()[g].dtype));
    CHECK(s.master.defined() == (L.groups()[g].dtype == DType::bf16));
    if (s.master.defined()) {
      CHECK(s.master.device() == kCPU);
      CHECK(s.master.dtype() == DType::f32);
    }
    CHECK(s.exp_avg.dtype() == (s.master.defined() ? DType::f32 : DType::f64));
  }
  // the working copies: a parameter and a gradient shard in each group's dtype, the master
  // group's too (its parameter copy receives the rounded master, the source of the copy back)
  int64_t shard_bytes = 0;
  for (const FlatGroup& g : L.groups())
    shard_bytes += g.shard_numel * static_cast<int64_t>(dtype_size(g.dtype));
  CHECK(offloaded.sharded().working_copy_bytes() == 2 * shard_bytes);
  const MemoryReport m = offloaded.strategy->memory_report();
  CHECK(m.offloaded_bytes ==
        offloaded.sharded().state_bytes() + offloaded.sharded().master_bytes() + 2 * shard_bytes);
}

TEST_CASE("offload_optimizer: the GPU gives up exactly the state's bytes" *
          sl::testing::needs_gpu()) {
  const TrainConfig c{.opt = OptKind::adamw, .steps = 1};
  int64_t live[2] = {0, 0};
  MemoryReport reports[2];
  int64_t state_bytes = 0, working = 0;
  for (int offload = 0; offload < 2; ++offload) {
    const int64_t before = memory_stats(kGPU).live_bytes;
    {
      GpuRun r("zero2", c, offload == 1);
      r.run(0, 1);
      live[offload] = memory_stats(kGPU).live_bytes - before;
      reports[offload] = r.strategy->memory_report();
      if (offload == 1) {
        state_bytes = r.sharded().state_bytes();
        working = r.sharded().working_copy_bytes();
        // the offloaded step's copies: one parameter and one gradient shard per dtype group
        int64_t shard_bytes = 0;
        for (const FlatGroup& g : dynamic_cast<FlatStrategy&>(*r.strategy).flat().layout().groups())
          shard_bytes += g.shard_numel * static_cast<int64_t>(dtype_size(g.dtype));
        CHECK(working == 2 * shard_bytes);
      }
    }
  }
  CHECK(state_bytes > 0);
  // AdamW's two moments lived on the GPU in the first run and on the host in the second
  CHECK(live[0] - live[1] == state_bytes);
  CHECK(reports[0].optimizer_state_bytes == state_bytes);
  CHECK(reports[1].optimizer_state_bytes == 0);
  CHECK(reports[1].master_weight_bytes == 0);
  CHECK(reports[1].offloaded_bytes == state_bytes + working);
  CHECK(reports[1].str().find("offloaded to the host") != std::string::npos);
}

TEST_CASE("offload_optimizer: estimate_memory gives the GPU's and the host's bytes" *
          sl::testing::needs_gpu()) {
  const TrainConfig c{.opt = OptKind::adamw, .steps = 1};
  for (bool bf16 : {false, true}) {  // bf16: one group with masters, one without
    for (const std::string kind : {"zero1", "zero2"}) {
      for (bool offload : {false, true}) {
        CAPTURE(kind);
        CAPTURE(bf16);
        CAPTURE(offload);
        GpuRun r(kind, c, offload, bf16);
        r.run(0, 1);
        const MemoryReport m = r.strategy->memory_report();
        const MemoryReport est =
            estimate_memory(parse_strategy(kind), *r.net, *r.opt, 1,
                            {.bucket_cap_bytes = c.bucket_cap, .offload_optimizer = offload});
        INFO(m.str(), "\nestimated:\n", est.str());
        CHECK(est.param_bytes == m.param_bytes);
        CHECK(est.grad_bytes == m.grad_bytes);
        CHECK(est.optimizer_state_bytes == m.optimizer_state_bytes);
        CHECK(est.master_weight_bytes == m.master_weight_bytes);
        CHECK(est.offloaded_bytes == m.offloaded_bytes);
        CHECK((est.offloaded_bytes > 0) == offload);
      }
    }
  }
}

TEST_CASE("offload_optimizer: sharded checkpoints move between host and GPU state" *
          sl::testing::needs_gpu()) {
  const TrainConfig c{.opt = OptKind::adamw, .steps = 4, .clip = 0.3};
  for (bool bf16 : {false, true}) {
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("sl_offload_ckpt_" + std::to_string(::getpid())))
            .string();
    for (bool save_offloaded : {true, false}) {
      CAPTURE(save_offloaded);
      CAPTURE(bf16);  // with masters in one group, the other's host copy is refreshed too
      GpuRun whole("zero2", c, false, bf16);
      whole.run(0, 4);
      GpuRun first("zero2", c, save_offloaded, bf16);
      first.run(0, 2);
      save_sharded_checkpoint(
          dir, *first.strategy,
          serialize::Json::object({{"scheduler", first.sched->state_dict().meta}}));
      // the consolidated optimizer state is the same wherever the state lives
      GpuRun twin("zero2", c, !save_offloaded, bf16);
      twin.run(0, 2);
      serialize::StateDict a = full_optimizer_state(*first.strategy),
                           b = full_optimizer_state(*twin.strategy);
      REQUIRE(a.size() == b.size());
      for (const auto& [name, t] : a) {
        CAPTURE(name);
        SL_CHECK_CLOSE(t.cpu(), b.at(name).cpu(), 0, 0);
      }
      // continued with the state in the other place
      GpuRun rest("zero2", c, !save_offloaded, bf16);
      serialize::Json extra = load_sharded_checkpoint(dir, *rest.strategy);
      rest.sched->load_state_dict(serialize::Section{{}, extra.at("scheduler")});
      rest.run(2, 4);
      check_equal_params(rest.params(), whole.params());
      std::filesystem::remove_all(dir);
    }
  }
}

// write_back's copies from the pinned parameter copy to the GPU are asynchronous; the next
// update writes that copy again, so every offloaded step drains the GPU's stream first
// (stage_gradients). Counted on the fake GPU, whose synchronize hook stands in for the stream
// synchronisation; the race itself (a copy still reading while the host writes) is not one a
// test can force on a real GPU. So it skips on a real GPU (no hook to count there) and without
// any GPU, saying so.
TEST_CASE("offload_optimizer: a step drains the GPU's stream before it writes the host's copy" *
          sl::testing::skip_when(!sl::testing::gpu_visible() || !sl::testing::fake_gpu_installed(),
                                 "counts of the fake GPU's synchronize hook",
                                 "no fake GPU (a real one, or none)")) {
  const TrainConfig c{.opt = OptKind::adamw, .steps = 3};
  for (const char* kind : {"zero1", "zero2"}) {
    CAPTURE(kind);
    int calls[2] = {0, 0};
    for (int offload = 0; offload < 2; ++offload) {
      GpuRun r(kind, c, offload == 1);
      const int before = sl::testing::fake_synchronize_calls();
      r.run(0, c.steps);
      calls[offload] = sl::testing::fake_synchronize_calls() - before;
    }
    CHECK(calls[1] == calls[0] + c.steps);
  }
}
