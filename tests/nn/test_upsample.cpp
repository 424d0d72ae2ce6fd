// F::interpolate / nn::Upsample: parity with PyTorch 1.13 (fixture family "upsample", made by
// tools/gen_nn_fixtures.py: each case's call is repeated here next to its name), float64
// gradchecks, the errors, empty batches and 16-bit inputs.
#include "autograd/gradcheck.h"
#include "fixture.h"
#include "nn/functional.h"
#include "nn/upsample.h"

using namespace sl;
using sl::testing::Fixture;
namespace F = sl::nn::functional;

namespace {
// float32 cases: rtol 1e-5, atol 1e-6 (the nn parity default). Both sides compute the same
// products in float32 (the same index and weight rules), and gradients sum at most a few dozen
// terms in a possibly different order.
constexpr double kRtol = 1e-5, kAtol = 1e-6;

void run_case(const Fixture& fx, const std::string& name,
              const std::function<Tensor(const Tensor&)>& fn, double rtol = kRtol,
              double atol = kAtol) {
  CAPTURE(name);
  Tensor x = fx.input(name, 0);
  fx.check_backward(name, {fn(x)}, {x}, nullptr, rtol, atol);
}

std::function<Tensor(const Tensor&)> interp(InterpolateOptions o) {
  return [o](const Tensor& x) { return F::interpolate(x, o); };
}
}  // namespace

TEST_CASE("interpolate matches PyTorch: nearest") {
  Fixture fx("upsample");
  nn::Upsample up2({.scale_factor = {2}, .mode = "nearest"});
  run_case(fx, "nearest_2x", [&](const Tensor& x) { return up2.forward(x); });
  run_case(fx, "nearest_scale_1_7", interp({.scale_factor = {1.7}, .mode = "nearest"}));
  run_case(fx, "nearest_shrink", interp({.size = {3, 4}, .mode = "nearest"}));
  // The given scale is what the forward's index rule uses: 10 * 2.05 gives 20 outputs reading
  // floor(o / 2.05) (0, 0, 0, 1, ...), not o / 2; 4 * 1.1 gives 4 outputs reading 0, 0, 1, 2.
  // Forward only: PyTorch 1.13's backward for these takes the shortcuts (out == 2 * in halves,
  // out == in copies), so its stored gradient is not the gradient of its own forward; ours is
  // (the gradchecks below run these two cases).
  for (const auto& [name, o] : std::vector<std::pair<std::string, InterpolateOptions>>{
           {"nearest_1d_2_05", {.scale_factor = {2.05}}},
           {"nearest_2d_scale_kept", {.scale_factor = {1.1, 2.05}}}}) {
    CAPTURE(name);
    SL_CHECK_CLOSE(F::interpolate(fx.input(name, 0), o), fx.get(name + ".out.0"), 0, 0);
  }
  run_case(fx, "nearest_recompute",
           interp({.scale_factor = {1.7}, .mode = "nearest", .recompute_scale_factor = true}));
}

TEST_CASE("interpolate matches PyTorch: linear and bilinear") {
  Fixture fx("upsample");
  run_case(fx, "bilinear_up",
           interp({.scale_factor = {1.7}, .mode = "bilinear", .align_corners = false}));
  run_case(fx, "bilinear_up_ac",
           interp({.scale_factor = {1.7}, .mode = "bilinear", .align_corners = true}));
  run_case(fx, "bilinear_down",
           interp({.size = {3, 2}, .mode = "bilinear", .align_corners = false}));
  run_case(fx, "bilinear_down_ac",
           interp({.size = {3, 2}, .mode = "bilinear", .align_corners = true}));
  nn::Upsample per_dim({.size = {6, 9}, .mode = "bilinear"});
  run_case(fx, "bilinear_size_per_dim", [&](const Tensor& x) { return per_dim.forward(x); });
  run_case(fx, "bilinear_scale_per_dim", interp({.scale_factor = {0.6, 2.5}, .mode = "bilinear"}));
  run_case(fx, "bilinear_recompute",
           interp({.scale_factor = {1.7}, .mode = "bilinear", .recompute_scale_factor = true}));
  run_case(fx, "linear_1d", interp({.scale_factor = {2.5}, .mode = "linear"}));
  run_case(fx, "linear_1d_ac", interp({.size = {8}, .mode = "linear", .align_corners = true}));
  // 5 * 1.1 gives 5 outputs: copied (PyTorch's out == in rule), not resampled at 1 / 1.1
  run_case(fx, "linear_1d_same", interp({.scale_factor = {1.1}, .mode = "linear"}));
  // float64: the same arithmetic in double on both sides, so agreement near double rounding
  run_case(fx, "bilinear_f64", interp({.scale_factor = {1.5}, .mode = "bilinear"}), 1e-12, 1e-12);
}

TEST_CASE("interpolate matches PyTorch: nearest-exact and area") {
  Fixture fx("upsample");
  run_case(fx, "nearest_exact_up", interp({.scale_factor = {1.7}, .mode = "nearest-exact"}));
  run_case(fx, "nearest_exact_shrink", interp({.size = {3, 4}, .mode = "nearest-exact"}));
  run_case(fx, "nearest_exact_1d", interp({.scale_factor = {2.05}, .mode = "nearest-exact"}));
  nn::Upsample exact({.size = {7, 3}, .mode = "nearest-exact"});
  run_case(fx, "nearest_exact_module", [&](const Tensor& x) { return exact.forward(x); });
  // area is adaptive average pooling: the same window sums as PyTorch's, in float32
  run_case(fx, "area_down", interp({.size = {3, 2}, .mode = "area"}));
  run_case(fx, "area_scale", interp({.scale_factor = {0.6}, .mode = "area"}));
  nn::Upsample area_up({.size = {6, 9}, .mode = "area"});
  run_case(fx, "area_up", [&](const Tensor& x) { return area_up.forward(x); });
  run_case(fx, "area_1d", interp({.size = {4}, .mode = "area"}));
  // float64 computes the exact rule's product in double, as PyTorch's CPU forward: (20 + 0.5) *
  // (2 / 41) reaches 1 there, so output 20 reads index 1 (float arithmetic would read 0)
  SL_CHECK_CLOSE(
      F::interpolate(fx.input("nearest_exact_f64_41", 0), {.size = {41}, .mode = "nearest-exact"}),
      fx.get("nearest_exact_f64_41.out.0"), 0, 0);
  CHECK(nn::Upsample({.scale_factor = {2}, .mode = "nearest-exact"}).str() ==
        "Upsample(scale_factor=2.0, mode=nearest-exact)");
}

TEST_CASE("interpolate: hand-computed values") {
  // corners aligned: [0, 1, 2] to 5 samples steps by (3 - 1) / (5 - 1) = 0.5
  Tensor x = tensor({0.0, 1.0, 2.0}).view({1, 1, 3});
  SL_CHECK_CLOSE(F::interpolate(x, {.size = {5}, .mode = "linear", .align_corners = true}),
                 tensor({0.0, 0.5, 1.0, 1.5, 2.0}).view({1, 1, 5}), 0, 0);
  // centres aligned, x2: output o reads src = (o + 0.5) / 2 - 0.5 clamped to [0, 2]:
  // 0, 0.25, 0.75, 1.25, 1.75, 2 (the last: i0 = 2 at the border, its weight 1)
  SL_CHECK_CLOSE(F::interpolate(x, {.scale_factor = {2}, .mode = "linear"}),
                 tensor({0.0, 0.25, 0.75, 1.25, 1.75, 2.0}).view({1, 1, 6}), 0, 0);
  // nearest x1.5 on [0, 1]: 3 outputs read floor(o / 1.5) = 0, 0, 1
  Tensor y = tensor({0.0, 1.0}).view({1, 1, 2});
  SL_CHECK_CLOSE(F::interpolate(y, {.scale_factor = {1.5}}),
                 tensor({0.0, 0.0, 1.0}).view({1, 1, 3}), 0, 0);
  // nearest-exact x1.5 on [0, 1]: floor((o + 0.5) / 1.5) = 0, 1, 1 (centres, not left edges)
  SL_CHECK_CLOSE(F::interpolate(y, {.scale_factor = {1.5}, .mode = "nearest-exact"}),
                 tensor({0.0, 1.0, 1.0}).view({1, 1, 3}), 0, 0);
  // area from 4 to 2 samples averages pairs
  SL_CHECK_CLOSE(
      F::interpolate(tensor({1.0, 3.0, 5.0, 9.0}).view({1, 1, 4}), {.size = {2}, .mode = "area"}),
      tensor({2.0, 7.0}).view({1, 1, 2}), 0, 0);
}

TEST_CASE("interpolate gradchecks in float64") {
  manual_seed(71);
  TensorOptions f64{.dtype = DType::f64};
  const std::vector<InterpolateOptions> cases = {
      {.scale_factor = {1.7}, .mode = "bilinear"},
      {.scale_factor = {1.7}, .mode = "bilinear", .align_corners = true},
      {.size = {2, 3}, .mode = "bilinear"},
      {.size = {2, 3}, .mode = "bilinear", .align_corners = true},
      {.scale_factor = {0.7, 2.2}, .mode = "bilinear"},
      {.scale_factor = {1.7}, .mode = "nearest"},
      {.size = {3, 2}, .mode = "nearest"},
      {.scale_factor = {1.1, 2.05}, .mode = "nearest"},  // out == in and out == 2 * in
      {.scale_factor = {1.7}, .mode = "nearest-exact"},
      {.size = {3, 7}, .mode = "nearest-exact"},
      {.size = {3, 2}, .mode = "area"},
      {.scale_factor = {1.6}, .mode = "area"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    Tensor x = randn({2, 2, 4, 5}, f64).requires_grad_();
    CHECK(gradcheck([&](const TensorList& t) { return F::interpolate(t[0], cases[i]); }, {x}));
  }
  for (const InterpolateOptions& o :
       std::vector<InterpolateOptions>{{.scale_factor = {2.5}, .mode = "linear"},
                                       {.size = {3}, .mode = "linear", .align_corners = true},
                                       {.scale_factor = {1.3}, .mode = "nearest"},
                                       {.scale_factor = {2.05}, .mode = "nearest"},
                                       {.scale_factor = {0.7}, .mode = "nearest-exact"},
                                       {.size = {4}, .mode = "area"}}) {
    Tensor x = randn({2, 3, 6}, f64).requires_grad_();
    CHECK(gradcheck([&](const TensorList& t) { return F::interpolate(t[0], o); }, {x}));
  }
}

TEST_CASE("interpolate: empty batch, 16-bit inputs, non-contiguous inputs") {
  Tensor e = randn({0, 2, 4, 4}).requires_grad_();
  Tensor y = F::interpolate(e, {.scale_factor = {2}, .mode = "bilinear"});
  CHECK(y.sizes() == Shape{0, 2, 8, 8});
  y.sum().backward();
  CHECK(e.grad().sizes() == Shape{0, 2, 4, 4});
  CHECK(F::interpolate(randn({0, 3, 5}), {.size = {7}}).sizes() == Shape{0, 3, 7});
  // 16-bit storage is computed in float32 and rounded once, as the rest of core on the CPU
  Tensor x = randn({1, 2, 3, 4});
  for (DType dt : {DType::bf16, DType::f16}) {
    InterpolateOptions o{.scale_factor = {1.5}, .mode = "bilinear"};
    SL_CHECK_CLOSE(F::interpolate(x.to(dt), o), F::interpolate(x.to(dt).to(DType::f32), o).to(dt),
                   0, 0);
  }
  // a transposed (non-contiguous) input reads the same values as its contiguous copy
  Tensor t = randn({1, 2, 5, 3}).transpose(2, 3);
  InterpolateOptions o{.size = {4, 7}, .mode = "bilinear"};
  SL_CHECK_CLOSE(F::interpolate(t, o), F::interpolate(t.contiguous(), o), 0, 0);
}

TEST_CASE("interpolate errors name the op, the values and the expectation") {
  Tensor x = randn({1, 2, 4, 4});
  SL_CHECK_THROWS(F::interpolate(x, {.size = {3}, .scale_factor = {2}}), ValueError,
                  "interpolate: only one of size or scale_factor should be defined, got size [3] "
                  "and scale_factor [2]");
  SL_CHECK_THROWS(F::interpolate(x, {}), ValueError,
                  "interpolate: either size or scale_factor should be defined");
  SL_CHECK_THROWS(F::interpolate(x, {.size = {3}, .align_corners = false}), ValueError,
                  "interpolate: align_corners option can only be set with the interpolating "
                  "modes linear | bilinear | bicubic | trilinear, got align_corners=False with "
                  "mode 'nearest'");
  SL_CHECK_THROWS(F::interpolate(x, {.size = {3}, .mode = "area", .align_corners = true}),
                  ValueError,
                  "interpolate: align_corners option can only be set with the interpolating "
                  "modes linear | bilinear | bicubic | trilinear, got align_corners=True with "
                  "mode 'area'");
  SL_CHECK_THROWS(F::interpolate(randn({2, 4}), {.size = {3}, .mode = "nearest-exact"}), ShapeError,
                  "interpolate: mode 'nearest-exact' expects a 3-d [N, C, W], 4-d [N, C, H, W] or "
                  "5-d [N, C, D, H, W] input, got [2, 4]");
  SL_CHECK_THROWS(F::interpolate(x, {.size = {3}, .mode = "linear"}), ShapeError,
                  "interpolate: mode 'linear' expects a 3-d input [N, C, W], got [1, 2, 4, 4]");
  SL_CHECK_THROWS(F::interpolate(randn({1, 2, 4}), {.size = {3}, .mode = "bilinear"}), ShapeError,
                  "interpolate: mode 'bilinear' expects a 4-d input [N, C, H, W], got [1, 2, 4]");
  SL_CHECK_THROWS(F::interpolate(randn({2, 4}), {.size = {3}}), ShapeError,
                  "interpolate: mode 'nearest' expects a 3-d [N, C, W], 4-d [N, C, H, W] or "
                  "5-d [N, C, D, H, W] input, got [2, 4]");
  SL_CHECK_THROWS(F::interpolate(x, {.size = {3}, .mode = "cubic"}), ValueError,
                  "interpolate: mode must be one of nearest | nearest-exact | area | linear | "
                  "bilinear | bicubic | trilinear, got 'cubic'");
  SL_CHECK_THROWS(F::interpolate(x, {.size = {3, 0}}), ValueError,
                  "interpolate: size must be positive, got [3, 0]");
  SL_CHECK_THROWS(F::interpolate(x, {.size = {-3}}), ValueError,
                  "interpolate: size must be positive, got [-3]");
  SL_CHECK_THROWS(F::interpolate(x, {.scale_factor = {-2}}), ValueError,
                  "interpolate: scale_factor must be positive and finite, got [-2]");
  SL_CHECK_THROWS(F::interpolate(x, {.scale_factor = {0}}), ValueError,
                  "interpolate: scale_factor must be positive and finite, got [0]");
  SL_CHECK_THROWS(F::interpolate(x, {.scale_factor = {INFINITY}}), ValueError,
                  "interpolate: scale_factor must be positive and finite, got [inf]");
  SL_CHECK_THROWS(F::interpolate(x, {.scale_factor = {0.1}}), ShapeError,
                  "interpolate: output size floor(4 * 0.1) = 0 must be at least 1");
  SL_CHECK_THROWS(F::interpolate(x, {.size = {3, 3, 3}}), ValueError,
                  "interpolate: size must hold one value or one per spatial dim (2), got "
                  "[3, 3, 3] for input [1, 2, 4, 4]");
  SL_CHECK_THROWS(F::interpolate(x, {.scale_factor = {2, 2, 2}}), ValueError,
                  "interpolate: scale_factor must hold one value or one per spatial dim (2), got "
                  "[2, 2, 2] for input [1, 2, 4, 4]");
  SL_CHECK_THROWS(F::interpolate(x, {.size = {3}, .recompute_scale_factor = true}), ValueError,
                  "interpolate: recompute_scale_factor is not meaningful with an explicit size");
  SL_CHECK_THROWS(F::interpolate(randn({1, 2, 0, 4}), {.scale_factor = {2}}), ShapeError,
                  "interpolate: expected non-empty spatial dims, got input [1, 2, 0, 4]");
  // PyTorch 1.13 refuses integer and bool inputs for every mode here (uint8 nearest aside, a
  // dtype Shardlight has not)
  for (DType dt : {DType::i64, DType::i32, DType::b8}) {
    CAPTURE(dt);
    SL_CHECK_THROWS(
        F::interpolate(zeros({1, 1, 2, 2}, {.dtype = dt}), {.scale_factor = {2}}), DTypeError,
        (std::string("interpolate: expected a floating input, got ") + dtype_name(dt)).c_str());
  }
}

TEST_CASE("Upsample: repr and construction errors as PyTorch") {
  CHECK(nn::Upsample({.scale_factor = {2}, .mode = "bilinear"}).str() ==
        "Upsample(scale_factor=2.0, mode=bilinear)");
  CHECK(nn::Upsample({.size = {3, 4}}).str() == "Upsample(size=(3, 4), mode=nearest)");
  CHECK(nn::Upsample({.size = {5}, .mode = "linear"}).str() == "Upsample(size=5, mode=linear)");
  CHECK(nn::Upsample({.scale_factor = {1.5, 2}}).str() ==
        "Upsample(scale_factor=(1.5, 2.0), mode=nearest)");
  SL_CHECK_THROWS(nn::Upsample({.size = {2}, .mode = "nearest", .align_corners = true}), ValueError,
                  "Upsample: align_corners option can only be set");
  SL_CHECK_THROWS(nn::Upsample({}), ValueError,
                  "Upsample: exactly one of size or scale_factor should be defined, got 0 size "
                  "and 0 scale_factor values");
  SL_CHECK_THROWS(nn::Upsample({.scale_factor = {-1}}), ValueError,
                  "Upsample: scale_factor must be positive and finite, got -1.0");
  SL_CHECK_THROWS(nn::Upsample({.size = {0, 2}}), ValueError,
                  "Upsample: size must be positive, got (0, 2)");
  SL_CHECK_THROWS(nn::Upsample({.size = {2}, .mode = "Bilinear"}), ValueError,
                  "Upsample: mode must be one of nearest | nearest-exact | area | linear | "
                  "bilinear | bicubic | trilinear, got 'Bilinear'");
}
