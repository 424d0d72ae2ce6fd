// nn::init: bounds and moments of each initialiser, gains, fans, seeding, errors.
#include <cmath>

#include "nn/init.h"
#include "support/testing.h"

using namespace sl;
namespace init = sl::nn::init;

namespace {
double mean_of(const Tensor& t) {
  return t.to(DType::f64).mean().item<double>();
}
double std_of(const Tensor& t) {
  return t.to(DType::f64).std().item<double>();
}
}  // namespace

TEST_CASE("calculate_gain and fans follow torch.nn.init") {
  CHECK(init::calculate_gain("linear") == 1.0);
  CHECK(init::calculate_gain("tanh") == doctest::Approx(5.0 / 3.0));
  CHECK(init::calculate_gain("relu") == doctest::Approx(std::sqrt(2.0)));
  CHECK(init::calculate_gain("leaky_relu", std::sqrt(5.0)) ==
        doctest::Approx(std::sqrt(2.0 / 6.0)));
  SL_CHECK_THROWS(init::calculate_gain("swish"), ValueError, "unsupported nonlinearity 'swish'");
  auto [fi, fo] = init::calculate_fan_in_and_fan_out(empty({8, 3, 5, 5}));
  CHECK(fi == 75);
  CHECK(fo == 200);
  SL_CHECK_THROWS(init::calculate_fan_in_and_fan_out(empty({4})), ValueError,
                  "fewer than 2 dimensions (shape [4])");
}

TEST_CASE("uniform-type initialisers stay in their bounds and fill them") {
  // Bounds from the formulas in torch/nn/init.py; 40k samples put the extremes within 1% of the
  // bound and the std within 2% of bound/sqrt(3).
  Tensor w = empty({200, 200});
  auto check_uniform = [&](double bound) {
    double mx = w.abs().max().item<double>();
    CHECK(mx <= bound);
    CHECK(mx >= 0.99 * bound);
    CHECK(std::fabs(std_of(w) - bound / std::sqrt(3.0)) < 0.02 * bound / std::sqrt(3.0));
  };
  init::kaiming_uniform_(w, std::sqrt(5.0));
  check_uniform(std::sqrt(2.0 / 6.0) * std::sqrt(3.0 / 200.0));
  init::kaiming_uniform_(w, 0.0, "fan_out", "relu");
  check_uniform(std::sqrt(2.0) * std::sqrt(3.0 / 200.0));
  init::xavier_uniform_(w, 2.0);
  check_uniform(2.0 * std::sqrt(6.0 / 400.0));
  init::uniform_(w, -0.3, 0.3);
  check_uniform(0.3);
}

TEST_CASE("normal-type initialisers have the right moments") {
  // 40k samples: the sample std is within ~1.5% of sigma with overwhelming probability (its
  // standard error is sigma/sqrt(2n) = 0.35%), the mean within 5 standard errors.
  Tensor w = empty({200, 200});
  auto check_normal = [&](double mu, double sigma) {
    CHECK(std::fabs(mean_of(w) - mu) < 5 * sigma / 200.0);
    CHECK(std::fabs(std_of(w) - sigma) < 0.015 * sigma);
  };
  init::normal_(w, 1.0, 0.02);
  check_normal(1.0, 0.02);
  init::kaiming_normal_(w, 0.0, "fan_in", "relu");
  check_normal(0.0, std::sqrt(2.0) / std::sqrt(200.0));
  init::xavier_normal_(w);
  check_normal(0.0, std::sqrt(2.0 / 400.0));
}

TEST_CASE("trunc_normal_ stays in [a, b] with the truncated moments") {
  manual_seed(5);
  Tensor w = empty({100000});
  init::trunc_normal_(w, 0.0, 1.0, -1.0, 2.0);
  CHECK(w.min().item<double>() >= -1.0);
  CHECK(w.max().item<double>() <= 2.0);
  // Truncated normal on [-1, 2]: mean = (phi(-1) - phi(2)) / (Phi(2) - Phi(-1)), computed here
  // from the closed form.
  auto phi = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); };
  auto Phi = [](double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); };
  double Z = Phi(2.0) - Phi(-1.0);
  double mu = (phi(-1.0) - phi(2.0)) / Z;
  double var = 1 + (-1.0 * phi(-1.0) - 2.0 * phi(2.0)) / Z - mu * mu;
  CHECK(std::fabs(mean_of(w) - mu) < 5 * std::sqrt(var / 1e5));
  CHECK(std::fabs(std_of(w) - std::sqrt(var)) < 0.01 * std::sqrt(var));
  // BERT's use: std 0.02 truncated at +-2 (absolute), which never clips in practice.
  init::trunc_normal_(w, 0.0, 0.02);
  CHECK(std::fabs(std_of(w) - 0.02) < 0.01 * 0.02);
  SL_CHECK_THROWS(init::trunc_normal_(w, 0, 1, 2, 1), ValueError, "expected a < b");
}

TEST_CASE("initialisers are reproducible from the seed and accept parameters") {
  Tensor a = empty({5, 6}).requires_grad_(), b = empty({5, 6});
  Generator g1(42), g2(42);
  init::kaiming_uniform_(a, std::sqrt(5.0), "fan_in", "leaky_relu", &g1);
  init::kaiming_uniform_(b, std::sqrt(5.0), "fan_in", "leaky_relu", &g2);
  SL_CHECK_CLOSE(a, b, 0, 0);
  CHECK(a.requires_grad());
  init::constant_(a, 2.5);
  CHECK(a.min().item<double>() == 2.5);
  init::zeros_(a);
  CHECK(a.abs().max().item<double>() == 0.0);
  init::ones_(b);
  CHECK(b.sum().item<double>() == 30.0);
  init::eye_(b);
  CHECK(b.sum().item<double>() == 5.0);
  SL_CHECK_THROWS(init::kaiming_uniform_(b, 0, "fan_mid"), ValueError, "mode must be 'fan_in'");
  SL_CHECK_THROWS(init::eye_(empty({2, 2, 2})), ValueError, "only 2-d tensors");
}
