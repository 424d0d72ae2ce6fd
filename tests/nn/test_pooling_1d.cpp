// 1-d pooling (max_pool1d, avg_pool1d, adaptive_avg_pool1d and their modules): PyTorch parity
// (fixtures: pooling, from tools/gen_nn_fixtures.py), reprs as PyTorch's own, gradchecks in
// float64, and the error paths, which must name the 1-d op and its 1-d values.
#include "fixture.h"
#include "nn/functional.h"
#include "nn/pooling.h"

using namespace sl;
using sl::testing::Fixture;
namespace F = sl::nn::functional;

// f32 default: rtol 1e-5, atol 1e-6. Every output is a max (exact) or a mean of at most 3 O(1)
// values, every input gradient a sum of at most 3 such terms, so the f32 rounding differences
// against PyTorch stay around 1e-7.
constexpr double kRtol = 1e-5, kAtol = 1e-6;

TEST_CASE("1-d pooling modules match PyTorch, batched and unbatched, reprs included") {
  Fixture fx("pooling");
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> cases = {
      {"max_pool1d", std::make_shared<nn::MaxPool1d>(2)},
      {"max_pool1d_pad_dil_ceil", std::make_shared<nn::MaxPool1d>(3, 2, 1, 2, true)},
      {"max_pool1d_ceil_unbatched", std::make_shared<nn::MaxPool1d>(3, 2, 0, 1, true)},  // [C, L]
      {"avg_pool1d", std::make_shared<nn::AvgPool1d>(3)},
      {"avg_pool1d_pad_incl", std::make_shared<nn::AvgPool1d>(3, 2, 1)},
      {"avg_pool1d_pad_excl_ceil", std::make_shared<nn::AvgPool1d>(3, 2, 1, true, false)},
      {"avg_pool1d_unbatched", std::make_shared<nn::AvgPool1d>(2, 1, 1)},   // [C, L]
      {"adaptive_avg_pool1d", std::make_shared<nn::AdaptiveAvgPool1d>(3)},  // 7 -> 3
      {"adaptive_avg_pool1d_up_unbatched",
       std::make_shared<nn::AdaptiveAvgPool1d>(5)},  // 3 -> 5, [C, L]
  };
  for (auto& [name, m] : cases) {
    CAPTURE(name);
    Tensor x = fx.input(name, 0);
    fx.check_backward(name, {m->forward(x)}, {x}, m.get(), kRtol, kAtol);
    CHECK(m->str() == fx.meta(name + ".repr"));
  }
}

TEST_CASE("max_pool1d_with_indices matches F.max_pool1d(..., return_indices=True)") {
  Fixture fx("pooling");
  Tensor x = fx.input("max_pool1d_indices", 0);
  auto [y, idx] = F::max_pool1d_with_indices(x, 3, 2, 1);
  CHECK(idx.dtype() == DType::i64);
  SL_CHECK_CLOSE(idx, fx.get("max_pool1d_indices.out.1"), 0, 0);  // integers: exact
  fx.check_backward("max_pool1d_indices", {y}, {x}, nullptr, kRtol, kAtol);
  CHECK_FALSE(idx.requires_grad());
}

TEST_CASE("1-d pooling equals the 2-d op over a height of 1") {
  // An independent check of the plumbing (unsqueeze / squeeze dims, stride default, padding and
  // dilation placed on the length dim): the 2-d op called directly on [N, C, 1, L].
  manual_seed(61);
  Tensor x = randn({2, 3, 11});
  Tensor x4 = x.unsqueeze(2);
  SL_CHECK_CLOSE(F::max_pool1d(x, 3, {}, 1, 2, true),
                 F::max_pool2d(x4, {1, 3}, {1, 3}, {0, 1}, {1, 2}, true).squeeze(2), 0, 0);
  SL_CHECK_CLOSE(F::avg_pool1d(x, 4, 3, 2, true, false),
                 F::avg_pool2d(x4, {1, 4}, {1, 3}, {0, 2}, true, false).squeeze(2), 0, 0);
  SL_CHECK_CLOSE(F::adaptive_avg_pool1d(x, 4), F::adaptive_avg_pool2d(x4, {1, 4}).squeeze(2), 0, 0);
  // unbatched [C, L] is the batched result of [1, C, L]
  SL_CHECK_CLOSE(F::max_pool1d(x[0], 2), F::max_pool1d(x.slice(0, 0, 1), 2)[0], 0, 0);
  // an output size of 0 gives an empty output, as adaptive_avg_pool2d (and PyTorch 1.13)
  CHECK(F::adaptive_avg_pool1d(x, 0).sizes() == Shape{2, 3, 0});
  CHECK(nn::AdaptiveAvgPool1d(0).forward(x[0]).sizes() == Shape{3, 0});
}

TEST_CASE("1-d pooling gradchecks in float64") {
  manual_seed(62);
  // distinct values 0.1 apart (a permutation), so no two elements of a window tie within the
  // finite-difference step and the max's gradient is well defined
  Tensor x = (randperm(2 * 3 * 10).to(DType::f64) * 0.1).reshape({2, 3, 10}).requires_grad_();
  Tensor xu = (randperm(3 * 7).to(DType::f64) * 0.1).reshape({3, 7}).requires_grad_();
  for (auto [name, f] : std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>>{
           {"max", [](const Tensor& t) { return F::max_pool1d(t, 2); }},
           {"max pad dil ceil", [](const Tensor& t) { return F::max_pool1d(t, 3, 2, 1, 2, true); }},
           {"max overlapping", [](const Tensor& t) { return F::max_pool1d(t, 3, 1, 1); }},
           {"avg incl pad", [](const Tensor& t) { return F::avg_pool1d(t, 3, 2, 1); }},
           {"avg excl pad ceil",
            [](const Tensor& t) { return F::avg_pool1d(t, 3, 2, 1, true, false); }},
           {"adaptive down", [](const Tensor& t) { return F::adaptive_avg_pool1d(t, 4); }},
           {"adaptive up", [](const Tensor& t) { return F::adaptive_avg_pool1d(t, 13); }},
           {"MaxPool1d", [](const Tensor& t) { return nn::MaxPool1d(3, 2).forward(t); }},
           {"AvgPool1d", [](const Tensor& t) { return nn::AvgPool1d(2).forward(t); }},
           {"AdaptiveAvgPool1d",
            [](const Tensor& t) { return nn::AdaptiveAvgPool1d(3).forward(t); }}}) {
    CAPTURE(name);
    CHECK(gradcheck([&](const TensorList& in) { return f(in[0]); }, {x}));
    CHECK(gradcheck([&](const TensorList& in) { return f(in[0]); }, {xu}));
  }
}

TEST_CASE("1-d pooling errors name the 1-d op and its 1-d values") {
  Tensor x = randn({2, 3, 5});
  SL_CHECK_THROWS(F::max_pool1d(randn({1, 2, 3, 4}), 2), ShapeError,
                  "max_pool1d: expected a 2-d [C, L] or 3-d [N, C, L] input, got [1, 2, 3, 4]");
  SL_CHECK_THROWS(F::avg_pool1d(randn({5}), 2), ShapeError,
                  "avg_pool1d: expected a 2-d [C, L] or 3-d [N, C, L] input, got [5]");
  SL_CHECK_THROWS(F::max_pool1d(x, 0), ValueError,
                  "max_pool1d: kernel_size must be positive, got 0");
  SL_CHECK_THROWS(F::max_pool1d(x, 2, 0), ValueError, "max_pool1d: stride must be positive, got 0");
  SL_CHECK_THROWS(F::max_pool1d(x, 2, 1, 0, 0), ValueError,
                  "max_pool1d: dilation must be positive, got 0");
  SL_CHECK_THROWS(F::max_pool1d(x, 3, 1, 2), ValueError,
                  "max_pool1d: padding should be non-negative and at most half of the kernel "
                  "size, got padding 2 for kernel_size 3");
  SL_CHECK_THROWS(F::avg_pool1d(x, 2, 1, -1), ValueError,
                  "avg_pool1d: padding should be non-negative and at most half of the kernel "
                  "size, got padding -1 for kernel_size 2");
  SL_CHECK_THROWS(F::avg_pool1d(x, 6), ShapeError,
                  "avg_pool1d: input of shape [2, 3, 5] is too small for kernel_size 6 with "
                  "padding 0 and dilation 1 (output size 0)");
  // Note [Empty max_pool1d]. torch 1.13 on x = randn(2, 3, 5): F.max_pool1d(x, 3, 1, 0, 3)
  // throws "Invalid computed output size: -1"; F.max_pool1d(x, 6) and (x, 2, 1, 0, 5) give
  // shape [2, 3, 0], but with return_indices=True, or x requiring grad, "Output size is too small"
  SL_CHECK_THROWS(F::max_pool1d(x, 3, 1, 0, 3), ShapeError,
                  "max_pool1d: input of shape [2, 3, 5] is too small for kernel_size 3 with "
                  "padding 0 and dilation 3 (output size -1)");
  for (Device dev : sl::testing::test_devices()) {
    CAPTURE(dev);
    Tensor xd = x.to(dev);
    Tensor e = F::max_pool1d(xd, 6);
    CHECK(e.sizes() == Shape{2, 3, 0});
    CHECK(e.dtype() == x.dtype());
    CHECK(e.device() == dev);
    CHECK(F::max_pool1d(xd, 2, 1, 0, 5).sizes() == Shape{2, 3, 0});
    CHECK(nn::MaxPool1d(6).forward(xd[0]).sizes() == Shape{3, 0});
    SL_CHECK_THROWS(F::max_pool1d_with_indices(xd, 6), ShapeError,
                    "max_pool1d: input of shape [2, 3, 5] is too small for kernel_size 6 with "
                    "padding 0 and dilation 1 (output size 0)");
    Tensor xg = xd.clone().requires_grad_();
    SL_CHECK_THROWS(F::max_pool1d(xg, 6), ShapeError, "(output size 0)");
    NoGradGuard no_grad;  // nothing to record: empty again
    CHECK(F::max_pool1d(xg, 6).sizes() == Shape{2, 3, 0});
  }
  SL_CHECK_THROWS(F::max_pool1d(x.to(DType::i64), 2), DTypeError,
                  "max_pool1d: expected a floating input, got int64");
  SL_CHECK_THROWS(F::max_pool1d(randn({2, 3, 0}), 1), ShapeError,
                  "max_pool1d: expected a non-empty length dim, got [2, 3, 0]");
  SL_CHECK_THROWS(F::max_pool1d(Tensor(), 2), ValueError, "max_pool1d");
  SL_CHECK_THROWS(F::adaptive_avg_pool1d(x, -1), ShapeError,
                  "adaptive_avg_pool1d: output_size must be non-negative, got -1");
  SL_CHECK_THROWS(F::adaptive_avg_pool1d(randn({2, 3, 4, 4}), 2), ShapeError,
                  "adaptive_avg_pool1d: expected a 2-d [C, L] or 3-d [N, C, L] input, got [2, 3, "
                  "4, 4]");
  SL_CHECK_THROWS(nn::AdaptiveAvgPool1d(-2), ValueError,
                  "AdaptiveAvgPool1d: output_size must be non-negative, got -2");
  SL_CHECK_THROWS(nn::MaxPool1d(ExpandingArray<1>()), ValueError,
                  "MaxPool1d: kernel_size must be given");
  SL_CHECK_THROWS(nn::AvgPool1d(ExpandingArray<1>()), ValueError,
                  "AvgPool1d: kernel_size must be given");
  SL_CHECK_THROWS(nn::MaxPool1d(2).forward(Tensor()), ValueError,
                  "MaxPool1d: the input is undefined");
  // module errors at forward are the functions' (1-d values)
  SL_CHECK_THROWS(nn::AvgPool1d(4, 1, 3).forward(x), ValueError,
                  "avg_pool1d: padding should be non-negative and at most half of the kernel "
                  "size, got padding 3 for kernel_size 4");
}
