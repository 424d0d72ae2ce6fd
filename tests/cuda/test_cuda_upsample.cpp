// Parity of the CUDA upsample kernels with the CPU, forward and backward through autograd
// (F::interpolate): nearest and linear / bilinear, align_corners both ways, up and down, scales
// given and sizes given. Tolerances: nearest forward copies values and its backward sums the
// same float32 / float64 values in the same order on both devices (Note [Upsample backward
// order]), so it is compared exactly; linear computes the same products, but nvcc may contract
// a multiply-add into an FMA, so float32 allows a few ulps (1e-6 relative) and float64 1e-13.
// 16-bit: CUDA computes in float from the 16-bit values and rounds once, as the CPU's float32
// path does, so results may differ by one 16-bit ulp where float results straddle a rounding
// boundary: rtol 2^-7 (bf16) / 2^-10 (f16), atol for values near zero.
#include "cuda_testing.h"
#include "nn/functional.h"

using namespace sl;
using sl::testing::check_gpu_parity;
namespace F = sl::nn::functional;

namespace {
std::pair<double, double> tol(DType dt, bool exact) {
  switch (dt) {
    case DType::f64:
      return exact ? std::pair{0.0, 0.0} : std::pair{1e-13, 1e-13};
    case DType::f32:
      return exact ? std::pair{0.0, 0.0} : std::pair{1e-6, 1e-6};
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
