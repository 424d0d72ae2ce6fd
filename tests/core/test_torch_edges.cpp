// Edge cases where Shardlight disagreed with PyTorch 1.13, kept as regression tests. Every
// expected value is the one torch 1.13 (CPU) printed for the same input, or is derived by hand in
// a comment where PyTorch fails (and Shardlight deliberately gives a result or a clearer error).
#include "support/testing.h"

using namespace sl;
using sl::testing::test_devices;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("logsumexp: a NaN anywhere in the slice gives NaN, inf and -inf as torch") {
  // torch.tensor(rows).logsumexp(1) = [nan, nan, nan, -inf, inf, inf] in f32, f64 and bf16
  // (its shift is amax, which propagates NaN); the first three were inf, -inf, -inf here.
  const std::vector<double> rows{kInf,  kNaN,  kNaN, kNaN, kNaN, -kInf,
                                 -kInf, -kInf, kInf, 1.0,  kInf, -kInf};
  const std::vector<double> want{kNaN, kNaN, kNaN, -kInf, kInf, kInf};
  for (Device dev : test_devices()) {
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      CAPTURE(dev);
      CAPTURE(dt);
      Tensor x = from_vector(rows, {6, 2}).to(dev, dt);
      Tensor expect = from_vector(want, {6}).to(dt);
      // exact: every expected value is NaN or +-inf
      SL_CHECK_CLOSE(x.logsumexp({1}).cpu(), expect, 0, 0);
      // the same slices as columns (the kernel's inner > 1 path)
      SL_CHECK_CLOSE(x.t().contiguous().logsumexp({0}).cpu(), expect, 0, 0);
    }
  }
}

TEST_CASE("norm(+-inf): a NaN result gives every element gradient 0, as torch's norm_backward") {
  // torch 1.13: x = [[2, nan, 1], [2, -2, 1]]; x.norm(inf, dim=1) = [nan, 2] and the gradient of
  // its sum is [[0, 0, 0], [0.5, -0.5, 0]]; x.norm(-inf, dim=1) = [nan, 1] with gradient
  // [[0, 0, 0], [0, 0, 1]]. (norm_backward masks |x| == norm or isnan(x), then multiplies by
  // sgn(x), which is 0 at NaN.) The NaN row's gradient was [nan, nan, nan] here. Exact values.
  for (double p : {kInf, -kInf}) {
    CAPTURE(p);
    Tensor x = tensor({2.0, kNaN, 1.0, 2.0, -2.0, 1.0}).view({2, 3}).requires_grad_();
    Tensor y = x.norm(p, {1});
    y.sum().backward();
    SL_CHECK_CLOSE(y, tensor({kNaN, p > 0 ? 2.0 : 1.0}), 0, 0);
    Tensor want =
        p > 0 ? tensor({0.0, 0.0, 0.0, 0.5, -0.5, 0.0}) : tensor({0.0, 0.0, 0.0, 0.0, 0.0, 1.0});
    SL_CHECK_CLOSE(x.grad(), want.view({2, 3}), 0, 0);
    // over every element: torch.tensor([2., nan, 1.]).norm(p) has gradient [0, 0, 0]
    Tensor v = tensor({2.0, kNaN, 1.0}).requires_grad_();
    v.norm(p).backward();
    SL_CHECK_CLOSE(v.grad(), tensor({0.0, 0.0, 0.0}), 0, 0);
  }
}
