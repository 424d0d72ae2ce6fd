// The NCCL backend on the GPUs of this machine (one rank per GPU; with one GPU, a one-rank
// group). Skips visibly without a GPU or without NCCL in the build.
#include "../support/testing.h"
#include "dist/process_group.h"
#include "dist/strategy.h"
#include "support/tiny_training.h"

using namespace sl;
using namespace sl::dist;

namespace {

bool have_nccl_gpu() {
  if (!nccl_available()) {
    sl::testing::report_skip("nccl", "this build has no NCCL backend");
    return false;
  }
  if (!cuda_is_available()) {
    sl::testing::report_skip("nccl", "no GPU on this machine");
    return false;
  }
  return true;
}

/// Decorator: these cases run NCCL collectives on CUDA tensors, so without the NCCL backend or a
/// GPU doctest skips them (counted as skipped, not passed) and the reason is printed once.
doctest::skip needs_nccl_gpu() {
  return doctest::skip(!have_nccl_gpu());
}

}  // namespace

TEST_CASE("nccl: collectives on cuda tensors (one-rank group)" * needs_nccl_gpu()) {
  if (!have_nccl_gpu()) return;
  auto pg = make_nccl_group(make_single_group(), Device("cuda:0"));
  CHECK(std::string(pg->backend()) == "nccl");
  Device dev("cuda:0");
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i64, DType::i32}) {
    CAPTURE(dtype_name(dt));
    Tensor t = arange(6).to(dev).to(dt);
    pg->allreduce(t, ReduceOp::sum)->wait();
    CHECK(t.cpu().to(DType::f64).to_vector<double>() == std::vector<double>{0, 1, 2, 3, 4, 5});
    if (is_floating(dt)) {
      pg->allreduce(t, ReduceOp::avg)->wait();
      CHECK(t.cpu().to(DType::f64).to_vector<double>() == std::vector<double>{0, 1, 2, 3, 4, 5});
    }
  }
  Tensor in = arange(4).to(DType::f32).to(dev), out = zeros({4}, {.device = dev});
  pg->reduce_scatter(out, in)->wait();
  CHECK(out.cpu().to_vector<float>() == std::vector<float>{0, 1, 2, 3});
  Tensor g = zeros({4}, {.device = dev});
  pg->allgather(g, in)->wait();
  CHECK(g.cpu().to_vector<float>() == std::vector<float>{0, 1, 2, 3});
  pg->broadcast(g, 0)->wait();
  pg->barrier()->wait();
  SL_CHECK_THROWS(pg->allreduce(zeros({2})), DeviceError,
                  "the nccl process group works on cuda tensors");
}

TEST_CASE("nccl: zero2 on cuda equals zero2 on cpu (one rank)" * needs_nccl_gpu()) {
  if (!have_nccl_gpu()) return;
  auto pg = make_nccl_group(make_single_group(), Device("cuda:0"));
  sl::testing::TrainConfig c{
      .opt = sl::testing::OptKind::adamw, .steps = 4, .accum = 2, .clip = 0.3};
  auto cpu = sl::testing::train_strategy("zero2", c, make_single_group());
  // the same run with the model on the GPU
  auto net = sl::testing::make_tiny_net();
  net->to(Device("cuda:0"));
  auto opt = sl::testing::make_optimizer(c.opt, *net);
  optim::StepLR sched(*opt, 3, 0.5);
  auto s = make_strategy("zero2", net, *opt,
                         {.group = pg, .bucket_cap_bytes = c.bucket_cap, .max_grad_norm = c.clip});
  for (int step = 0; step < c.steps; ++step) {
    auto [x, y] = sl::testing::global_batch(step, c.global_batch);
    x = x.cuda();
    y = y.cuda();
    s->zero_grad();
    int64_t micro = c.global_batch / c.accum;
    for (int m = 0; m < c.accum; ++m) {
      auto sync = s->no_sync(m + 1 < c.accum);
      Tensor out = s->forward(x.narrow(0, m * micro, micro));
      s->backward((out - y.narrow(0, m * micro, micro)).square().mean() / double(c.accum));
    }
    s->step();
    sched.step();
  }
  auto ps = net->parameters();
  for (size_t i = 0; i < ps.size(); ++i) {
    // GPU kernels contract a*b+c into FMAs and reduce in another order: f32 rounding over 4 steps
    SL_CHECK_CLOSE(ps[i].cpu(), cpu.params[i], 1e-4, 1e-5);
  }
}
