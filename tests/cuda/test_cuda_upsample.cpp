// Parity of the CUDA upsample kernels with the CPU, forward and backward through autograd
// (F::interpolate): nearest (1-d to 3-d, also nearest-exact and 5-d area), linear / bilinear /
// trilinear, bicubic and antialiased bilinear / bicubic, align_corners both ways, up and down,
// scales given and sizes given. Tolerances: nearest forward copies values and its backward sums the
// same float32 / float64 values in the same order on both devices (Note [Upsample backward order]),
// so it is compared exactly; linear computes the same products, but nvcc may contract a
// multiply-add into an FMA, so float32 allows a few ulps (1e-6 relative) and float64 1e-13 (bicubic
// and antialias sum 16 or more products per output, with weights computed on the device, so float32
// allows 1e-5 relative and 1e-6 absolute for their sums' cancellations). 16-bit: CUDA computes in
// float from the 16-bit values and rounds once, as the CPU's float32 path does, so results may
// differ by one 16-bit ulp where float results straddle a rounding boundary: rtol 2^-7 (bf16) /
// 2^-10 (f16), atol for values near zero.
#include "autograd/engine.h"
#include "cuda_testing.h"
#include "nn/functional.h"

using namespace sl;
using sl::testing::check_gpu_parity;
namespace F = sl::nn::functional;

namespace {
std::pair<double, double> tol(DType dt, bool exact, bool wide = false) {
  switch (dt) {
    case DType::f64:
      return exact ? std::pair{0.0, 0.0} : std::pair{1e-13, 1e-13};
    case DType::f32:
      return exact ? std::pair{0.0, 0.0} : wide ? std::pair{1e-5, 1e-6} : std::pair{1e-6, 1e-6};
    case DType::bf16:
      return {7.9e-3, 1e-3};
    default:
      return {9.8e-4, 1e-4};
  }
}
}  // namespace

TEST_CASE("cuda parity: interpolate nearest, linear and bilinear" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("upsample parity");
  manual_seed(15);
  const std::vector<InterpolateOptions> planar = {
      {.scale_factor = {2}},
      {.scale_factor = {1.7}},
      {.size = {3, 4}},
      {.scale_factor = {2.05, 0.6}},
      {.scale_factor = {1.7}, .mode = "bilinear"},
      {.scale_factor = {1.7}, .mode = "bilinear", .align_corners = true},
      {.size = {3, 2}, .mode = "bilinear"},
      {.size = {3, 2}, .mode = "bilinear", .align_corners = true},
      {.size = {17, 1}, .mode = "bilinear", .align_corners = true},
      {.scale_factor = {1.7}, .mode = "bilinear", .recompute_scale_factor = true},
  };
  const std::vector<InterpolateOptions> lines = {
      {.scale_factor = {2.05}},
      {.scale_factor = {2.5}, .mode = "linear"},
      {.size = {8}, .mode = "linear", .align_corners = true},
      {.size = {3}, .mode = "linear"},
  };
  for (DType dt : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    if ((dt == DType::f16 || dt == DType::bf16) && !sl::testing::gpu_kernels_take_16bit("upsample"))
      continue;
    CAPTURE(dt);
    for (size_t i = 0; i < planar.size(); ++i) {
      CAPTURE(i);
      const InterpolateOptions o = planar[i];
      auto [rt, at] = tol(dt, o.mode == "nearest");
      check_gpu_parity([o](const TensorList& t) { return F::interpolate(t[0], o); },
                       {randn({2, 3, 9, 10}, {.dtype = dt}).requires_grad_()}, rt, at);
    }
    for (size_t i = 0; i < lines.size(); ++i) {
      CAPTURE(i);
      const InterpolateOptions o = lines[i];
      auto [rt, at] = tol(dt, o.mode == "nearest");
      check_gpu_parity([o](const TensorList& t) { return F::interpolate(t[0], o); },
                       {randn({2, 3, 10}, {.dtype = dt}).requires_grad_()}, rt, at);
    }
  }
}

TEST_CASE("cuda: interpolate of an empty batch" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("upsample empty batch");
  Tensor x = randn({0, 2, 4, 4}).to(sl::testing::kGPU).requires_grad_();
  Tensor y = F::interpolate(x, {.scale_factor = {2}, .mode = "bilinear"});
  CHECK(y.sizes() == Shape{0, 2, 8, 8});
  y.sum().backward();
  CHECK(x.grad().sizes() == Shape{0, 2, 4, 4});
}

TEST_CASE("cuda parity: interpolate trilinear, bicubic and antialias" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("upsample parity (trilinear, bicubic, antialias)");
  manual_seed(16);
  const std::vector<InterpolateOptions> planar = {
      {.scale_factor = {1.7}, .mode = "bicubic"},
      {.scale_factor = {1.7}, .mode = "bicubic", .align_corners = true},
      {.size = {3, 2}, .mode = "bicubic"},
      {.size = {3, 2}, .mode = "bicubic", .align_corners = true},
      {.scale_factor = {1.1, 2.5}, .mode = "bicubic"},
      {.size = {17, 1}, .mode = "bicubic", .align_corners = true},
      {.size = {3, 4}, .mode = "bilinear", .antialias = true},
      {.size = {3, 4}, .mode = "bilinear", .align_corners = true, .antialias = true},
      {.scale_factor = {0.3, 1.7}, .mode = "bilinear", .antialias = true},
      {.size = {3, 4}, .mode = "bicubic", .antialias = true},
      {.scale_factor = {0.45}, .mode = "bicubic", .align_corners = true, .antialias = true},
      {.scale_factor = {2.5, 0.2}, .mode = "bicubic", .antialias = true},
  };
  const std::vector<InterpolateOptions> volumes = {
      {.scale_factor = {1.7}, .mode = "trilinear"},
      {.scale_factor = {1.7}, .mode = "trilinear", .align_corners = true},
      {.size = {2, 3, 4}, .mode = "trilinear"},
      {.size = {1, 3, 4}, .mode = "trilinear", .align_corners = true},
      {.scale_factor = {1.1, 0.6, 2.05}, .mode = "trilinear"},
      {.scale_factor = {1.7}, .mode = "trilinear", .recompute_scale_factor = true},
  };
  for (DType dt : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    if ((dt == DType::f16 || dt == DType::bf16) && !sl::testing::gpu_kernels_take_16bit("upsample"))
      continue;
    CAPTURE(dt);
    for (size_t i = 0; i < planar.size(); ++i) {
      CAPTURE(i);
      const InterpolateOptions o = planar[i];
      auto [rt, at] = tol(dt, false, true);
      check_gpu_parity([o](const TensorList& t) { return F::interpolate(t[0], o); },
                       {randn({2, 3, 9, 10}, {.dtype = dt}).requires_grad_()}, rt, at);
    }
    for (size_t i = 0; i < volumes.size(); ++i) {
      CAPTURE(i);
      const InterpolateOptions o = volumes[i];
      auto [rt, at] = tol(dt, false);
      check_gpu_parity([o](const TensorList& t) { return F::interpolate(t[0], o); },
                       {randn({2, 2, 5, 6, 7}, {.dtype = dt}).requires_grad_()}, rt, at);
    }
  }
}

TEST_CASE("cuda: the trilinear, bicubic and antialias backward gives the same bits on every run" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("upsample backward determinism");
  manual_seed(17);
  for (const InterpolateOptions& o : std::vector<InterpolateOptions>{
           {.scale_factor = {2.3}, .mode = "bicubic"},
           {.scale_factor = {0.3}, .mode = "bicubic", .antialias = true},
           {.scale_factor = {1.7}, .mode = "trilinear"}}) {
    CAPTURE(o.mode);
    Tensor x = randn(o.mode == "trilinear" ? Shape{2, 3, 8, 9, 10} : Shape{2, 3, 40, 50})
                   .to(sl::testing::kGPU)
                   .requires_grad_();
    Tensor first;
    for (int run = 0; run < 3; ++run) {
      Tensor y = F::interpolate(x, o);
      Tensor g = grad({(y * y).sum()}, {x})[0];
      if (run == 0) {
        first = g;
      } else {
        SL_CHECK_CLOSE(g, first, 0, 0);
      }
    }
  }
}

TEST_CASE("cuda parity: 5-d interpolate nearest, nearest-exact and area" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("upsample parity (5-d nearest, nearest-exact, area)");
  manual_seed(18);
  const std::vector<InterpolateOptions> volumes = {
      {.scale_factor = {2}},
      {.scale_factor = {1.7, 0.6, 2.5}},
      {.size = {2, 3, 4}},
      {.scale_factor = {1.1, 2.0, 1.5}},  // 5 * 1.1 = 5 along D: the given scale still used
      {.scale_factor = {1.7}, .recompute_scale_factor = true},
      {.scale_factor = {1.7}, .mode = "nearest-exact"},
      {.size = {2, 3, 4}, .mode = "nearest-exact"},
      {.scale_factor = {0.6, 2.5, 1.3}, .mode = "nearest-exact"},
      {.size = {2, 3, 4}, .mode = "area"},
      {.scale_factor = {0.6}, .mode = "area"},
      {.size = {7, 4, 9}, .mode = "area"},
  };
  for (DType dt : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    if ((dt == DType::f16 || dt == DType::bf16) && !sl::testing::gpu_kernels_take_16bit("upsample"))
      continue;
    CAPTURE(dt);
    for (size_t i = 0; i < volumes.size(); ++i) {
      CAPTURE(i);
      const InterpolateOptions o = volumes[i];
      // nearest: copies forward, sums in the CPU's order backward (exact); area: the adaptive
      // average pooling kernels, whose sums may be ordered or contracted differently (wide)
      auto [rt, at] = tol(dt, o.mode != "area", o.mode == "area");
      check_gpu_parity([o](const TensorList& t) { return F::interpolate(t[0], o); },
                       {randn({2, 2, 5, 6, 7}, {.dtype = dt}).requires_grad_()}, rt, at);
    }
  }
  Tensor e = randn({0, 2, 3, 4, 4}).to(sl::testing::kGPU).requires_grad_();
  for (const char* mode : {"nearest", "nearest-exact", "area"}) {
    CAPTURE(mode);
    Tensor y = F::interpolate(e, {.size = {2, 5, 3}, .mode = mode});
    CHECK(y.sizes() == Shape{0, 2, 2, 5, 3});
    CHECK(grad({y.sum()}, {e})[0].sizes() == Shape{0, 2, 3, 4, 4});
  }
}
