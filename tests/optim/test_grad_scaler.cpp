// GradScaler's dynamic loss scaling (semantics of torch.cuda.amp.GradScaler, which PyTorch 1.13
// only runs on CUDA, so the expected values are derived here from its documented update rule)
// and the error paths of gradient clipping.
#include <cmath>
#include <limits>

#include "core/ops/copy.h"
#include "support/testing.h"

using namespace sl;
using namespace sl::optim;

TEST_CASE("GradScaler: scales the loss, unscales gradients, skips steps with inf/NaN") {
  Tensor w = ones({3}).requires_grad_(true);
  SGD opt({w}, {.lr = 1.0});
  GradScaler scaler({.init_scale = 1024.0, .growth_interval = 3});
  Tensor loss = w.mul(tensor({1.f, 2.f, 3.f})).sum();
  Tensor scaled = scaler.scale(loss);
  CHECK(scaled.item<float>() == 6.f * 1024.f);
  scaled.backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{1024.f, 2048.f, 3072.f});
  CHECK(scaler.step(opt));  // unscales, finds nothing, steps
  CHECK(w.detach().to_vector<float>() == std::vector<float>{0.f, -1.f, -2.f});
  scaler.update();
  CHECK(scaler.get_scale() == 1024.0);
  CHECK(scaler.growth_tracker() == 1);

  // an overflow: the step is skipped and the scale halves
  w.set_grad(tensor({1.f, std::numeric_limits<float>::infinity(), 0.f}));
  CHECK(!scaler.step(opt));
  CHECK(scaler.found_inf());
  CHECK(w.detach().to_vector<float>() == std::vector<float>{0.f, -1.f, -2.f});
  scaler.update();
  CHECK(scaler.get_scale() == 512.0);
  CHECK(scaler.growth_tracker() == 0);
  w.set_grad(tensor({std::nanf(""), 0.f, 0.f}));
  CHECK(!scaler.step(opt));
  scaler.update();
  CHECK(scaler.get_scale() == 256.0);

  // growth after growth_interval clean steps in a row
  for (int i = 0; i < 3; ++i) {
    w.set_grad(zeros({3}));
    CHECK(scaler.step(opt));
    scaler.update();
  }
  CHECK(scaler.get_scale() == 512.0);
  CHECK(scaler.growth_tracker() == 0);

  // unscale_ before clipping, then step does not unscale twice
  w.set_grad(full({3}, 512.0f * 4));
  scaler.unscale_(opt);
  CHECK(w.grad().to_vector<float>() == std::vector<float>{4.f, 4.f, 4.f});
  SL_CHECK_THROWS(scaler.unscale_(opt), ValueError, "unscale_() has already been called");
  CHECK(scaler.step(opt));
  CHECK(w.grad().to_vector<float>() == std::vector<float>{4.f, 4.f, 4.f});
  scaler.update();
}

TEST_CASE("GradScaler: the scale stops growing below float32's overflow, as PyTorch's") {
  // PyTorch's update keeps the old scale when scale * growth_factor is not finite in float32
  // (_amp_update_scale_); the largest power of two below FLT_MAX is 2^127.
  Tensor w = ones({1}).requires_grad_(true);
  SGD opt({w}, {.lr = 0.0});
  GradScaler scaler({.init_scale = std::ldexp(1.0, 125), .growth_interval = 1});
  std::vector<double> scales;
  for (int i = 0; i < 4; ++i) {
    w.set_grad(zeros({1}));
    CHECK(scaler.step(opt));
    scaler.update();
    scales.push_back(scaler.get_scale());
  }
  CHECK(scales == std::vector<double>{std::ldexp(1.0, 126), std::ldexp(1.0, 127),
                                      std::ldexp(1.0, 127), std::ldexp(1.0, 127)});
  CHECK(scaler.growth_tracker() == 0);
  // and it still backs off from there and grows back
  w.set_grad(full({1}, std::numeric_limits<float>::infinity()));
  CHECK_FALSE(scaler.step(opt));
  scaler.update();
  CHECK(scaler.get_scale() == std::ldexp(1.0, 126));
  w.set_grad(zeros({1}));
  CHECK(scaler.step(opt));
  scaler.update();
  CHECK(scaler.get_scale() == std::ldexp(1.0, 127));
}

TEST_CASE("GradScaler: the found-inf sync makes every rank skip together") {
  // a distributed wrapper all-reduces the flag; here another "rank" saw an overflow
  Tensor w = ones({2}).requires_grad_(true);
  SGD opt({w}, {.lr = 1.0});
  GradScaler scaler({.init_scale = 8.0});
  int calls = 0;
  scaler.set_found_inf_sync([&](const Tensor& found) {
    ++calls;
    CHECK(found.item<float>() == 0.f);  // the local flag
    ops::fill_(found, 1.0);             // max over ranks
  });
  w.set_grad(ones({2}));
  CHECK(!scaler.step(opt));
  CHECK(calls == 1);
  CHECK(w.detach().to_vector<float>() == std::vector<float>{1.f, 1.f});
  scaler.update();
  CHECK(scaler.get_scale() == 4.0);
}

TEST_CASE("GradScaler: state_dict, disabled mode and option errors") {
  GradScaler a({.init_scale = 64.0, .growth_interval = 5});
  Tensor w = ones({1}).requires_grad_(true);
  SGD opt({w}, {.lr = 0.5});
  w.set_grad(ones({1}));
  a.step(opt);
  a.update();
  GradScaler b;
  b.load_state_dict(a.state_dict());
  CHECK(b.get_scale() == 64.0);
  CHECK(b.growth_tracker() == 1);

  GradScaler off({.enabled = false});
  Tensor loss = w.sum();
  CHECK(off.scale(loss).is_same(loss));
  w.set_grad(full({1}, std::numeric_limits<float>::infinity()));
  CHECK(off.step(opt));  // disabled: no check, plain step

  SL_CHECK_THROWS(GradScaler({.growth_factor = 1.0}), ValueError,
                  "GradScaler: growth_factor should be > 1");
  SL_CHECK_THROWS(GradScaler({.backoff_factor = 1.0}), ValueError, "backoff_factor should be in");
  SL_CHECK_THROWS(GradScaler({.init_scale = 0.0}), ValueError, "init_scale must be a positive");
  SL_CHECK_THROWS(GradScaler({.growth_interval = 0}), ValueError, "growth_interval should be > 0");
}

TEST_CASE("clipping: sharded composition, non-finite norms and errors") {
  // the sharded recipe (partials summed across "ranks") equals clip_grad_norm_ on everything
  Generator g(2);
  Tensor a = zeros({10}).requires_grad_(true), b = zeros({6}).requires_grad_(true);
  a.set_grad(randn({10}, {}, &g));
  b.set_grad(randn({6}, {}, &g));
  Tensor ga = a.grad().clone(), gb = b.grad().clone();
  double whole = clip_grad_norm_({a, b}, 0.5);
  double partial = grad_norm_partial({ga.narrow(0, 0, 4)}, 2.0) +
                   grad_norm_partial({ga.narrow(0, 4, 6), gb}, 2.0);
  double total = total_norm_from_partial(partial, 2.0);
  CHECK(total == doctest::Approx(whole).epsilon(1e-14));
  clip_grads_with_norm_({ga, gb}, 0.5, total);
  SL_CHECK_CLOSE(ga, a.grad(), 1e-6, 0.0);  // 1 ulp: the two norms may differ in the last bit
  CHECK(std::sqrt(a.grad().square().sum().item<double>() +
                  b.grad().square().sum().item<double>()) == doctest::Approx(0.5).epsilon(1e-5));

  // a non-finite total: error, or NaN gradients as in PyTorch
  Tensor c = zeros({2}).requires_grad_(true), d = zeros({2}).requires_grad_(true);
  c.set_grad(tensor({1.f, std::numeric_limits<float>::infinity()}));
  SL_CHECK_THROWS(clip_grad_norm_({c, d}, 1.0, 2.0, true), ValueError,
                  "clip_grad_norm_: the total norm of order 2 for gradients from `parameters` is "
                  "non-finite");
  CHECK(c.grad().to_vector<float>()[0] == 1.f);  // untouched by the failed call
  CHECK(std::isinf(clip_grad_norm_({c, d}, 1.0)));
  CHECK(std::isnan(c.grad().to_vector<float>()[1]));
  CHECK(clip_grad_norm_({d}, 1.0) == 0.0);  // no gradients at all
  // A negative or NaN max_norm is refused before any gradient is touched (PyTorch would scale
  // by a negative or NaN coefficient).
  Tensor e = ones({3}).requires_grad_();
  e.set_grad(full({3}, 2.0f));
  SL_CHECK_THROWS(clip_grad_norm_({e}, -1.0), ValueError,
                  "clip_grad_norm_: max_norm must be >= 0 (0 zeroes the gradients), got -1");
  SL_CHECK_THROWS(clip_grad_norm_({e}, std::nan("")), ValueError, "max_norm must be >= 0");
  SL_CHECK_THROWS(clip_grads_with_norm_({e.grad()}, -0.5, 1.0), ValueError,
                  "(0 zeroes the gradients), got -0.5");
  SL_CHECK_CLOSE(e.grad(), full({3}, 2.0f), 0, 0);
  SL_CHECK_THROWS(clip_grad_norm_({c}, 1.0, -2.0), ValueError, "norm_type must be > 0");
  SL_CHECK_THROWS(clip_grad_value_({c}, -1.0), ValueError, "clip_value must be >= 0");
}
