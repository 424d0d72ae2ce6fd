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
