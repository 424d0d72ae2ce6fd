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

namespace {

/// softmax (log_softmax when `log`) of x along `dim` and its input gradient for the output
/// gradient g, by plain double loops over the [outer, n, inner] view: a slice holding NaN gives
/// NaN, a slice of all -inf gives NaN (exp(-inf - -inf)), as in PyTorch.
struct SoftmaxRef {
  std::vector<double> y, gx;
};
SoftmaxRef softmax_ref(const std::vector<double>& x, const std::vector<double>& g,
                       const Shape& shape, int64_t dim, bool log) {
  int64_t outer = 1, inner = 1;
  const int64_t n = shape[static_cast<size_t>(dim)];
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) outer *= shape[static_cast<size_t>(d)];
    if (d > dim) inner *= shape[static_cast<size_t>(d)];
  }
  SoftmaxRef r{std::vector<double>(x.size()), std::vector<double>(x.size())};
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + i); };
      double m = -std::numeric_limits<double>::infinity();
      bool nan = false;
      for (int64_t k = 0; k < n; ++k) {
        nan = nan || std::isnan(x[at(k)]);
        m = std::max(m, x[at(k)]);
      }
      if (nan) m = std::numeric_limits<double>::quiet_NaN();
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += std::exp(x[at(k)] - m);
      double gs = 0;  // sum(g) for log_softmax, sum(g * y) for softmax
      for (int64_t k = 0; k < n; ++k) {
        double y = log ? x[at(k)] - m - std::log(s) : std::exp(x[at(k)] - m) / s;
        r.y[at(k)] = y;
        gs += log ? g[at(k)] : g[at(k)] * y;
      }
      for (int64_t k = 0; k < n; ++k) {
        double y = r.y[at(k)];
        r.gx[at(k)] = log ? g[at(k)] - std::exp(y) * gs : y * (g[at(k)] - gs);
      }
    }
  }
  return r;
}

/// Checks softmax / log_softmax of x along dim, forward and backward (output gradient g), against
/// softmax_ref with float32 or float64 tolerances.
void check_softmax_against_ref(const Tensor& x, const Tensor& g, int64_t dim, bool log) {
  CAPTURE(shape_str(x.sizes()));
  CAPTURE(dim);
  CAPTURE(log);
  CAPTURE(std::string(dtype_name(x.dtype())));
  SoftmaxRef want = softmax_ref(x.to_vector<double>(), g.to_vector<double>(), x.sizes(), dim, log);
  Tensor xl = x.detach().requires_grad_();
  Tensor y = log ? log_softmax(xl, dim) : softmax(xl, dim);
  y.backward(g);
  const Shape& s = x.sizes();
  // float32: exp of an argument up to ~30 carries ~30 ulps of relative error; log_softmax's
  // subtraction and the backward's g - dot an absolute error of a few ulps of their operands
  const bool f32 = x.dtype() == DType::f32;
  const double rtol = f32 ? 1e-5 : 1e-12, atol = f32 ? 1e-5 : 1e-12;
  SL_CHECK_CLOSE(y, from_vector(want.y, s), rtol, atol);
  REQUIRE(xl.grad().defined());
  SL_CHECK_CLOSE(xl.grad(), from_vector(want.gx, s), rtol, atol);
}

}  // namespace

TEST_CASE("softmax over a dim that is not the last matches a double reference, with its gradient") {
  // Note [Softmax over a non-last dim]: blocks of up to 64 adjacent slices; the shapes cover
  // inner sizes below, above and not a multiple of the block or the vector width, one block or
  // several per outer index, and outer sizes of one and more.
  struct C {
    Shape shape;
    int64_t dim;
  };
  const C cases[] = {{{3, 5, 7}, 0}, {{3, 5, 7}, 1},   {{2, 1000, 13}, 1}, {{1024, 3}, 0},
                     {{5, 130}, 0},  {{2, 9, 100}, 1}, {{4, 3, 2, 70}, 1}, {{2, 3, 4, 5}, 2}};
  manual_seed(5);
  for (const C& c : cases) {
    Tensor x = randn(c.shape) * 3, g = randn(c.shape);
    for (DType dt : {DType::f32, DType::f64}) {
      for (bool log : {false, true}) check_softmax_against_ref(x.to(dt), g.to(dt), c.dim, log);
    }
  }
}

TEST_CASE("softmax over a non-last dim gives the same bits as over the last dim of a copy") {
  // Both kernels apply the same operations in the same order to each slice (Note [Softmax over
  // a non-last dim]), so moving the dim last first changes no bit, forward or backward.
  // With 2 threads, [70, 40] along dim 0 (one block of 40 columns) is cut into blocks of 32
  // and 8 so that both threads get one; with 1 thread it stays whole.
  manual_seed(6);
  const Shape shapes[] = {{2, 1000, 13}, {129, 67}, {3, 5, 7}, {70, 40}};
  const int saved = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    CAPTURE(threads);
    for (const Shape& shape : shapes) {
      Tensor x0 = randn(shape) * 4, g0 = randn(shape);
      for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        for (bool log : {false, true}) {
          const int64_t dim = static_cast<int64_t>(shape.size()) - 2;
          CAPTURE(shape_str(shape));
          CAPTURE(std::string(dtype_name(dt)));
          CAPTURE(log);
          auto run = [&](bool moved) {
            Tensor x = x0.to(dt).clone().detach().requires_grad_();
            Tensor xm = moved ? x.transpose(dim, -1).contiguous() : x;
            Tensor y = log ? log_softmax(xm, moved ? -1 : dim) : softmax(xm, moved ? -1 : dim);
            if (moved) y = y.transpose(dim, -1);
            y.backward(g0.to(dt));
            return std::make_pair(y.contiguous(), x.grad());
          };
          auto [y_blocked, gx_blocked] = run(false);
          auto [y_last, gx_last] = run(true);
          CHECK(sl::testing::bits_equal(y_blocked, y_last));
          CHECK(sl::testing::bits_equal(gx_blocked, gx_last));
        }
      }
    }
  }
  set_num_threads(saved);
}

TEST_CASE("softmax over a non-last dim: -inf entries get 0, all -inf or NaN slices give NaN") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // [4, 3, 2] along dim 1: slice (0, 0) all -inf, (1, 1) one NaN, (2, *) and (3, 0) some -inf
  std::vector<double> v(24);
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<double>(k % 7) - 3;
  v[0] = v[2] = v[4] = -inf;
  v[6 + 3] = nan;
  v[12] = v[15] = -inf;
  v[18] = -inf;
  Tensor x = from_vector(v, {4, 3, 2});
  manual_seed(7);
  Tensor g = randn({4, 3, 2}, {.dtype = DType::f64});
  for (DType dt : {DType::f32, DType::f64}) {
    for (bool log : {false, true}) check_softmax_against_ref(x.to(dt), g.to(dt), 1, log);
  }
  // the reference's own special values, as PyTorch: NaN over the all -inf slice and the NaN one,
  // exactly 0 (softmax) and -inf (log_softmax) at -inf entries of the other slices
  std::vector<double> s = softmax(x, 1).to_vector<double>();
  std::vector<double> ls = log_softmax(x, 1).to_vector<double>();
  for (int k : {0, 2, 4, 7, 9, 11}) CHECK(std::isnan(s[static_cast<size_t>(k)]));
  CHECK(s[12] == 0);
  CHECK(ls[12] == -inf);
  CHECK(s[18] == 0);
  CHECK(std::isfinite(s[20]));
}
