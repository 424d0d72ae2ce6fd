// F::interpolate / nn::Upsample's trilinear, bicubic and antialias modes: parity with PyTorch
// 1.13 (fixture family "upsample", cases made by gen_upsample_cubic in tools/gen_nn_fixtures.py:
// each case's call is repeated here next to its name), float64 gradchecks, hand-computed values
// and the errors. The other modes: test_upsample.cpp.
#include "autograd/gradcheck.h"
#include "fixture.h"
#include "nn/functional.h"
#include "nn/upsample.h"

using namespace sl;
using sl::testing::Fixture;
namespace F = sl::nn::functional;

namespace {
// float32 cases: rtol 1e-5, atol 1e-6 (the nn parity default). Both sides compute the same
// products in float32 (the same index and weight rules, in PyTorch's order for the forward), and
// gradients sum at most a few dozen terms (antialias: a window of up to ~20 taps per dim) in a
// possibly different order.
constexpr double kRtol = 1e-5, kAtol = 1e-6;
// float64: the same arithmetic in double on both sides, so agreement near double rounding
constexpr double kTol64 = 1e-12;
// float32 bicubic: Keys' far-tap weight ((A x - 5 A) x + 8 A) x - 4 A cancels (terms near 5, value
// near 0.05), and PyTorch's build contracts it into FMAs, so its float32 weights differ from ours
// by up to 5e-7 (measured on these fixtures by reading PyTorch's weights back from one-hot inputs:
// ours are the uncontracted float evaluation); with inputs up to ~3 in size an output differs by
// up to 1.7e-6 (measured). The relative part stays at the default.
constexpr double kCubicAtol = 5e-6;

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

TEST_CASE("interpolate matches PyTorch: trilinear") {
  Fixture fx("upsample");
  run_case(fx, "trilinear_up", interp({.scale_factor = {1.7}, .mode = "trilinear"}));
  run_case(fx, "trilinear_up_ac",
           interp({.scale_factor = {1.7}, .mode = "trilinear", .align_corners = true}));
  run_case(fx, "trilinear_down", interp({.size = {2, 3, 2}, .mode = "trilinear"}));
  run_case(fx, "trilinear_down_ac",
           interp({.size = {2, 3, 2}, .mode = "trilinear", .align_corners = true}));
  run_case(fx, "trilinear_scale_per_dim",
           interp({.scale_factor = {0.6, 2.5, 1.3}, .mode = "trilinear"}));
  run_case(fx, "trilinear_recompute",
           interp({.scale_factor = {1.7}, .mode = "trilinear", .recompute_scale_factor = true}));
  nn::Upsample up({.size = {4, 6, 3}, .mode = "trilinear"});
  CHECK(up.str() == "Upsample(size=(4, 6, 3), mode=trilinear)");
  run_case(fx, "trilinear_module", [&](const Tensor& x) { return up.forward(x); });
  // 5 * 1.1 = 5 along D: copied there (PyTorch's out == in rule), resampled along H and W
  run_case(fx, "trilinear_same_d", interp({.scale_factor = {1.1, 2.0, 0.5}, .mode = "trilinear"}));
  run_case(fx, "trilinear_f64", interp({.scale_factor = {1.5}, .mode = "trilinear"}), kTol64,
           kTol64);
}

TEST_CASE("interpolate matches PyTorch: bicubic") {
  Fixture fx("upsample");
  run_case(fx, "bicubic_up", interp({.scale_factor = {1.7}, .mode = "bicubic"}), kRtol, kCubicAtol);
  run_case(fx, "bicubic_up_ac",
           interp({.scale_factor = {1.7}, .mode = "bicubic", .align_corners = true}), kRtol,
           kCubicAtol);
  run_case(fx, "bicubic_down", interp({.size = {3, 2}, .mode = "bicubic"}), kRtol, kCubicAtol);
  run_case(fx, "bicubic_down_ac",
           interp({.size = {3, 2}, .mode = "bicubic", .align_corners = true}), kRtol, kCubicAtol);
  run_case(fx, "bicubic_scale_per_dim", interp({.scale_factor = {0.6, 2.5}, .mode = "bicubic"}),
           kRtol, kCubicAtol);
  run_case(fx, "bicubic_recompute",
           interp({.scale_factor = {1.7}, .mode = "bicubic", .recompute_scale_factor = true}),
           kRtol, kCubicAtol);
  nn::Upsample up({.size = {6, 9}, .mode = "bicubic", .align_corners = true});
  run_case(
      fx, "bicubic_module", [&](const Tensor& x) { return up.forward(x); }, kRtol, kCubicAtol);
  // a 1 x 2 input to 5 x 4: nearly every tap is clamped to the border
  run_case(fx, "bicubic_tiny", interp({.size = {5, 4}, .mode = "bicubic"}), kRtol, kCubicAtol);
  run_case(fx, "bicubic_f64", interp({.scale_factor = {1.5}, .mode = "bicubic"}), kTol64, kTol64);
  run_case(fx, "bicubic_f64_ac", interp({.size = {2, 3}, .mode = "bicubic", .align_corners = true}),
           kTol64, kTol64);
  // 5 * 1.1 = 5: unlike linear there is no copy rule, the forward resamples at 1 / 1.1. Forward
  // only: PyTorch 1.13's backward copies there, so its stored gradient is not the gradient of
  // its own forward; ours is (gradchecked below)
  SL_CHECK_CLOSE(
      F::interpolate(fx.input("bicubic_same_scale", 0), {.scale_factor = {1.1}, .mode = "bicubic"}),
      fx.get("bicubic_same_scale.out.0"), kRtol, kCubicAtol);
}

TEST_CASE("interpolate matches PyTorch: antialias") {
  Fixture fx("upsample");
  run_case(fx, "aa_bilinear_down", interp({.size = {3, 2}, .mode = "bilinear", .antialias = true}));
  run_case(fx, "aa_bilinear_down_ac",
           interp({.size = {3, 2}, .mode = "bilinear", .align_corners = true, .antialias = true}));
  run_case(fx, "aa_bilinear_scale",
           interp({.scale_factor = {0.45}, .mode = "bilinear", .antialias = true}));
  run_case(fx, "aa_bilinear_up",
           interp({.scale_factor = {1.7}, .mode = "bilinear", .antialias = true}));
  run_case(fx, "aa_bicubic_down", interp({.size = {3, 4}, .mode = "bicubic", .antialias = true}));
  run_case(fx, "aa_bicubic_down_ac",
           interp({.size = {3, 4}, .mode = "bicubic", .align_corners = true, .antialias = true}));
  run_case(fx, "aa_bicubic_scale_per_dim",
           interp({.scale_factor = {0.3, 1.6}, .mode = "bicubic", .antialias = true}));
  run_case(fx, "aa_bicubic_up",
           interp({.scale_factor = {2}, .mode = "bicubic", .antialias = true}));
  run_case(fx, "aa_bicubic_recompute",
           interp({.scale_factor = {0.45},
                   .mode = "bicubic",
                   .recompute_scale_factor = true,
                   .antialias = true}));
  run_case(fx, "aa_bilinear_f64", interp({.size = {3, 4}, .mode = "bilinear", .antialias = true}),
           kTol64, kTol64);
  run_case(fx, "aa_bicubic_f64",
           interp({.scale_factor = {0.35}, .mode = "bicubic", .antialias = true}), kTol64, kTol64);
}

TEST_CASE("interpolate bicubic and antialias: hand-computed values") {
  // bicubic, corners aligned, [0, 1, 2, 3] to 7 samples: a cubic reproduces a linear ramp away
  // from the clamped border, so the inner samples are the ramp's (0.5 steps); at the ends the
  // clamped taps still give the end values (t = 0 weighs only the centre tap)
  Tensor ramp = tensor({0.0, 1.0, 2.0, 3.0}).view({1, 1, 1, 4});
  Tensor y = F::interpolate(ramp, {.size = {1, 7}, .mode = "bicubic", .align_corners = true});
  SL_CHECK_CLOSE(y.narrow(3, 0, 1), tensor({0.0}).view({1, 1, 1, 1}), 0, 1e-15);
  SL_CHECK_CLOSE(y.narrow(3, 2, 3), tensor({1.0, 1.5, 2.0}).view({1, 1, 1, 3}), 0, 1e-15);
  SL_CHECK_CLOSE(y.narrow(3, 6, 1), tensor({3.0}).view({1, 1, 1, 1}), 0, 1e-15);
  // output 1 reads src 0.5: taps -1, 0, 1, 2 clamped to 0, 0, 1, 2; Keys' weights at t = 0.5 are
  // -0.09375, 0.59375, 0.59375, -0.09375: 0.59375 + 2 * -0.09375 = 0.40625 (not the ramp's 0.5)
  SL_CHECK_CLOSE(y.narrow(3, 1, 1), tensor({0.40625}).view({1, 1, 1, 1}), 0, 1e-15);
  // antialiased bilinear halving of [1, 3, 5, 9]: scale 2, support 2; output 0's centre is 1 and
  // its window inputs 0..2 weigh tri((j - 1 + 0.5) / 2) = 0.75, 0.75, 0.25 (sum 1.75), so
  // (0.75 + 2.25 + 1.25) / 1.75; output 1 (centre 3): inputs 1..3 weigh 0.25, 0.75, 0.75
  Tensor x = tensor({1.0, 3.0, 5.0, 9.0}).view({1, 1, 1, 4});
  SL_CHECK_CLOSE(F::interpolate(x, {.size = {1, 2}, .mode = "bilinear", .antialias = true}),
                 tensor({4.25 / 1.75, (0.75 + 3.75 + 6.75) / 1.75}).view({1, 1, 1, 2}), 1e-15, 0);
  // trilinear of a 2 x 2 x 2 cube to one sample, corners aligned off: the centre, the mean
  Tensor cube = arange(0, 8, 1, {.dtype = DType::f64}).view({1, 1, 2, 2, 2});
  SL_CHECK_CLOSE(F::interpolate(cube, {.size = {1}, .mode = "trilinear"}),
                 tensor({3.5}).view({1, 1, 1, 1, 1}), 0, 1e-15);
}

TEST_CASE("interpolate trilinear, bicubic and antialias gradchecks in float64") {
  manual_seed(72);
  TensorOptions f64{.dtype = DType::f64};
  for (const InterpolateOptions& o : std::vector<InterpolateOptions>{
           {.scale_factor = {1.7}, .mode = "trilinear"},
           {.scale_factor = {1.7}, .mode = "trilinear", .align_corners = true},
           {.size = {2, 3, 2}, .mode = "trilinear"},
           {.size = {1, 3, 2}, .mode = "trilinear", .align_corners = true},
           {.scale_factor = {1.1, 0.6, 2.2}, .mode = "trilinear"},
       }) {
    CAPTURE(o.mode);
    Tensor x = randn({1, 2, 3, 4, 5}, f64).requires_grad_();
    CHECK(gradcheck([&](const TensorList& t) { return F::interpolate(t[0], o); }, {x}));
  }
  const std::vector<InterpolateOptions> planar = {
      {.scale_factor = {1.7}, .mode = "bicubic"},
      {.scale_factor = {1.7}, .mode = "bicubic", .align_corners = true},
      {.size = {2, 3}, .mode = "bicubic"},
      {.size = {2, 1}, .mode = "bicubic", .align_corners = true},
      {.scale_factor = {1.1}, .mode = "bicubic"},  // out == in, resampled at 1 / 1.1
      {.scale_factor = {0.7, 2.2}, .mode = "bicubic"},
      {.size = {9, 2}, .mode = "bicubic"},
      {.size = {2, 3}, .mode = "bilinear", .antialias = true},
      {.size = {2, 3}, .mode = "bilinear", .align_corners = true, .antialias = true},
      {.scale_factor = {1.7, 0.4}, .mode = "bilinear", .antialias = true},
      {.size = {2, 3}, .mode = "bicubic", .antialias = true},
      {.size = {1, 2}, .mode = "bicubic", .align_corners = true, .antialias = true},
      {.scale_factor = {1.1, 2.5}, .mode = "bicubic", .antialias = true},
  };
  for (size_t i = 0; i < planar.size(); ++i) {
    CAPTURE(i);
    Tensor x = randn({2, 2, 4, 5}, f64).requires_grad_();
    CHECK(gradcheck([&](const TensorList& t) { return F::interpolate(t[0], planar[i]); }, {x}));
  }
}

TEST_CASE("interpolate trilinear, bicubic, antialias: empty batch, 16-bit, non-contiguous") {
  Tensor e = randn({0, 2, 3, 4, 4}).requires_grad_();
  Tensor y = F::interpolate(e, {.scale_factor = {2}, .mode = "trilinear"});
  CHECK(y.sizes() == Shape{0, 2, 6, 8, 8});
  y.sum().backward();
  CHECK(e.grad().sizes() == Shape{0, 2, 3, 4, 4});
  CHECK(F::interpolate(randn({0, 3, 5, 4}), {.size = {2}, .mode = "bicubic", .antialias = true})
            .sizes() == Shape{0, 3, 2, 2});
  // 16-bit storage is computed in float32 and rounded once, as the rest of core on the CPU
  for (const InterpolateOptions& o :
       std::vector<InterpolateOptions>{{.scale_factor = {1.5}, .mode = "bicubic"},
                                       {.size = {2, 3}, .mode = "bicubic", .antialias = true}}) {
    Tensor x = randn({1, 2, 5, 7});
    for (DType dt : {DType::bf16, DType::f16}) {
      SL_CHECK_CLOSE(F::interpolate(x.to(dt), o), F::interpolate(x.to(dt).to(DType::f32), o).to(dt),
                     0, 0);
    }
  }
  // a transposed (non-contiguous) input reads the same values as its contiguous copy
  Tensor t = randn({1, 2, 3, 5, 4}).transpose(2, 4);
  InterpolateOptions o{.size = {3, 7, 2}, .mode = "trilinear"};
  SL_CHECK_CLOSE(F::interpolate(t, o), F::interpolate(t.contiguous(), o), 0, 0);
}

TEST_CASE("interpolate trilinear / bicubic / antialias errors as PyTorch") {
  SL_CHECK_THROWS(F::interpolate(randn({1, 2, 4, 4}), {.size = {3}, .mode = "trilinear"}),
                  ShapeError,
                  "interpolate: mode 'trilinear' expects a 5-d input [N, C, D, H, W], got "
                  "[1, 2, 4, 4]");
  SL_CHECK_THROWS(F::interpolate(randn({1, 2, 4}), {.size = {3}, .mode = "bicubic"}), ShapeError,
                  "interpolate: mode 'bicubic' expects a 4-d input [N, C, H, W], got [1, 2, 4]");
  SL_CHECK_THROWS(F::interpolate(randn({1, 2, 3, 4, 4}), {.size = {3}, .mode = "bicubic"}),
                  ShapeError,
                  "interpolate: mode 'bicubic' expects a 4-d input [N, C, H, W], got "
                  "[1, 2, 3, 4, 4]");
  SL_CHECK_THROWS(F::interpolate(randn({1, 2, 3, 4, 4}), {.size = {3}, .mode = "bilinear"}),
                  ShapeError,
                  "interpolate: mode 'bilinear' expects a 4-d input [N, C, H, W], got "
                  "[1, 2, 3, 4, 4]");
  SL_CHECK_THROWS(F::interpolate(randn({1, 2, 3, 4, 4}), {.size = {3, 3}, .mode = "trilinear"}),
                  ValueError,
                  "interpolate: size must hold one value or one per spatial dim (3), got [3, 3] "
                  "for input [1, 2, 3, 4, 4]");
  // PyTorch: "Anti-alias option is only supported for bilinear and bicubic modes"
  for (const char* mode : {"nearest", "nearest-exact", "area", "linear", "trilinear"}) {
    CAPTURE(mode);
    SL_CHECK_THROWS(
        F::interpolate(randn({1, 2, 4, 4}), {.size = {3}, .mode = mode, .antialias = true}),
        ValueError,
        (std::string("interpolate: antialias is only supported for the bilinear and bicubic "
                     "modes, got mode '") +
         mode + "'")
            .c_str());
  }
  SL_CHECK_THROWS(nn::Upsample({.size = {2}, .mode = "linear", .antialias = true}), ValueError,
                  "Upsample: antialias is only supported for the bilinear and bicubic modes");
  // align_corners is accepted by every interpolating mode and refused by the others
  SL_CHECK_THROWS(F::interpolate(randn({1, 2, 4, 4}),
                                 {.size = {3}, .mode = "nearest-exact", .align_corners = true}),
                  ValueError,
                  "interpolate: align_corners option can only be set with the interpolating "
                  "modes linear | bilinear | bicubic | trilinear, got align_corners=True with "
                  "mode 'nearest-exact'");
  SL_CHECK_THROWS(F::interpolate(randn({1, 2, 4, 4}), {.size = {3}, .mode = "tricubic"}),
                  ValueError,
                  "interpolate: mode must be one of nearest | nearest-exact | area | linear | "
                  "bilinear | bicubic | trilinear, got 'tricubic'");
  SL_CHECK_THROWS(F::interpolate(zeros({1, 1, 2, 2, 2}, {.dtype = DType::i64}),
                                 {.size = {3}, .mode = "trilinear"}),
                  DTypeError, "interpolate: expected a floating input, got int64");
  CHECK(nn::Upsample({.size = {2}, .mode = "bicubic", .antialias = true}).str() ==
        "Upsample(size=2, mode=bicubic, antialias=True)");
}
