// F::interpolate / nn::Upsample's nearest, nearest-exact and area modes on 5-d [N, C, D, H, W]
// inputs (PyTorch's upsample_nearest3d, _upsample_nearest_exact3d, adaptive_avg_pool3d): parity
// with PyTorch 1.13 (fixture family "upsample", cases made by gen_upsample_3d in
// tools/gen_nn_fixtures_upsample.py: each case's call is repeated here next to its name), float64
// gradchecks, a brute-force area reference, and what is still refused. The 1-d / 2-d modes:
// test_upsample.cpp; trilinear: test_upsample_cubic.cpp.
#include <cmath>

#include "autograd/gradcheck.h"
#include "fixture.h"
#include "nn/functional.h"
#include "nn/upsample.h"

using namespace sl;
using sl::testing::Fixture;
namespace F = sl::nn::functional;

namespace {
// float32: rtol 1e-5, atol 1e-6 (the nn parity default). nearest copies forward and its gradient
// sums at most a few values; area divides window sums whose order differs from PyTorch's
// (Shardlight averages over (H, W) and then over D, PyTorch sums the whole window once), a few
// float32 ulps.
constexpr double kRtol = 1e-5, kAtol = 1e-6;
// float64: the same values up to double rounding of a different summation order
constexpr double kTol64 = 1e-12;

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

/// PyTorch's adaptive window along one dim: [floor(o * in / out), ceil((o + 1) * in / out)).
std::pair<int64_t, int64_t> window(int64_t o, int64_t in, int64_t out) {
  return {(o * in) / out, ((o + 1) * in + out - 1) / out};
}
}  // namespace

TEST_CASE("interpolate matches PyTorch: 5-d nearest and nearest-exact") {
  Fixture fx("upsample");
  run_case(fx, "nearest3d_2x", interp({.scale_factor = {2}, .mode = "nearest"}));
  run_case(fx, "nearest3d_scale_per_dim",
           interp({.scale_factor = {1.7, 0.6, 2.5}, .mode = "nearest"}));
  run_case(fx, "nearest3d_shrink", interp({.size = {2, 3, 2}, .mode = "nearest"}));
  run_case(fx, "nearest3d_recompute",
           interp({.scale_factor = {1.7}, .mode = "nearest", .recompute_scale_factor = true}));
  nn::Upsample up({.size = {4, 6, 3}, .mode = "nearest"});
  CHECK(up.str() == "Upsample(size=(4, 6, 3), mode=nearest)");
  run_case(fx, "nearest3d_module", [&](const Tensor& x) { return up.forward(x); });
  run_case(fx, "nearest_exact3d_up", interp({.scale_factor = {1.7}, .mode = "nearest-exact"}));
  run_case(fx, "nearest_exact3d_shrink", interp({.size = {2, 3, 2}, .mode = "nearest-exact"}));
  run_case(fx, "nearest_exact3d_scale_per_dim",
           interp({.scale_factor = {0.6, 2.5, 1.3}, .mode = "nearest-exact"}));
  nn::Upsample upx({.size = {5, 2, 7}, .mode = "nearest-exact"});
  run_case(fx, "nearest_exact3d_module", [&](const Tensor& x) { return upx.forward(x); });
  run_case(fx, "nearest3d_f64", interp({.scale_factor = {1.5, 0.7, 2.3}, .mode = "nearest"}),
           kTol64, kTol64);
  run_case(fx, "nearest_exact3d_f64", interp({.size = {5, 2, 7}, .mode = "nearest-exact"}), kTol64,
           kTol64);
  // the forward is a copy: exactly PyTorch's values
  Tensor x = fx.input("nearest3d_scale_per_dim", 0);
  SL_CHECK_CLOSE(F::interpolate(x, {.scale_factor = {1.7, 0.6, 2.5}}),
                 fx.get("nearest3d_scale_per_dim.out.0"), 0, 0);
  // 5 * 1.1 = 5 along D: the given scale is still used (reads 0, 0, 1, 2, 3). Forward only:
  // PyTorch 1.13's backward copies where out == in, which is not the gradient of its forward
  // (ours is, gradchecked below with the same kind of scale)
  Tensor k = fx.input("nearest3d_scale_kept", 0);
  SL_CHECK_CLOSE(F::interpolate(k, {.scale_factor = {1.1, 2.0, 1.5}}),
                 fx.get("nearest3d_scale_kept.out.0"), 0, 0);
}

TEST_CASE("interpolate matches PyTorch: 5-d area") {
  Fixture fx("upsample");
  run_case(fx, "area3d_down", interp({.size = {2, 3, 2}, .mode = "area"}));
  run_case(fx, "area3d_scale", interp({.scale_factor = {0.6}, .mode = "area"}));
  run_case(fx, "area3d_up", interp({.size = {4, 3, 5}, .mode = "area"}));
  nn::Upsample up({.size = {3, 3, 2}, .mode = "area"});
  run_case(fx, "area3d_module", [&](const Tensor& x) { return up.forward(x); });
  run_case(fx, "area3d_f64", interp({.size = {2, 3, 3}, .mode = "area"}), kTol64, kTol64);
}

TEST_CASE("interpolate 5-d area equals the brute-force mean over each adaptive window") {
  manual_seed(81);
  Tensor x = randn({2, 3, 5, 7, 4}, {.dtype = DType::f64});
  const int64_t Do = 3, Ho = 4, Wo = 6;
  Tensor y = F::interpolate(x, {.size = {Do, Ho, Wo}, .mode = "area"});
  REQUIRE(y.sizes() == Shape{2, 3, Do, Ho, Wo});
  Tensor xc = x.contiguous(), yc = y.contiguous();
  const double* xp = xc.data_ptr<double>();
  const double* yp = yc.data_ptr<double>();
  double worst = 0;
  for (int64_t p = 0; p < 6; ++p) {
    for (int64_t od = 0; od < Do; ++od) {
      for (int64_t oh = 0; oh < Ho; ++oh) {
        for (int64_t ow = 0; ow < Wo; ++ow) {
          auto [d0, d1] = window(od, 5, Do);
          auto [h0, h1] = window(oh, 7, Ho);
          auto [w0, w1] = window(ow, 4, Wo);
          double s = 0;
          for (int64_t d = d0; d < d1; ++d) {
            for (int64_t h = h0; h < h1; ++h) {
              for (int64_t w = w0; w < w1; ++w) s += xp[((p * 5 + d) * 7 + h) * 4 + w];
            }
          }
          const double want = s / static_cast<double>((d1 - d0) * (h1 - h0) * (w1 - w0));
          worst = std::max(worst, std::abs(yp[((p * Do + od) * Ho + oh) * Wo + ow] - want));
        }
      }
    }
  }
  // double rounding of sums of at most 2 * 3 * 1 values of size ~3
  CHECK(worst < 1e-14);
}

TEST_CASE("interpolate 5-d nearest, nearest-exact and area gradchecks in float64") {
  manual_seed(82);
  TensorOptions f64{.dtype = DType::f64};
  for (const InterpolateOptions& o : std::vector<InterpolateOptions>{
           {.scale_factor = {1.7}, .mode = "nearest"},
           {.size = {2, 3, 2}, .mode = "nearest"},
           {.scale_factor = {1.1, 0.6, 2.2}, .mode = "nearest"},
           {.scale_factor = {1.7}, .mode = "nearest-exact"},
           {.size = {2, 5, 3}, .mode = "nearest-exact"},
           {.size = {2, 3, 2}, .mode = "area"},
           {.size = {4, 3, 7}, .mode = "area"},
           {.scale_factor = {0.6}, .mode = "area"},
       }) {
    CAPTURE(o.mode);
    Tensor x = randn({1, 2, 3, 4, 5}, f64).requires_grad_();
    CHECK(gradcheck([&](const TensorList& t) { return F::interpolate(t[0], o); }, {x}));
  }
}

TEST_CASE("interpolate 5-d nearest / area: empty batch, 16-bit, non-contiguous, grad_fn") {
  for (const char* mode : {"nearest", "nearest-exact", "area"}) {
    CAPTURE(mode);
    Tensor e = randn({0, 2, 3, 4, 4}).requires_grad_();
    Tensor y = F::interpolate(e, {.size = {2, 5, 3}, .mode = mode});
    CHECK(y.sizes() == Shape{0, 2, 2, 5, 3});
    y.sum().backward();
    CHECK(e.grad().sizes() == Shape{0, 2, 3, 4, 4});
    // a transposed (non-contiguous) input reads the same values as its contiguous copy
    Tensor t = randn({1, 2, 3, 5, 4}).transpose(2, 4);
    InterpolateOptions o{.size = {3, 7, 2}, .mode = mode};
    SL_CHECK_CLOSE(F::interpolate(t, o), F::interpolate(t.contiguous(), o), 0, 0);
  }
  // 16-bit nearest copies values: exactly the float32 result rounded (a no-op)
  Tensor x = randn({1, 2, 3, 4, 5});
  for (DType dt : {DType::bf16, DType::f16}) {
    InterpolateOptions o{.scale_factor = {1.5}, .mode = "nearest"};
    SL_CHECK_CLOSE(F::interpolate(x.to(dt), o), F::interpolate(x.to(dt).to(DType::f32), o).to(dt),
                   0, 0);
  }
  // PyTorch's grad_fn names
  Tensor r = randn({1, 1, 2, 2, 2}).requires_grad_();
  CHECK(std::string(F::interpolate(r, {.size = {3}}).grad_fn()->name()) ==
        "UpsampleNearest3DBackward");
  CHECK(std::string(F::interpolate(r, {.size = {3}, .mode = "nearest-exact"}).grad_fn()->name()) ==
        "UpsampleNearestExact3DBackward");
  CHECK(std::string(F::interpolate(r, {.size = {1}, .mode = "area"}).grad_fn()->name()) ==
        "AdaptiveAvgPool3DBackward");
}

TEST_CASE("interpolate 5-d area in bf16 rounds once, forward and backward") {
  // Two 16-bit passes (the (H, W) means rounded, then their mean over D rounded) differ here from
  // one rounding of the exact mean: planes of mean 184.5 and 134.5 round (ties to even) to 184
  // and 134, whose mean 159 is a bf16, while the exact mean 159.5 rounds to 160. The windows
  // are powers of two and the values small integers, so float32 holds every partial sum exactly
  // and the expected value is the float64 mean rounded once to bf16.
  const Tensor x = from_vector<double>({255, 186, 221, 76, 31, 191, 86, 230}, {1, 1, 2, 2, 2});
  const InterpolateOptions o{.size = {1, 1, 1}, .mode = "area"};
  const Tensor once = x.mean({2, 3, 4}, true).to(DType::bf16);
  const Tensor twice = x.mean({3, 4}, true).to(DType::bf16).to(DType::f64).mean({2}, true);
  REQUIRE(once.to(DType::f64).item<double>() == 160.0);
  REQUIRE(twice.to(DType::bf16).to(DType::f64).item<double>() == 159.0);  // the case separates
  const Tensor xb = x.to(DType::bf16).requires_grad_();
  const Tensor y = F::interpolate(xb, o);
  CHECK(y.dtype() == DType::bf16);
  SL_CHECK_CLOSE(y, once.view({1, 1, 1, 1, 1}), 0, 0);
  // backward: windows of 3 along D and along (H, W) = (1, 3): an upstream 11 gives 11 / 9 to each
  // input, 1.2222.. rounded once to bf16 1.21875; rounded after each pass, 11 / 3 -> 3.671875,
  // / 3 -> 1.2265625. The float32 passes are a few float32 ulps off 11 / 9, far from the bf16
  // tie 1.22265625, so one rounding of them is the rounding of the float64 quotient.
  const Tensor xg = zeros({1, 1, 3, 1, 3}, {.dtype = DType::bf16}).requires_grad_();
  F::interpolate(xg, o).backward(full({1, 1, 1, 1, 1}, 11.0, {.dtype = DType::bf16}));
  const double g_once =
      full({}, 11.0 / 9.0, {.dtype = DType::f64}).to(DType::bf16).to(DType::f64).item<double>();
  REQUIRE(g_once == 1.21875);
  SL_CHECK_CLOSE(xg.grad(), full({1, 1, 3, 1, 3}, g_once, {.dtype = DType::bf16}), 0, 0);
}

TEST_CASE("interpolate 5-d: what is still refused, as PyTorch") {
  for (const char* mode : {"nearest", "nearest-exact", "area"}) {
    CAPTURE(mode);
    SL_CHECK_THROWS(F::interpolate(randn({1, 1, 2, 2, 2, 2}), {.size = {3}, .mode = mode}),
                    ShapeError,
                    (std::string("interpolate: mode '") + mode +
                     "' expects a 3-d [N, C, W], 4-d [N, C, H, W] or 5-d [N, C, D, H, W] input, "
                     "got [1, 1, 2, 2, 2, 2]")
                        .c_str());
    SL_CHECK_THROWS(F::interpolate(randn({1, 2, 3, 0, 4}), {.size = {3}, .mode = mode}), ShapeError,
                    "interpolate: expected non-empty spatial dims, got input [1, 2, 3, 0, 4]");
    SL_CHECK_THROWS(F::interpolate(randn({1, 2, 3, 4, 4}), {.size = {3, 3}, .mode = mode}),
                    ValueError,
                    "interpolate: size must hold one value or one per spatial dim (3), got [3, 3] "
                    "for input [1, 2, 3, 4, 4]");
    SL_CHECK_THROWS(
        F::interpolate(randn({1, 2, 3, 4, 4}), {.size = {3}, .mode = mode, .align_corners = false}),
        ValueError, "interpolate: align_corners option can only be set with");
  }
  SL_CHECK_THROWS(F::interpolate(randn({1, 2, 3, 4, 4}), {.scale_factor = {0.2}, .mode = "area"}),
                  ShapeError, "interpolate: output size floor(3 * 0.2) = 0 must be at least 1");
  SL_CHECK_THROWS(F::interpolate(zeros({1, 1, 2, 2, 2}, {.dtype = DType::i64}), {.size = {3}}),
                  DTypeError, "interpolate: expected a floating input, got int64");
}
