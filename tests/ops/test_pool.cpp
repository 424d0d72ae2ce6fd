// max_pool2d / avg_pool2d / adaptive_avg_pool2d: PyTorch parity (fixtures from
// tools/gen_op_fixtures.py), gradcheck in f64, error paths.
#include "ops/fixtures.h"
#include "support/testing.h"

using namespace sl;
using sl::testing::Fixture;

namespace {

ExpandingArray<2> arr2(const std::vector<int64_t>& v) {
  return ExpandingArray<2>({v[0], v[1]});
}

Tensor run_max(const Fixture& fx, const std::string& c, const Tensor& x) {
  return max_pool2d(x, arr2(fx.ints(c, "kernel")), arr2(fx.ints(c, "stride")),
                    arr2(fx.ints(c, "padding")), arr2(fx.ints(c, "dilation")),
                    fx.ints(c, "ceil_mode")[0] != 0);
}

Tensor run_avg(const Fixture& fx, const std::string& c, const Tensor& x) {
  int64_t div = fx.ints(c, "divisor_override")[0];
  return avg_pool2d(x, arr2(fx.ints(c, "kernel")), arr2(fx.ints(c, "stride")),
                    arr2(fx.ints(c, "padding")), fx.ints(c, "ceil_mode")[0] != 0,
                    fx.ints(c, "count_include_pad")[0] != 0,
                    div ? std::optional<int64_t>(div) : std::nullopt);
}

Tensor run_adaptive(const Fixture& fx, const std::string& c, const Tensor& x) {
  return adaptive_avg_pool2d(x, arr2(fx.ints(c, "output_size")));
}

Tensor run_any(const Fixture& fx, const std::string& c, const Tensor& x) {
  if (c.rfind("max_", 0) == 0) return run_max(fx, c, x);
  if (c.rfind("avg_", 0) == 0) return run_avg(fx, c, x);
  return run_adaptive(fx, c, x);
}

}  // namespace

TEST_CASE("pool: PyTorch parity of outputs, indices and gradients (f32)") {
  Fixture fx("pool");
  auto cases = fx.cases();
  REQUIRE(cases.size() == 13);
  for (const auto& c : cases) {
    CAPTURE(c);
    Tensor x = fx.get(c, "x").requires_grad_();
    Tensor y = run_any(fx, c, x);
    SL_CHECK_CLOSE(y, fx.get(c, "y"), 1e-5, 1e-6);
    if (c.rfind("max_", 0) == 0) {
      auto [y2, idx] =
          max_pool2d_with_indices(x.detach(), arr2(fx.ints(c, "kernel")),
                                  arr2(fx.ints(c, "stride")), arr2(fx.ints(c, "padding")),
                                  arr2(fx.ints(c, "dilation")), fx.ints(c, "ceil_mode")[0] != 0);
      CHECK(idx.dtype() == DType::i64);
      CHECK(idx.to_vector<int64_t>() == fx.get(c, "indices").to_vector<int64_t>());
    }
    y.backward(fx.get(c, "gy"));
    SL_CHECK_CLOSE(x.grad(), fx.get(c, "grad_x"), 1e-5, 1e-6);
  }
}

TEST_CASE("pool: gradcheck (f64) for every fixture option combination") {
  Fixture fx("pool");
  for (const auto& c : fx.cases()) {
    CAPTURE(c);
    Tensor x = fx.get_f64(c, "x");
    if (x.dim() == 4) x = x.narrow(0, 0, 1).contiguous();
    x.requires_grad_();
    CHECK(gradcheck([&](const TensorList& in) { return run_any(fx, c, in[0]); }, {x}));
  }
}

TEST_CASE("max_pool2d: ties, -inf and NaN follow PyTorch's rule") {
  // window of 4: ties keep the first maximum; NaN takes over; all -inf reports the first slot
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = from_vector<double>({1, 3, 3, 2, nan, 5, 7, nan, -inf, -inf, -inf, -inf}, {3, 2, 2});
  auto [y, idx] = max_pool2d_with_indices(x, 2);
  CHECK(idx.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0});
  auto yv = y.to_vector<double>();
  CHECK(yv[0] == 3);
  CHECK(std::isnan(yv[1]));
  CHECK(yv[2] == -inf);
}

TEST_CASE("max_pool2d: clipped windows match the definition (padding, dilation, ceil_mode)") {
  // Reference: every tap of every window with its own bounds check; the first valid tap starts,
  // a strictly greater value takes over. Random f64 values have no ties.
  struct G {
    int64_t H, W, k, s, p, d;
    bool ceil;
  };
  const G geos[] = {{56, 56, 3, 2, 1, 1, false},  // ResNet stem pool
                    {7, 9, 3, 1, 1, 1, false},   {8, 7, 4, 3, 2, 1, true},
                    {9, 10, 3, 2, 1, 3, true},   {5, 6, 2, 2, 1, 2, false},
                    {6, 6, 5, 2, 2, 1, true}};
  manual_seed(21);
  for (const G& q : geos) {
    CAPTURE(q.H);
    CAPTURE(q.k);
    CAPTURE(q.d);
    const int64_t P = 3;
    Tensor x = randn({1, P, q.H, q.W}, TensorOptions{.dtype = DType::f64}).requires_grad_();
    auto [y, idx] = max_pool2d_with_indices(x, q.k, q.s, q.p, q.d, q.ceil);
    const int64_t Ho = y.size(2), Wo = y.size(3);
    Tensor gy = randn(y.sizes(), TensorOptions{.dtype = DType::f64});
    y.backward(gy);
    const auto xv = x.detach().to_vector<double>();
    const auto gyv = gy.to_vector<double>();
    std::vector<double> ry(static_cast<size_t>(P * Ho * Wo)), rgx(xv.size(), 0.0);
    std::vector<int64_t> ri(ry.size());
    for (int64_t p = 0; p < P; ++p)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          int64_t best_i = -1;
          for (int64_t i = 0; i < q.k; ++i)
            for (int64_t j = 0; j < q.k; ++j) {
              const int64_t h = oh * q.s - q.p + i * q.d, w = ow * q.s - q.p + j * q.d;
              if (h < 0 || h >= q.H || w < 0 || w >= q.W) continue;
              const int64_t at = h * q.W + w;
              if (best_i < 0 || xv[static_cast<size_t>(p * q.H * q.W + at)] >
                                    xv[static_cast<size_t>(p * q.H * q.W + best_i)]) {
                best_i = at;
              }
            }
          REQUIRE(best_i >= 0);
          const auto o = static_cast<size_t>((p * Ho + oh) * Wo + ow);
          ri[o] = best_i;
          ry[o] = xv[static_cast<size_t>(p * q.H * q.W + best_i)];
          rgx[static_cast<size_t>(p * q.H * q.W + best_i)] += gyv[o];
        }
    CHECK(idx.to_vector<int64_t>() == ri);
    SL_CHECK_CLOSE(y, from_vector(ry, y.sizes()), 0, 0);
    // each input's gradient sums the same values in the same (output) order: exact
    SL_CHECK_CLOSE(x.grad(), from_vector(rgx, x.sizes()), 0, 0);
  }
}

namespace {

/// The window-at-a-time max pooling that the row-vectorised kernel replaced (Note [Vectorised
/// max pooling]), kept as the reference: per output, its valid taps in order (rows, then
/// columns); the first valid tap starts, a strictly greater value or a NaN takes over; an empty
/// window gives -inf and index -1.
template <class T>
void reference_max_pool(const std::vector<T>& x, int64_t P, int64_t H, int64_t W, int64_t Ho,
                        int64_t Wo, int64_t k, int64_t s, int64_t pad, int64_t d, std::vector<T>& y,
                        std::vector<int64_t>& ind) {
  y.assign(static_cast<size_t>(P * Ho * Wo), T(0));
  ind.assign(y.size(), -1);
  for (int64_t p = 0; p < P; ++p)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        T best = -std::numeric_limits<T>::infinity();
        int64_t best_i = -1;
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t h = oh * s - pad + i * d, w = ow * s - pad + j * d;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            const T v = x[static_cast<size_t>(p * H * W + h * W + w)];
            if (best_i < 0 || v > best || v != v) {
              best = v;
              best_i = h * W + w;
            }
          }
        y[static_cast<size_t>((p * Ho + oh) * Wo + ow)] = best;
        ind[static_cast<size_t>((p * Ho + oh) * Wo + ow)] = best_i;
      }
}

template <class T>
void check_max_pool_rows(DType dt) {
  // Widths around the vector lengths (4, 8, 16 lanes) so that vector bodies and scalar tails
  // both run, every stride branch (1, 2, other), dilation, padding and ceil_mode. Values are
  // small integers (many ties) with NaNs and -infs sprinkled in, so ties, NaN takeover and
  // all -inf windows are exercised; values and indices must match the reference exactly.
  struct G {
    int64_t k, s, p, d;
    bool ceil;
  };
  const G geos[] = {{3, 2, 1, 1, false}, {3, 1, 1, 1, false}, {2, 2, 0, 1, false},
                    {3, 2, 1, 1, true},  {3, 3, 1, 2, true},  {2, 1, 1, 3, false},
                    {4, 3, 2, 1, true},  {5, 2, 2, 1, false}, {2, 4, 1, 2, true}};
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  manual_seed(31);
  for (int64_t W : {1, 3, 7, 8, 9, 15, 17, 31, 33, 37, 64}) {
    for (const G& q : geos) {
      const int64_t H = 9, P = 3;
      if (W + 2 * q.p < q.d * (q.k - 1) + 1) continue;  // too small for the window
      CAPTURE(W);
      CAPTURE(q.k);
      CAPTURE(q.s);
      CAPTURE(q.p);
      CAPTURE(q.d);
      CAPTURE(q.ceil);
      std::vector<double> xv = randn({P * H * W}, {.dtype = DType::f64}).to_vector<double>();
      const std::vector<double> u = rand({P * H * W}, {.dtype = DType::f64}).to_vector<double>();
      for (size_t i = 0; i < xv.size(); ++i) {
        xv[i] = u[i] < 0.04 ? nan : u[i] < 0.12 ? -inf : std::round(2.0 * xv[i]);
      }
      Tensor x = from_vector(xv, {1, P, H, W}).to(dt);
      const auto res = max_pool2d_with_indices(x, q.k, q.s, q.p, q.d, q.ceil);
      const Tensor y = std::get<0>(res), idx = std::get<1>(res);
      const int64_t Ho = y.size(2), Wo = y.size(3);
      std::vector<T> ry;
      std::vector<int64_t> ri;
      reference_max_pool<T>(x.to_vector<T>(), P, H, W, Ho, Wo, q.k, q.s, q.p, q.d, ry, ri);
      CHECK(idx.to_vector<int64_t>() == ri);
      const std::vector<T> yv = y.to_vector<T>();
      bool same = yv.size() == ry.size();
      for (size_t i = 0; same && i < yv.size(); ++i) {
        same = std::isnan(ry[i]) ? std::isnan(yv[i]) : yv[i] == ry[i];
      }
      CHECK(same);
    }
  }
}

}  // namespace

TEST_CASE("max_pool2d: row-vectorised kernel matches the window-at-a-time reference exactly") {
  check_max_pool_rows<float>(DType::f32);
  check_max_pool_rows<double>(DType::f64);
}

TEST_CASE("max_pool2d: a window entirely in the padding gives -inf, index -1, no gradient") {
  // kernel 2, dilation 4, padding 1 on a 3 x 3 input: the one window's taps are at -1 and 3 in
  // both dims. PyTorch 1.13 gives -inf and the out-of-plane index 12; its gradient is all zero.
  Tensor x = randn({2, 3, 3}, TensorOptions{.dtype = DType::f64}).requires_grad_();
  auto [y, idx] = max_pool2d_with_indices(x, 2, 1, 1, 4);
  REQUIRE(y.sizes() == Shape{2, 1, 1});
  CHECK(idx.to_vector<int64_t>() == std::vector<int64_t>{-1, -1});
  CHECK(y.to_vector<double>() == std::vector<double>(2, -std::numeric_limits<double>::infinity()));
  max_pool2d(x, 2, 1, 1, 4).sum().backward();
  SL_CHECK_CLOSE(x.grad(), zeros_like(x), 0, 0);
}

TEST_CASE("pool: error paths") {
  Tensor x = randn({1, 2, 5, 5});
  SL_CHECK_THROWS(max_pool2d(randn({5, 5}), 2), ShapeError, "max_pool2d: expected a 3-d");
  SL_CHECK_THROWS(max_pool2d(x, 0), ValueError, "kernel_size must be positive");
  SL_CHECK_THROWS(max_pool2d(x, 2, 0), ValueError, "stride must be positive");
  SL_CHECK_THROWS(max_pool2d(x, 2, 1, 2), ValueError, "at most half of the kernel size");
  SL_CHECK_THROWS(max_pool2d(x, 2, 1, 0, 0), ValueError, "dilation must be positive");
  SL_CHECK_THROWS(max_pool2d(x, 6), ShapeError, "is too small for kernel_size [6, 6]");
  SL_CHECK_THROWS(max_pool2d(x, 3, 1, 0, 3), ShapeError, "is too small");
  SL_CHECK_THROWS(max_pool2d(x.to(DType::i64), 2), DTypeError, "expected a floating input");
  SL_CHECK_THROWS(avg_pool2d(x, 7), ShapeError,
                  "avg_pool2d: input of shape [1, 2, 5, 5] is too small");
  SL_CHECK_THROWS(avg_pool2d(x, 2, {}, 0, false, true, 0), ValueError,
                  "divisor_override must be positive");
  SL_CHECK_THROWS(adaptive_avg_pool2d(x, {-1, 2}), ShapeError,
                  "adaptive_avg_pool2d: output_size must be non-negative, got [-1, 2]");
  SL_CHECK_THROWS(adaptive_avg_pool2d(randn({2, 0, 3}), 2), ShapeError, "non-empty spatial dims");
}

// PyTorch 1.13: F.adaptive_avg_pool2d(x, (0, 3)) of a [2, 3, 5, 5] x has shape [2, 3, 0, 3], and
// (0, 0) gives [2, 3, 0, 0] (values from /usr/bin/python3 with torch 1.13). Its backward refuses
// the empty gradient; ours is the exact one: an output that reads no input element gives every
// input element a zero gradient.
TEST_CASE("adaptive_avg_pool2d: output size 0 gives an empty output and a zero gradient") {
  for (const auto& [oh, ow] : {std::pair<int64_t, int64_t>{0, 3}, {2, 0}, {0, 0}}) {
    CAPTURE(oh);
    CAPTURE(ow);
    Tensor x = randn({2, 3, 5, 5}, {.dtype = DType::f64}).requires_grad_();
    Tensor y = adaptive_avg_pool2d(x, {oh, ow});
    CHECK(y.sizes() == Shape{2, 3, oh, ow});
    y.sum().backward();
    REQUIRE(x.grad().defined());
    CHECK(x.grad().sizes() == x.sizes());
    CHECK(x.grad().abs().max().item<double>() == 0.0);
    // unbatched [C, H, W] too
    CHECK(adaptive_avg_pool2d(randn({3, 4, 4}), {oh, ow}).sizes() == Shape{3, oh, ow});
  }
}
