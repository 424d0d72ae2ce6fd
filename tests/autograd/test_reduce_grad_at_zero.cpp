// The gradients of std, var and norm where the result (or an element) is 0, as PyTorch 1.13 gives
// them: std_backward masks grad / (2 std) to 0 where std == 0 (a constant slice), so a constant
// input has gradient 0, not sqrt's 0 * inf = NaN; var's gradient there is 0 anyway; norm_backward
// is 0 for an all-zero slice and at zero elements (sgn(x) |x|^(p-1), masked at x == 0 for p < 1);
// prod's where a slice holds a zero and a NaN or inf (the product of the others, element by
// element, not y / x = NaN for the whole slice).
// Elsewhere the expected values are the closed forms: d std / dx_i = (x_i - mean) / ((n - c) std)
// and d ||x||_p / dx_i = sgn(x_i) |x_i|^(p-1) / ||x||_p^(p-1).
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "support/testing.h"

using namespace sl;

TEST_CASE("std of a constant input has gradient 0, over all elements and along a dim") {
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    Tensor c = full({4}, 3.0, {.dtype = dt}).requires_grad_();
    c.std().backward();
    SL_CHECK_CLOSE(c.grad(), zeros({4}, {.dtype = dt}), 0, 0);
    // row 0 constant, row 1 [2, 3]: std 0 and sqrt(1/2) (correction 1)
    Tensor x = tensor({1.0, 1.0, 2.0, 3.0}, {.dtype = dt}).view({2, 2}).requires_grad_();
    x.std({1}).backward(tensor({5.0, 7.0}, {.dtype = dt}));
    const double s = std::sqrt(0.5), r = 7.0 * 0.5 / (1.0 * s);  // (x - mean) / ((n - c) std)
    SL_CHECK_CLOSE(x.grad(), tensor({0.0, 0.0, -r, r}, {.dtype = dt}).view({2, 2}), 1e-6, 1e-6);
    // keepdim, correction 0: std of row 1 is 0.5, d/dx = (x - mean) / (2 * 0.5)
    Tensor k = tensor({1.0, 1.0, 2.0, 3.0}, {.dtype = dt}).view({2, 2}).requires_grad_();
    k.std({1}, 0, true).backward(ones({2, 1}, {.dtype = dt}));
    SL_CHECK_CLOSE(k.grad(), tensor({0.0, 0.0, -0.5, 0.5}, {.dtype = dt}).view({2, 2}), 1e-6, 1e-6);
    // var of a constant: 2 (x - mean) / (n - c) is 0
    Tensor v = full({4}, 3.0, {.dtype = dt}).requires_grad_();
    v.var().backward();
    SL_CHECK_CLOSE(v.grad(), zeros({4}, {.dtype = dt}), 0, 0);
  }
}

TEST_CASE("norm's gradient is 0 for a zero vector and at zero elements, for every p") {
  const double inf = std::numeric_limits<double>::infinity();
  for (double p : {2.0, 1.0, 1.5, 0.5, 3.0, inf}) {
    CAPTURE(p);
    Tensor z = zeros({3}, {.dtype = DType::f64}).requires_grad_();
    z.norm(p).backward();
    SL_CHECK_CLOSE(z.grad(), zeros({3}, {.dtype = DType::f64}), 0, 0);
    // [0, 1, -2]: the zero element gets 0, the others the closed form
    const std::vector<double> v = {0.0, 1.0, -2.0};
    Tensor x = tensor({0.0, 1.0, -2.0}, {.dtype = DType::f64}).requires_grad_();
    x.norm(p).backward();
    std::vector<double> want(3, 0.0);
    if (std::isinf(p)) {
      want = {0.0, 0.0, -1.0};  // the one largest |x_i| takes it
    } else {
      double n = 0;
      for (double e : v) n += std::pow(std::fabs(e), p);
      n = std::pow(n, 1.0 / p);
      for (size_t i = 1; i < 3; ++i) {
        want[i] = (v[i] > 0 ? 1 : -1) * std::pow(std::fabs(v[i]), p - 1) / std::pow(n, p - 1);
      }
    }
    SL_CHECK_CLOSE(x.grad(), from_vector(want, {3}), 1e-12, 1e-12);
    // along a dim: an all-zero row and a row with a zero
    Tensor m = tensor({0.0, 0.0, 0.0, 3.0, -4.0, 0.0}, {.dtype = DType::f64})
                   .view({2, 3})
                   .requires_grad_();
    m.norm(p, {1}).sum().backward();
    CHECK(m.grad().isfinite().all().item<bool>());
    SL_CHECK_CLOSE(m.grad().slice(0, 0, 1), zeros({1, 3}, {.dtype = DType::f64}), 0, 0);
    CHECK(m.grad()[1][2].item<double>() == 0.0);
  }
}

TEST_CASE("norm of order -inf, 0 and below 0: values and gradients as PyTorch 1.13") {
  // Expected values printed by PyTorch 1.13 (/usr/bin/python3):
  //   for p in [float('-inf'), 0, -1, -2, -0.5]:
  //     for v in [[1.,-3.,3.,2.], [0.,-3.,2.,0.], [float('inf'), 2.], [0., 0.]]:
  //       x = torch.tensor(v, dtype=torch.float64, requires_grad=True); n = torch.norm(x, p)
  //       n.backward(); print(p, v, n.item(), x.grad)   # x.grad None (p = 0): zeros
  //   torch.norm(torch.zeros(2, 0), p, dim=1)            # [0., 0.] for every p
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    double p;
    std::vector<double> x;
    double norm;
    std::vector<double> grad;
  };
  const std::vector<Case> cases = {
      {-inf, {1, -3, 3, 2}, 1.0, {1, 0, 0, 0}},
      {-inf, {0, -3, 2, 0}, 0.0, {0, 0, 0, 0}},
      {-inf, {inf, 2}, 2.0, {0, 1}},
      {-inf, {0, 0}, 0.0, {0, 0}},
      {0, {1, -3, 3, 2}, 4.0, {0, 0, 0, 0}},
      {0, {0, -3, 2, 0}, 2.0, {0, 0, 0, 0}},
      {0, {inf, 2}, 2.0, {0, 0}},
      {0, {0, 0}, 0.0, {0, 0}},
      {-1,
       {1, -3, 3, 2},
       0.46153846153846156,
       {0.21301775147928997, -0.02366863905325444, 0.02366863905325444, 0.053254437869822494}},
      {-1, {0, -3, 2, 0}, 0.0, {0, 0, 0, 0}},
      {-1, {inf, 2}, 2.0, {0, 1}},
      {-1, {0, 0}, 0.0, {0, 0}},
      {-2,
       {1, -3, 3, 2},
       0.8241633836921342,
       {0.5598090908097516, -0.0207336700299908, 0.0207336700299908, 0.06997613635121895}},
      {-0.5,
       {1, -3, 3, 2},
       0.12210099970187172,
       {0.04266569550894754, -0.00821101692908449, 0.00821101692908449, 0.015084601309208617}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.p);
    CAPTURE(c.x[0]);
    const int64_t n = static_cast<int64_t>(c.x.size());
    Tensor x = from_vector(c.x, {n}).requires_grad_();
    Tensor y = x.norm(c.p);
    // float64 closed forms: a few ulps from PyTorch's evaluation order
    CHECK(y.item<double>() == doctest::Approx(c.norm).epsilon(1e-14));
    y.backward();
    SL_CHECK_CLOSE(x.grad(), from_vector(c.grad, {n}), 1e-14, 1e-15);
  }
  for (double p : {-inf, 0.0, -1.0, 2.0, inf}) {
    CAPTURE(p);
    SL_CHECK_CLOSE(zeros({2, 0}, {.dtype = DType::f64}).norm(p, {1}),
                   zeros({2}, {.dtype = DType::f64}), 0, 0);
  }
  SL_CHECK_THROWS(ones({2}).norm(std::numeric_limits<double>::quiet_NaN()), ValueError,
                  "norm: order p must be a number");
}

// PyTorch 1.13: torch.std(x, 1, correction=3) for x = [[1, 3], [2, 2]] is [inf, nan] and its
// gradient (ones in) [[0, -0], [nan, nan]]: grad / (2 std) is 0 where std is inf, times
// 2 (x - mean) / (n - c) with n - c = -1 unclamped in the backward; NaN where std is 0/0.
TEST_CASE("std with a correction >= N: inf and a zero gradient, NaN for a constant row") {
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    Tensor x = tensor({1.0, 3.0, 2.0, 2.0}, {.dtype = dt}).view({2, 2}).requires_grad_();
    Tensor s = x.std({1}, 3);
    std::vector<double> sv = s.to(DType::f64).to_vector<double>();
    CHECK(std::isinf(sv[0]));
    CHECK(sv[0] > 0);
    CHECK(std::isnan(sv[1]));
    s.backward(ones({2}, {.dtype = dt}));
    std::vector<double> g = x.grad().to(DType::f64).to_vector<double>();
    CHECK(g[0] == 0.0);
    CHECK(g[1] == 0.0);
    CHECK(std::signbit(g[1]));
    CHECK(std::isnan(g[2]));
    CHECK(std::isnan(g[3]));
  }
}

// d(a^b)/db = a^b log(a): at a = 0, PyTorch's pow_backward_exponent gives 0 where b >= 0 and
// grad * 0^b * log(0) = -inf where b < 0 (torch.pow(0.0, x) for x = [0, 1, -1, 2]: gradient
// [0, 0, -inf, 0] with ones in).
TEST_CASE("pow(0, b)'s gradient in b is 0 for b >= 0 and -inf for b < 0") {
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    Tensor b = tensor({0.0, 1.0, -1.0, 2.0, -0.5}, {.dtype = dt}).requires_grad_();
    pow(Scalar(0.0), b).sum().backward();
    std::vector<double> g = b.grad().to(DType::f64).to_vector<double>();
    CHECK(g[0] == 0.0);
    CHECK(g[1] == 0.0);
    CHECK(g[3] == 0.0);
    CHECK(std::isinf(g[2]));
    CHECK(g[2] < 0);
    CHECK(std::isinf(g[4]));
    CHECK(g[4] < 0);
  }
}

// Note [prod backward at zeros] (autograd/ops/reduce.cpp). Expected gradients printed by PyTorch
// 1.13 (/usr/bin/python3), the same in float32 and float64:
//   x = torch.tensor(v, dtype=dt).reshape(shape).requires_grad_()
//   y = x.prod() if dim is None else x.prod(dim, keepdim=keepdim)
//   y.backward(torch.ones_like(y) if g is None else torch.tensor(g, dtype=dt).reshape(y.shape))
//   print(x.grad.flatten().tolist())
// Every expected value is 0, +-inf, NaN, a small integer or a half, exact in float32: tolerance 0.
// Run on every device: the backward is composed of differentiable ops (where, cat, flip, mul).
TEST_CASE("prod's gradient with one zero beside NaN or inf, and with none or two zeros") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    std::vector<double> x;
    Shape shape;
    std::optional<int64_t> dim;  // nullopt: prod over all elements
    bool keepdim;
    std::vector<double> g;  // upstream gradient; empty: ones
    std::vector<double> want;
  };
  const std::vector<Case> cases = {
      // one zero: the zero gets the product of the others, the rest 0 * (NaN or inf) or 0
      {{2, nan, 0}, {3}, std::nullopt, false, {}, {nan, 0, nan}},
      {{2, inf, 0}, {3}, std::nullopt, false, {}, {nan, 0, inf}},
      {{2, -inf, 0}, {3}, std::nullopt, false, {}, {nan, 0, -inf}},
      {{inf, 2, 0, 5}, {4}, std::nullopt, false, {}, {0, nan, inf, nan}},
      {{0, nan, inf}, {3}, std::nullopt, false, {}, {nan, nan, nan}},
      {{nan, nan, 0}, {3}, std::nullopt, false, {}, {nan, nan, nan}},
      {{2, 3, 0}, {3}, std::nullopt, false, {}, {0, 0, 6}},
      // no zero (y / x) and two zeros over all elements (0 everywhere) stay as they were
      {{2, 3, 4}, {3}, std::nullopt, false, {}, {12, 8, 6}},
      {{2, nan}, {2}, std::nullopt, false, {}, {nan, nan}},
      {{0, 0, 3}, {3}, std::nullopt, false, {}, {0, 0, 0}},
      {{0, nan, 0}, {3}, std::nullopt, false, {}, {0, 0, 0}},
      // along a dim, keepdim false and true, with an upstream gradient
      {{2, nan, 0, 1, 2, 3}, {2, 3}, 1, false, {5, 7}, {nan, 0, nan, 42, 21, 14}},
      {{2, nan, 0, 1, 2, 3}, {2, 3}, 1, true, {5, 7}, {nan, 0, nan, 42, 21, 14}},
      {{2, inf, 0, 1, 2, 3}, {2, 3}, -1, false, {5, 7}, {nan, 0, inf, 42, 21, 14}},
      {{2, nan, inf, 2, 0, 0}, {3, 2}, 0, false, {}, {nan, 0, 0, nan, inf, nan}},
      {{0, 0, 3, 1, 2, 0}, {2, 3}, 1, false, {}, {0, 0, 0, 0, 0, 2}},
      // two zeros along a dim: 0 * (the rest), NaN beside a NaN or inf (PyTorch's cumprod path)
      {{0, nan, 0, 0, 0, inf}, {2, 3}, 1, true, {}, {nan, 0, nan, nan, nan, 0}},
      {{0, nan, 0}, {3}, 0, false, {}, {nan, 0, nan}},
      // a zero anywhere switches every slice to the product of the others (PyTorch's
      // prod_safe_zeros_backward), also the zero-free ones: [1, nan, 3] gets [nan, 3, nan]
      // there, where y / x would give NaN everywhere (it did here before)
      {{2, nan, 0, 1, nan, 3}, {2, 3}, 1, false, {}, {nan, 0, nan, nan, 3, nan}},
      {{2, nan, 0, 1, inf, 3}, {2, 3}, 1, false, {5, 7}, {nan, 0, nan, inf, 21, inf}},
      {{2, 0, 0, 1, nan, 3}, {2, 3}, 1, false, {}, {0, 0, 0, nan, 3, nan}},
      {{2, 0, 1, inf, 3, nan}, {3, 2}, 0, false, {}, {3, nan, 6, nan, 2, nan}},
      {{2, 0, 1, inf, 3, nan}, {3, 2}, 0, true, {}, {3, nan, 6, nan, 2, nan}},
      {{1, nan, 3}, {3}, 0, false, {}, {nan, nan, nan}},  // no zero at all: y / x
      {{0, nan, 3, 0}, {4}, std::nullopt, false, {}, {0, 0, 0, 0}},
      // slices of 4 and 5: the scan's later steps
      {{2, 3, nan, 5, 7, 1, 0, 2, 3, 4},
       {2, 5},
       1,
       false,
       {},
       {nan, nan, 210, nan, nan, 0, 24, 0, 0, 0}},
      {{2, 3, -1, 5, 7, 1, 0, 2, 3, 4, 0.5, -2},
       {3, 4},
       1,
       false,
       {},
       {-15, -10, 30, -6, 0, 0, 14, 0, -4, -3, -24, 6}},
      {{2, 3, -1, 5, 7, 1, 0, 2, 3, 4, 0.5, -2},
       {4, 3},
       0,
       false,
       {},
       {0, 7, -6, 0, 3, 6, 40, 10.5, 2, 0, 42, -3}},
      {{2, 3, -1, 5, 7, 1, 0, 2, 3, 4, 0.5, -2},
       {12},
       std::nullopt,
       false,
       {},
       {0, 0, 0, 0, 0, 0, 5040, 0, 0, 0, 0, 0}},
      // a 0-d input passes the gradient through, even NaN or inf
      {{nan}, {}, std::nullopt, false, {}, {1}},
      {{inf}, {}, 0, false, {}, {1}},
  };
  for (Device dev : sl::testing::test_devices()) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (const Case& c : cases) {
        CAPTURE(dev);
        CAPTURE(dt);
        CAPTURE(shape_str(c.shape));
        CAPTURE(c.x[0]);
        CAPTURE(c.x[1 % c.x.size()]);
        CAPTURE(c.dim.value_or(99));
        // from_vector reads an empty shape as {n}: reshape gives the 0-d cases their shape
        Tensor x = from_vector(c.x).to(dev, dt).reshape(c.shape).requires_grad_();
        Tensor y = c.dim ? x.prod(*c.dim, c.keepdim) : x.prod();
        y.backward(c.g.empty() ? ones_like(y) : from_vector(c.g).to(dev, dt).reshape(y.sizes()));
        CHECK(x.grad().dtype() == dt);
        SL_CHECK_CLOSE(x.grad().cpu(), from_vector(c.want).reshape(c.shape), 0, 0);
      }
    }
  }
}
