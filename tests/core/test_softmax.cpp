// softmax / log_softmax: stability, special values, dtype handling, errors, determinism.
#include <cmath>
#include <limits>

#include "support/testing.h"

using namespace sl;

TEST_CASE("softmax is stable for large logits and matches the shifted closed form") {
  // softmax is shift-invariant: [1000, 1001, 1002] must equal softmax([0, 1, 2]), which the
  // test computes in double; a naive exp(1000) overflows to inf in float32.
  Tensor x = tensor({1000.f, 1001.f, 1002.f});
  double z = 1 + std::exp(1.0) + std::exp(2.0);
  Tensor want = tensor({1 / z, std::exp(1.0) / z, std::exp(2.0) / z});
  SL_CHECK_CLOSE(softmax(x, 0), want, 1e-6, 1e-7);  // float32: a few ulps
  Tensor ls = log_softmax(tensor({-1000.f, 0.f}), 0);
  // log(1 + e^-1000) underflows to 0 in double as well: exactly [-1000, 0]
  SL_CHECK_CLOSE(ls, tensor({-1000.0, 0.0}), 0, 0);
  CHECK(isfinite(softmax(tensor({60.f, -60.f}).to(DType::f16), 0)).all().item<bool>());
}

TEST_CASE("softmax rows sum to one in every floating dtype") {
  manual_seed(3);
  Tensor x = randn({8, 33}) * 4;
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    CAPTURE(std::string(dtype_name(dt)));
    Tensor s = softmax(x.to(dt), -1).to(DType::f64).sum({-1});
    // each of 33 probabilities carries one rounding of the dtype (relative 2^-24 / 2^-11 / 2^-8)
    double tol = dt == DType::bf16 ? 33 * 0.004 : dt == DType::f16 ? 33 * 5e-4 : 1e-6;
    SL_CHECK_CLOSE(s, ones({8}, {.dtype = DType::f64}), 0, tol);
  }
}

TEST_CASE("softmax special values: NaN poisons only its slice, all -inf gives NaN as in PyTorch") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = from_vector(std::vector<float>{1, nan, 2, 0, 1, 2, -inf, -inf, -inf}, {3, 3});
  Tensor y = softmax(x, 1);
  std::vector<float> v = y.to_vector<float>();
  for (int i = 0; i < 3; ++i) CHECK(std::isnan(v[static_cast<size_t>(i)]));
  for (int i = 6; i < 9; ++i) CHECK(std::isnan(v[static_cast<size_t>(i)]));
  SL_CHECK_CLOSE(y[1], softmax(tensor({0.f, 1.f, 2.f}), 0), 0, 0);
  // -inf entries next to finite ones get probability exactly 0
  Tensor z = softmax(tensor({-inf, 0.f, 0.f}), 0);
  CHECK(z.to_vector<float>() == std::vector<float>{0.f, 0.5f, 0.5f});
}

TEST_CASE("softmax dtype argument converts first; the gradient returns in the input's dtype") {
  Tensor x = tensor({1.f, 2.f, 3.f}).to(DType::f16).requires_grad_();
  Tensor y = softmax(x, 0, DType::f32);
  CHECK(y.dtype() == DType::f32);
  (y * tensor({1.f, 0.f, 0.f})).sum().backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == DType::f16);
  Tensor p = softmax(tensor({1.0, 2.0, 3.0}), 0);
  // d p0 / d x = p0 * (e0 - p)
  std::vector<double> pv = p.to_vector<double>();
  Tensor want = tensor({pv[0] * (1 - pv[0]), -pv[0] * pv[1], -pv[0] * pv[2]});
  SL_CHECK_CLOSE(x.grad(), want, 2e-3, 1e-3);  // half-precision gradient: one rounding each
  CHECK(softmax(arange(4), 0, DType::f64).dtype() == DType::f64);
}

TEST_CASE("softmax errors name the op and the bad value") {
  SL_CHECK_THROWS(softmax(arange(4), 0), DTypeError,
                  "softmax: expected a floating dtype, got int64");
  SL_CHECK_THROWS(log_softmax(ones({2, 3}), 2), IndexError, "log_softmax: dim 2 out of range");
  SL_CHECK_THROWS(softmax(Tensor(), 0), ValueError, "softmax: input is an undefined tensor");
}

TEST_CASE("softmax is deterministic: same bits twice and with 1 or 2 threads") {
  manual_seed(11);
  Tensor x = randn({64, 513});
  int saved = get_num_threads();
  set_num_threads(1);
  Tensor a = softmax(x, 1), b = log_softmax(x, 0);
  set_num_threads(2);
  Tensor c = softmax(x, 1), d = log_softmax(x, 0), e = softmax(x, 1);
  set_num_threads(saved);
  CHECK(equal(a, c));
  CHECK(equal(c, e));
  CHECK(equal(b, d));
}

TEST_CASE("Tensor::softmax and log_softmax methods forward to the free functions") {
  Tensor x = arange(6).to(DType::f64).view({2, 3});
  CHECK(equal(x.softmax(-1), softmax(x, -1)));
  CHECK(equal(x.log_softmax(0), log_softmax(x, 0)));
  SL_CHECK_CLOSE(x.log_softmax(1).exp(), x.softmax(1), 1e-15, 0);
}
