// Adaptive max pooling (adaptive_max_pool1d/2d, with indices, and their modules): PyTorch parity
// (fixtures: pooling, from tools/gen_nn_fixtures.py) of values, indices, input gradients and
// reprs, PyTorch's tie and NaN rules, output sizes with None entries, gradchecks in float64, and
// the error paths.
#include <cmath>
#include <limits>

#include "fixture.h"
#include "nn/containers.h"
#include "nn/functional.h"
#include "nn/pooling.h"

using namespace sl;
using sl::testing::Fixture;
namespace F = sl::nn::functional;

// Outputs are maxima (exact), input gradients sums of at most a few upstream values (the
// upsampling cases add up to 4 per element), so f32 results agree with PyTorch to a rounding or
// two: rtol 1e-5, atol 1e-6. Indices are integers and compared exactly.
constexpr double kRtol = 1e-5, kAtol = 1e-6;

TEST_CASE(
    "AdaptiveMaxPool1d/2d modules match PyTorch, None entries and unbatched, reprs included") {
  Fixture fx("pooling");
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> cases = {
      {"adaptive_max_pool2d",
       std::make_shared<nn::AdaptiveMaxPool2d>(AdaptiveOutputSize<2>{3, 2})},  // 7x5 -> 3x2
      {"adaptive_max_pool2d_none", std::make_shared<nn::AdaptiveMaxPool2d>(
                                       AdaptiveOutputSize<2>{std::nullopt, 3})},  // 4x7 -> 4x3
      {"adaptive_max_pool2d_up_unbatched",
       std::make_shared<nn::AdaptiveMaxPool2d>(5)},  // [C, 3, 4] -> [C, 5, 5]
      {"adaptive_max_pool1d", std::make_shared<nn::AdaptiveMaxPool1d>(3)},  // 8 -> 3
      {"adaptive_max_pool1d_up_unbatched",
       std::make_shared<nn::AdaptiveMaxPool1d>(6)},  // [C, 4] -> [C, 6]
  };
  for (auto& [name, m] : cases) {
    CAPTURE(name);
    Tensor x = fx.input(name, 0);
    fx.check_backward(name, {m->forward(x)}, {x}, m.get(), kRtol, kAtol);
    CHECK(m->str() == fx.meta(name + ".repr"));
    CHECK(m->state_dict().empty());  // PyTorch's state dict keys: none
    CHECK(fx.meta(name + ".state_dict_keys").empty());
  }
}

TEST_CASE(
    "adaptive_max_pool*_with_indices matches F.adaptive_max_pool*(..., return_indices=True)") {
  Fixture fx("pooling");
  auto check = [&](const std::string& name,
                   const std::function<std::pair<Tensor, Tensor>(const Tensor&)>& f) {
    CAPTURE(name);
    Tensor x = fx.input(name, 0);
    auto [y, idx] = f(x);
    CHECK(idx.dtype() == DType::i64);
    CHECK_FALSE(idx.requires_grad());
    SL_CHECK_CLOSE(idx, fx.get(name + ".out.1"), 0, 0);  // integers: exact
    // NaN outputs must be NaN at the same places (SL_CHECK_CLOSE matches NaNs)
    fx.check_backward(name, {y}, {x}, nullptr, kRtol, kAtol);
  };
  check("adaptive_max_pool2d_indices", [](const Tensor& x) {
    return F::adaptive_max_pool2d_with_indices(x, {4, 3});
  });
  check("adaptive_max_pool1d_indices",
        [](const Tensor& x) { return F::adaptive_max_pool1d_with_indices(x, 4); });
  // values in {0, 1, 2}: many ties, resolved to the first maximum in row-major order
  check("adaptive_max_pool2d_ties", [](const Tensor& x) {
    return F::adaptive_max_pool2d_with_indices(x, {4, 3});
  });
  // NaNs propagate; of two NaNs in one window the later one is the index (and gets the gradient)
  check("adaptive_max_pool2d_nan",
        [](const Tensor& x) { return F::adaptive_max_pool2d_with_indices(x, 3); });
  // the module's forward_with_indices is the function's
  Tensor x = fx.input("adaptive_max_pool2d_indices", 0);
  auto [y, idx] = nn::AdaptiveMaxPool2d({4, 3}, true).forward_with_indices(x);
  SL_CHECK_CLOSE(idx, fx.get("adaptive_max_pool2d_indices.out.1"), 0, 0);
  SL_CHECK_CLOSE(y, fx.get("adaptive_max_pool2d_indices.out.0"), 0, 0);
}

TEST_CASE("adaptive max pooling: hand-derived ties, NaN and -inf windows") {
  // L = 8 -> 3 windows [0, 3), [2, 6), [5, 8) (start floor(i * 8 / 3), end ceil((i + 1) * 8 / 3))
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = from_vector<double>({1, 3, 3, 2, nan, 5, nan, 1}, {1, 1, 8});
  auto [y, idx] = F::adaptive_max_pool1d_with_indices(x, 3);
  // window 0: 3 at 1 and 2 tie -> the first, 1; windows 1 and 2 hold a NaN (at 4 and 6)
  CHECK(idx.to_vector<int64_t>() == std::vector<int64_t>{1, 4, 6});
  auto yv = y.to_vector<double>();
  CHECK(yv[0] == 3);
  CHECK(std::isnan(yv[1]));
  CHECK(std::isnan(yv[2]));
  // an all -inf window keeps its first position, as PyTorch (-inf is not > -inf)
  Tensor xi = from_vector<double>({-inf, -inf, 1}, {1, 1, 3});
  auto [yi, ii] = F::adaptive_max_pool1d_with_indices(xi, 2);  // windows [0, 2), [1, 3)
  CHECK(ii.to_vector<int64_t>() == std::vector<int64_t>{0, 2});
  CHECK(yi.to_vector<double>() == std::vector<double>{-inf, 1});
}

TEST_CASE("adaptive max pooling: output sizes, None entries, empty outputs, dtypes") {
  manual_seed(71);
  Tensor x = randn({2, 3, 5, 7});
  CHECK(F::adaptive_max_pool2d(x, {std::nullopt, 3}).sizes() == Shape{2, 3, 5, 3});
  CHECK(F::adaptive_max_pool2d(x, {2, std::nullopt}).sizes() == Shape{2, 3, 2, 7});
  // (None, None) keeps the input, and (as the windows are then single elements) its values
  SL_CHECK_CLOSE(F::adaptive_max_pool2d(x, {std::nullopt, std::nullopt}), x, 0, 0);
  // output size = input size: identity with indices 0 .. H * W - 1 in each plane
  auto [y, idx] = F::adaptive_max_pool2d_with_indices(x, {5, 7});
  SL_CHECK_CLOSE(y, x, 0, 0);
  SL_CHECK_CLOSE(idx[1][2], arange(0, 35, 1, {.dtype = DType::i64}).reshape({5, 7}), 0, 0);
  // a batch of 0 is allowed, as PyTorch
  CHECK(F::adaptive_max_pool2d(randn({0, 3, 4, 4}), 2).sizes() == Shape{0, 3, 2, 2});
  CHECK(F::adaptive_max_pool1d(randn({0, 3, 4}), 2).sizes() == Shape{0, 3, 2});
  // output size 0: an empty output, as PyTorch 1.13's forward; our backward gives the exact
  // gradient, zeros (PyTorch's refuses the empty grad_output), as adaptive_avg_pool2d
  Tensor xg = x.detach().requires_grad_();
  Tensor e = F::adaptive_max_pool2d(xg, 0);
  CHECK(e.sizes() == Shape{2, 3, 0, 0});
  e.sum().backward();
  SL_CHECK_CLOSE(xg.grad(), zeros({2, 3, 5, 7}), 0, 0);
  CHECK(F::adaptive_max_pool1d(randn({2, 3, 4}), 0).sizes() == Shape{2, 3, 0});
  // bfloat16 / float16 run through float32 on the CPU: the max of the rounded inputs is exact
  Tensor xb = x.to(DType::bf16);
  auto [yb, ib] = F::adaptive_max_pool2d_with_indices(xb, {2, 3});
  auto [yf, iff] = F::adaptive_max_pool2d_with_indices(xb.to(DType::f32), {2, 3});
  CHECK(yb.dtype() == DType::bf16);
  SL_CHECK_CLOSE(yb.to(DType::f32), yf, 0, 0);
  SL_CHECK_CLOSE(ib, iff, 0, 0);
  // the module in a Sequential (forward returns the output alone)
  nn::Sequential seq{std::make_shared<nn::AdaptiveMaxPool2d>(AdaptiveOutputSize<2>{2, 3})};
  SL_CHECK_CLOSE(seq.forward(x), F::adaptive_max_pool2d(x, {2, 3}), 0, 0);
  // 1-d equals the 2-d op over a height of 1
  Tensor x1 = randn({2, 3, 11});
  auto [y1, i1] = F::adaptive_max_pool1d_with_indices(x1, 4);
  auto [y2, i2] = F::adaptive_max_pool2d_with_indices(x1.unsqueeze(2), {1, 4});
  SL_CHECK_CLOSE(y1, y2.squeeze(2), 0, 0);
  SL_CHECK_CLOSE(i1, i2.squeeze(2), 0, 0);
}

TEST_CASE("adaptive max pooling gradchecks in float64") {
  manual_seed(72);
  // distinct values 0.1 apart (a permutation), so no two elements of a window tie within the
  // finite-difference step and the max's gradient is well defined
  Tensor x = (randperm(2 * 3 * 7 * 6).to(DType::f64) * 0.1).reshape({2, 3, 7, 6}).requires_grad_();
  Tensor xu = (randperm(3 * 4 * 5).to(DType::f64) * 0.1).reshape({3, 4, 5}).requires_grad_();
  Tensor x1 = (randperm(2 * 3 * 10).to(DType::f64) * 0.1).reshape({2, 3, 10}).requires_grad_();
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    Tensor in;
  };
  const std::vector<Case> cases = {
      {"2d down",
       [](const Tensor& t) {
         return F::adaptive_max_pool2d(t, {3, 4});
       },
       x},
      {"2d up (overlapping windows)",
       [](const Tensor& t) {
         return F::adaptive_max_pool2d(t, {9, 8});
       },
       x},
      {"2d None",
       [](const Tensor& t) {
         return F::adaptive_max_pool2d(t, {std::nullopt, 2});
       },
       x},
      {"2d unbatched", [](const Tensor& t) { return F::adaptive_max_pool2d(t, 3); }, xu},
      {"1d down", [](const Tensor& t) { return F::adaptive_max_pool1d(t, 4); }, x1},
      {"1d up", [](const Tensor& t) { return F::adaptive_max_pool1d(t, 13); }, x1},
      {"AdaptiveMaxPool2d",
       [](const Tensor& t) {
         return nn::AdaptiveMaxPool2d({2, 5}).forward(t);
       },
       x},
      {"AdaptiveMaxPool1d", [](const Tensor& t) { return nn::AdaptiveMaxPool1d(3).forward(t); },
       x1}};
  for (const Case& c : cases) {
    CAPTURE(c.name);
    CHECK(gradcheck([&](const TensorList& t) { return c.f(t[0]); }, {c.in}));
  }
}

TEST_CASE("adaptive max pooling errors name the op and the values") {
  Tensor x = randn({2, 3, 5, 5});
  SL_CHECK_THROWS(
      F::adaptive_max_pool2d(randn({5}), 2), ShapeError,
      "adaptive_max_pool2d: expected a 3-d [C, H, W] or 4-d [N, C, H, W] input, got [5]");
  SL_CHECK_THROWS(F::adaptive_max_pool2d(randn({3, 0, 4}), 2), ShapeError,
                  "adaptive_max_pool2d: expected non-empty non-batch dims, got [3, 0, 4] with dim "
                  "1 empty");
  SL_CHECK_THROWS(F::adaptive_max_pool2d(randn({2, 0, 4, 4}), 2), ShapeError,
                  "adaptive_max_pool2d: expected non-empty non-batch dims, got [2, 0, 4, 4] with "
                  "dim 1 empty");
  SL_CHECK_THROWS(F::adaptive_max_pool2d(x, {-1, 2}), ShapeError,
                  "adaptive_max_pool2d: output_size must be non-negative, got [-1, 2]");
  SL_CHECK_THROWS(F::adaptive_max_pool2d(x.to(DType::i64), 2), DTypeError,
                  "adaptive_max_pool2d: expected a floating input, got int64");
  SL_CHECK_THROWS(F::adaptive_max_pool2d(x, AdaptiveOutputSize<2>()), ValueError,
                  "adaptive_max_pool2d: output_size must be given");
  SL_CHECK_THROWS(F::adaptive_max_pool2d(Tensor(), 2), ValueError, "adaptive_max_pool2d");
  SL_CHECK_THROWS(F::adaptive_max_pool2d(x, {1, 2, 3}), ValueError,
                  "output_size: expected 1 or 2 values, got 3");
  SL_CHECK_THROWS(F::adaptive_max_pool1d(x, 2), ShapeError,
                  "adaptive_max_pool1d: expected a 2-d [C, L] or 3-d [N, C, L] input, got [2, 3, "
                  "5, 5]");
  SL_CHECK_THROWS(F::adaptive_max_pool1d(randn({2, 3, 0}), 2), ShapeError,
                  "adaptive_max_pool1d: expected non-empty non-batch dims, got [2, 3, 0] with dim "
                  "2 empty");
  SL_CHECK_THROWS(F::adaptive_max_pool1d(randn({2, 0, 3}), 2), ShapeError,
                  "adaptive_max_pool1d: expected non-empty non-batch dims, got [2, 0, 3] with dim "
                  "1 empty");
  SL_CHECK_THROWS(F::adaptive_max_pool1d(randn({2, 3, 4}), -3), ShapeError,
                  "adaptive_max_pool1d: output_size must be non-negative, got -3");
  SL_CHECK_THROWS(F::adaptive_max_pool1d(randn({2, 3, 4}).to(DType::i32), 2), DTypeError,
                  "adaptive_max_pool1d: expected a floating input, got int32");
  SL_CHECK_THROWS(nn::AdaptiveMaxPool2d({std::nullopt, -2}), ValueError,
                  "AdaptiveMaxPool2d: output_size must be non-negative, got (None, -2)");
  SL_CHECK_THROWS(nn::AdaptiveMaxPool2d(AdaptiveOutputSize<2>()), ValueError,
                  "AdaptiveMaxPool2d: output_size must be given");
  SL_CHECK_THROWS(nn::AdaptiveMaxPool1d(-1), ValueError,
                  "AdaptiveMaxPool1d: output_size must be non-negative, got -1");
  SL_CHECK_THROWS(nn::AdaptiveMaxPool2d(2).forward(Tensor()), ValueError,
                  "AdaptiveMaxPool2d: the input is undefined");
  // a module built with return_indices returns the pair in PyTorch: forward refuses, pointing
  // at forward_with_indices
  SL_CHECK_THROWS(nn::AdaptiveMaxPool2d(2, true).forward(x), ValueError,
                  "AdaptiveMaxPool2d: built with return_indices=true");
  SL_CHECK_THROWS(nn::AdaptiveMaxPool1d(2, true).forward(randn({2, 3, 4})), ValueError,
                  "AdaptiveMaxPool1d: built with return_indices=true");
  // module errors at forward are the functions'
  SL_CHECK_THROWS(nn::AdaptiveMaxPool1d(2).forward(x), ShapeError,
                  "adaptive_max_pool1d: expected a 2-d [C, L] or 3-d [N, C, L] input");
}
