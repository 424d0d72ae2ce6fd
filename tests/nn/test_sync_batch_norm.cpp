// SyncBatchNorm (Note [SyncBatchNorm]) without MPI: "ranks" are threads exchanging tensors in
// memory, so every split of a batch can be compared with batch_norm on the whole batch (whose
// fused kernel is checked against PyTorch in tests/ops). The process-group version runs under
// mpirun in tests/dist/ranks/test_sync_batchnorm_ranks.cpp.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "../support/testing.h"
#include "nn/containers.h"
#include "nn/normalization.h"
#include "nn/sync_batch_norm.h"

using namespace sl;

namespace {

/// W threads that exchange one tensor each per call, in lock step; a thread left alone for
/// 30 s throws instead of hanging the suite.
class ThreadGroup {
 public:
  explicit ThreadGroup(int world) : world_(world), slots_(static_cast<size_t>(world)) {}
  int world() const { return world_; }
  /// Every thread's `t` (CPU copies), in rank order, once all `world` threads have called.
  std::vector<Tensor> exchange(int rank, const Tensor& t) {
    std::unique_lock lock(mu_);
    const uint64_t gen = generation_;
    slots_[static_cast<size_t>(rank)] = t.cpu().contiguous().clone();
    if (++arrived_ == world_) {
      result_ = slots_;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return generation_ != gen; })) {
      throw std::runtime_error("ThreadGroup: the other threads never called");
    }
    return result_;
  }

 private:
  int world_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<Tensor> slots_, result_;
};

class ThreadSync final : public nn::StatsSync {
 public:
  ThreadSync(ThreadGroup& g, int rank) : g_(g), rank_(rank) {}
  int world_size() const override { return g_.world(); }
  Tensor all_gather(const Tensor& local) override {
    ++gathers;
    return stack(g_.exchange(rank_, local), 0).to(local.device());
  }
  void all_reduce_sum(const Tensor& t) override {
    ++reduces;
    std::vector<Tensor> all = g_.exchange(rank_, t);
    Tensor total = zeros_like(all[0]);
    for (const Tensor& a : all) total = total + a;
    Tensor dst = t;
    dst.copy_(total);
  }
  int gathers = 0, reduces = 0;

 private:
  ThreadGroup& g_;
  int rank_;
};

/// A world of two whose other rank holds exactly this rank's data (and gradients).
class MirrorSync final : public nn::StatsSync {
 public:
  int world_size() const override { return 2; }
  Tensor all_gather(const Tensor& local) override {
    ++gathers;
    return stack({local, local}, 0);
  }
  void all_reduce_sum(const Tensor& t) override {
    ++reduces;
    Tensor dst = t;
    dst.mul_(2.0);
  }
  int gathers = 0, reduces = 0;
};

/// Returns a gathered tensor of the wrong width.
class BrokenSync final : public nn::StatsSync {
 public:
  int world_size() const override { return 2; }
  Tensor all_gather(const Tensor& local) override {
    return zeros({2, local.numel() + 1}, {.dtype = local.dtype()});
  }
  void all_reduce_sum(const Tensor&) override {}
};

struct Result {
  Tensor out, grad_input, grad_weight, grad_bias, running_mean, running_var;
};

/// batch_norm on the whole batch: output, gradients of sum(out * dy), running statistics.
Result whole_batch(const Tensor& x_in, const Tensor& dy, const Tensor& w_in, const Tensor& b_in,
                   double momentum) {
  Tensor x = x_in.clone().requires_grad_(true);
  Tensor w = w_in.clone().requires_grad_(true), b = b_in.clone().requires_grad_(true);
  const int64_t C = x.size(1);
  Tensor rm = zeros({C}, {.dtype = x.dtype()}), rv = ones({C}, {.dtype = x.dtype()});
  Tensor out = batch_norm(x, rm, rv, w, b, true, momentum, 1e-5);
  (out * dy).sum().backward();
  return {out.detach(), x.grad(), w.grad(), b.grad(), rm, rv};
}

/// sync_batch_norm with the rows of x split over threads by `rows`; gradients of the weight and
/// bias are summed over the threads (what the strategy's gradient averaging does, times N).
Result split_batch(const Tensor& x_all, const Tensor& dy_all, const Tensor& w_in,
                   const Tensor& b_in, double momentum, const std::vector<int64_t>& rows) {
  const int world = static_cast<int>(rows.size());
  ThreadGroup group(world);
  std::vector<Result> per(rows.size());
  std::vector<std::string> errors(rows.size());
  std::vector<std::thread> threads;
  int64_t begin = 0;
  for (int r = 0; r < world; ++r) {
    const int64_t n = rows[static_cast<size_t>(r)];
    threads.emplace_back([&, r, begin, n] {
      try {
        auto sync = std::make_shared<ThreadSync>(group, r);
        Tensor x = x_all.narrow(0, begin, n).clone().requires_grad_(true);
        Tensor dy = dy_all.narrow(0, begin, n).clone();
        Tensor w = w_in.clone().requires_grad_(true), b = b_in.clone().requires_grad_(true);
        const int64_t C = x.size(1);
        Tensor rm = zeros({C}, {.dtype = x.dtype()}), rv = ones({C}, {.dtype = x.dtype()});
        Tensor out = nn::sync_batch_norm(x, rm, rv, w, b, momentum, 1e-5, sync);
        (out * dy).sum().backward();
        per[static_cast<size_t>(r)] = {out.detach(), x.grad(), w.grad(), b.grad(), rm, rv};
        if (sync->gathers != 1 || sync->reduces != 1) errors[static_cast<size_t>(r)] = "calls";
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
    begin += n;
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    INFO("thread ", r);
    REQUIRE(errors[static_cast<size_t>(r)] == "");
  }
  Result all;
  TensorList outs, gis;
  for (const Result& p : per) {
    outs.push_back(p.out);
    gis.push_back(p.grad_input);
  }
  all.out = cat(outs, 0);
  all.grad_input = cat(gis, 0);
  all.grad_weight = zeros_like(w_in);
  all.grad_bias = zeros_like(b_in);
  for (const Result& p : per) {
    all.grad_weight = all.grad_weight + p.grad_weight;
    all.grad_bias = all.grad_bias + p.grad_bias;
    // every rank updates its running statistics with the same global values
    SL_CHECK_CLOSE(p.running_mean, per[0].running_mean, 0, 0);
    SL_CHECK_CLOSE(p.running_var, per[0].running_var, 0, 0);
  }
  all.running_mean = per[0].running_mean;
  all.running_var = per[0].running_var;
  return all;
}

}  // namespace

TEST_CASE("sync_batch_norm over threads equals batch_norm on the whole batch") {
  // Splits: one rank; even; uneven; a rank with no rows at all.
  const std::vector<std::vector<int64_t>> splits = {{5}, {2, 3}, {3, 1, 1}, {0, 4, 1}};
  // float64: the two paths differ only in rounding order (~1e-15). float32: both accumulate in
  // double inside batch norm's kernels, but sync_batch_norm rounds the mean and invstd to float32
  // before combining them and forms the input gradient as two float32 affine maps added, so the
  // outputs and gradients (O(1)) may differ by a few float32 ulps: 2e-5 relative, 1e-5 absolute
  // leaves a factor of ~20 above what that can produce.
  // bfloat16 (computed in float32 by both, rounded to 8 significant bits at the end): both may
  // round a value to neighbouring bfloat16 numbers, 2^-7 = 7.8e-3 apart near 1, so 1.6e-2
  // relative / absolute (two such steps).
  for (DType dt : {DType::f64, DType::f32, DType::bf16}) {
    const double rtol = dt == DType::f64 ? 1e-10 : dt == DType::f32 ? 2e-5 : 1.6e-2;
    const double atol = dt == DType::f64 ? 1e-12 : dt == DType::f32 ? 1e-5 : 1.6e-2;
    for (const Shape& shape : {Shape{5, 3, 6}, Shape{5, 3, 2, 3}}) {
      for (const auto& rows : splits) {
        CAPTURE(dtype_name(dt));
        CAPTURE(shape_str(shape));
        CAPTURE(rows.size());
        CAPTURE(rows[0]);
        Generator gen(1234);
        Tensor x = randn(shape, {.dtype = dt}, &gen) * 2.0 + 0.5;
        Tensor dy = randn(shape, {.dtype = dt}, &gen);
        Tensor w = randn({3}, {.dtype = dt}, &gen), b = randn({3}, {.dtype = dt}, &gen);
        Result ref = whole_batch(x, dy, w, b, 0.1);
        Result got = split_batch(x, dy, w, b, 0.1, rows);
        SL_CHECK_CLOSE(got.out, ref.out, rtol, atol);
        SL_CHECK_CLOSE(got.grad_input, ref.grad_input, rtol, atol);
        SL_CHECK_CLOSE(got.grad_weight, ref.grad_weight, rtol, atol);
        SL_CHECK_CLOSE(got.grad_bias, ref.grad_bias, rtol, atol);
        SL_CHECK_CLOSE(got.running_mean, ref.running_mean, rtol, atol);
        SL_CHECK_CLOSE(got.running_var, ref.running_var, rtol, atol);
      }
    }
  }
}

TEST_CASE("sync_batch_norm: gradcheck in float64 with a mirrored second rank") {
  // The mirror's rank 1 holds rank 0's data and upstream gradient, so the backward's global sums
  // are twice the local ones; finite differences of the same function check them.
  Generator gen(7);
  Tensor x = randn({3, 2, 4}, {.dtype = DType::f64}, &gen).requires_grad_(true);
  Tensor w = randn({2}, {.dtype = DType::f64}, &gen).requires_grad_(true);
  Tensor b = randn({2}, {.dtype = DType::f64}, &gen).requires_grad_(true);
  auto sync = std::make_shared<MirrorSync>();
  auto fn = [&](const TensorList& in) {
    return nn::sync_batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], 0.1, 1e-5, sync);
  };
  CHECK(gradcheck(fn, {x, w, b}));
  // and affine=false
  auto plain = [&](const TensorList& in) {
    return nn::sync_batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), 0.1, 1e-5, sync);
  };
  CHECK(gradcheck(plain, {x}));
  CHECK(sync->gathers > 0);
  CHECK(sync->reduces > 0);
}

TEST_CASE("convert_sync_batchnorm: training communicates, evaluation and nullptr do not") {
  auto bn1 = std::make_shared<nn::BatchNorm1d>(3);
  auto bn2 = std::make_shared<nn::BatchNorm1d>(3);
  nn::Sequential net({bn1, std::make_shared<nn::ReLU>(), bn2});
  auto sync = std::make_shared<MirrorSync>();
  CHECK(nn::convert_sync_batchnorm(net, sync) == 2);
  CHECK(bn1->stats_sync == sync);

  Generator gen(3);
  Tensor x = randn({4, 3}, {}, &gen).requires_grad_(true);
  net.forward(x).sum().backward();
  CHECK(sync->gathers == 2);
  CHECK(sync->reduces == 2);
  // The mirrored batch has 8 rows: the running variance uses the global count (unbiased over
  // 8 - 1), which differs from the local one (4 - 1).
  Result ref =
      whole_batch(cat({x.detach(), x.detach()}, 0), ones({8, 3}), ones({3}), zeros({3}), 0.1);
  SL_CHECK_CLOSE(bn1->running_var, ref.running_var, 1e-5, 1e-6);

  net.eval();
  net.forward(x).sum().backward();
  CHECK(sync->gathers == 2);
  CHECK(sync->reduces == 2);

  net.train();
  CHECK(nn::convert_sync_batchnorm(net, nullptr) == 2);
  net.forward(x).sum().backward();
  CHECK(sync->gathers == 2);
  CHECK(bn2->stats_sync == nullptr);
}

TEST_CASE("sync_batch_norm: bad input fails before any communication") {
  auto sync = std::make_shared<MirrorSync>();
  Tensor x = randn({4, 3, 2});
  SL_CHECK_THROWS(
      nn::sync_batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), 0.1, 1e-5, nullptr),
      ValueError, "sync_batch_norm: no StatsSync given");
  SL_CHECK_THROWS(
      nn::sync_batch_norm(randn({4}), Tensor(), Tensor(), Tensor(), Tensor(), 0.1, 1e-5, sync),
      ShapeError, "sync_batch_norm: expected an input [N, C, *] with at least 2 dims");
  SL_CHECK_THROWS(nn::sync_batch_norm(x, Tensor(), Tensor(), ones({4}), Tensor(), 0.1, 1e-5, sync),
                  ShapeError, "sync_batch_norm: weight must have shape [3], got [4]");
  SL_CHECK_THROWS(nn::sync_batch_norm(x, zeros({3}), Tensor(), Tensor(), Tensor(), 0.1, 1e-5, sync),
                  ValueError, "running_mean and running_var must both be given");
  SL_CHECK_THROWS(nn::sync_batch_norm(x.to(DType::i64), Tensor(), Tensor(), Tensor(), Tensor(), 0.1,
                                      1e-5, sync),
                  DTypeError, "sync_batch_norm: expected a floating input, got int64");
  SL_CHECK_THROWS(nn::sync_batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), 1.5, 1e-5, sync),
                  ValueError, "momentum must be in [0, 1], got 1.5");
  CHECK(sync->gathers == 0);
  // One value per channel over every rank: known only after the gather, alike on every rank.
  ThreadGroup alone(1);
  SL_CHECK_THROWS(nn::sync_batch_norm(randn({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), 0.1,
                                      1e-5, std::make_shared<ThreadSync>(alone, 0)),
                  ValueError,
                  "sync_batch_norm: expected more than 1 value per channel over all 1 ranks when "
                  "training, got 1");
  // Over several ranks: every rank holds at most one row (only then can the global count be 1),
  // so every rank reads the counts and all throw alike; with 2 rows in all, all go on.
  for (const std::vector<int64_t>& rows :
       std::vector<std::vector<int64_t>>{{0, 1}, {1, 0, 0}, {0, 1, 1}}) {
    CAPTURE(rows.size());
    CAPTURE(rows[0]);
    int64_t total = 0;
    for (int64_t r : rows) total += r;
    const int world = static_cast<int>(rows.size());
    ThreadGroup g(world);
    std::vector<std::string> errors(rows.size());
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        try {
          (void)nn::sync_batch_norm(randn({rows[static_cast<size_t>(r)], 3}), Tensor(), Tensor(),
                                    Tensor(), Tensor(), 0.1, 1e-5,
                                    std::make_shared<ThreadSync>(g, r));
        } catch (const ValueError& e) {
          errors[static_cast<size_t>(r)] = e.what();
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const std::string& e : errors) {
      if (total > 1) {
        CHECK(e.empty());
      } else {
        CHECK_MESSAGE(
            e.find("expected more than 1 value per channel over all " + std::to_string(world) +
                   " ranks when training, got 1") != std::string::npos,
            e);
      }
    }
  }
  SL_CHECK_THROWS(nn::sync_batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), 0.1, 1e-5,
                                      std::make_shared<BrokenSync>()),
                  ShapeError,
                  "sync_batch_norm: the StatsSync returned shape [2, 8], expected [2, 7]");
}
