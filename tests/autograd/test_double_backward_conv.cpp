// Double backward (create_graph) through the convolutions (Note [Conv double backward] in
// autograd/ops/conv.cpp): gradgradcheck (central differences of the first-order gradient,
// float64) w.r.t. input, weight and bias jointly with every option, a third-order check, R1
// penalties of tiny CNNs gradchecked as functions of their parameters and compared with PyTorch
// 1.13 (tests/fixtures/ops/conv_r1.safetensors, tools/gen_op_fixtures.py conv_r1). The op-case
// table's conv cases (tests/core/op_cases_conv.cpp) are gradgradchecked by the sweep in
// test_double_backward.cpp.
#include <cmath>

#include "ops/fixtures.h"
#include "support/testing.h"

using namespace sl;
using namespace sl::testing;

namespace {
Tensor param(const Shape& s, double scale = 1.0) {
  return (randn(s, {.dtype = DType::f64}) * scale).detach().requires_grad_();
}

/// R1 (gamma = 2): mean over the batch of |dD/dx|^2, D summed per sample. Its gradient w.r.t.
/// the parameters is a second derivative of every layer of D.
Tensor r1_penalty(const std::function<Tensor(const Tensor&)>& d, const Tensor& x) {
  EnableGradGuard eg;
  Tensor xi = x.detach().requires_grad_();
  variable_list g = grad({d(xi).sum()}, {xi}, {}, /*retain_graph=*/true, /*create_graph=*/true);
  return g[0].square().sum() / static_cast<double>(x.size(0));
}
}  // namespace

TEST_CASE("conv double backward: gradgradcheck of conv2d / conv1d w.r.t. input, weight, bias") {
  manual_seed(21);
  // groups 2, stride 2, padding 1, dilation 2, batch 2
  Tensor x = param({2, 4, 5, 5}), w = param({4, 2, 2, 2}), b = param({4});
  CHECK(gradgradcheck([](const TensorList& in) { return conv2d(in[0], in[1], in[2], 2, 1, 2, 2); },
                      {x, w, b}));
  // per-dim options, "same" with an even kernel (asymmetric padding), no bias
  Tensor x2 = param({2, 2, 4, 5}), w2 = param({3, 2, 2, 3});
  CHECK(gradgradcheck(
      [](const TensorList& in) { return conv2d(in[0], in[1], Tensor(), 1, "same"); }, {x2, w2}));
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return conv2d(in[0], in[1], Tensor(), {2, 1}, {0, 1}, {1, 2});
      },
      {x2, w2}));
  // conv1d: groups 2, stride 2, padding 1, dilation 2, batch 2; and unbatched
  Tensor x1 = param({2, 4, 9}), w1 = param({6, 2, 3}), b1 = param({6});
  CHECK(gradgradcheck([](const TensorList& in) { return conv1d(in[0], in[1], in[2], 2, 1, 2, 2); },
                      {x1, w1, b1}));
  Tensor xu = param({4, 7});
  CHECK(gradgradcheck([](const TensorList& in) { return conv1d(in[0], in[1], in[2], 1, 2, 1, 2); },
                      {xu, w1, b1}));
}

TEST_CASE(
    "conv double backward: gradgradcheck of conv_transpose2d / 1d w.r.t. input, weight, bias") {
  manual_seed(22);
  // groups 2, stride 2, padding 1, output_padding 1, dilation 2, batch 2
  Tensor x = param({2, 4, 3, 3}), w = param({4, 2, 2, 2}), b = param({4});
  CHECK(gradgradcheck(
      [](const TensorList& in) { return conv_transpose2d(in[0], in[1], in[2], 2, 1, 1, 2, 2); },
      {x, w, b}));
  // output_padding past the stride (dilation 3 allows it): x is padded with zero rows inside
  Tensor x2 = param({2, 2, 3, 4}), w2 = param({2, 3, 2, 2}), b2 = param({3});
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return conv_transpose2d(in[0], in[1], in[2], {1, 2}, {1, 0}, {2, 1}, 1, {3, 1});
      },
      {x2, w2, b2}));
  // conv_transpose1d: groups 2, stride 2, padding 1, output_padding 1, dilation 2
  Tensor x1 = param({2, 4, 5}), w1 = param({4, 3, 3}), b1 = param({6});
  CHECK(gradgradcheck(
      [](const TensorList& in) { return conv_transpose1d(in[0], in[1], in[2], 2, 1, 1, 2, 2); },
      {x1, w1, b1}));
}

TEST_CASE("conv double backward: third order (gradgradcheck of a create_graph gradient)") {
  // The second-order graph is made of the recorded maps again, so a gradient of it can be
  // differentiated once more: gradgradcheck of x -> d/dx sum(conv(x, w)^2) checks the third
  // derivative w.r.t. x and w, for conv2d and conv_transpose2d.
  manual_seed(23);
  Tensor x = param({1, 2, 4, 4}), w = param({2, 1, 2, 2}), b = param({2});
  auto first = [](const std::function<Tensor(const TensorList&)>& f) {
    return [f](const TensorList& in) {
      EnableGradGuard eg;  // gradgradcheck asks for the output's shape under NoGradGuard
      variable_list g = grad({f(in).square().sum()}, {in[0], in[1]}, {}, true, true);
      return cat({g[0].reshape({-1}), g[1].reshape({-1})}, 0);
    };
  };
  CHECK(gradgradcheck(
      first([](const TensorList& in) { return conv2d(in[0], in[1], in[2], 2, 1, 1, 2); }),
      {x, w, b}));
  Tensor xt = param({1, 2, 3, 3}), wt = param({2, 1, 2, 3});
  CHECK(gradgradcheck(first([](const TensorList& in) {
                        return conv_transpose2d(in[0], in[1], in[2], 2, 1, 1, 2, {1, 2});
                      }),
                      {xt, wt, b}));
}

TEST_CASE("conv double backward: create_graph leaves the first-order gradients as they were") {
  // Under create_graph the backward calls the recorded maps instead of the one fused kernel
  // call; grad input and grad weight are the same kernel passes (the same bits), grad bias a
  // sum in another order (float64: within a few ulps of its O(10) value, so 1e-13 relative).
  manual_seed(24);
  Tensor x = param({2, 4, 6, 5}), w = param({6, 2, 3, 2}), b = param({6});
  Tensor xt = param({2, 4, 3, 3}), wt = param({4, 2, 3, 3}), bt = param({4});
  // `in` ends with the bias when bias_last
  auto both = [](const Tensor& y, const TensorList& in, bool bias_last = true) {
    Tensor v = randn(y.sizes(), {.dtype = DType::f64});
    variable_list plain = grad({y}, in, {v}, true, false);
    variable_list graph = grad({y}, in, {v}, true, true);
    for (size_t i = 0; i < in.size(); ++i) {
      CAPTURE(i);
      if (!bias_last || i + 1 < in.size()) {
        // grad x and grad w depend on w and x; grad bias = sum(v) on nothing that requires grad
        REQUIRE(graph[i].requires_grad());
        CHECK(equal(graph[i].detach(), plain[i]));
      } else {
        SL_CHECK_CLOSE(graph[i].detach(), plain[i], 1e-13, 0);
      }
    }
  };
  both(conv2d(x, w, b, {2, 1}, 1, {1, 2}, 2), {x, w, b});
  both(conv_transpose2d(xt, wt, bt, 2, 1, 1, 2, {2, 1}), {xt, wt, bt});
  // output_padding past the stride: x padded with zero rows at the end, also under create_graph
  Tensor we = param({4, 3, 2, 2});
  both(conv_transpose2d(xt, we, bt.narrow(0, 0, 3), {1, 2}, 0, {2, 1}, 1, {3, 1}), {xt, we, bt});
  Tensor ws = param({3, 4, 2, 3});
  both(conv2d(x, ws, Tensor(), 1, "same"), {x, ws}, false);
  Tensor x1 = param({2, 4, 9}), w1 = param({6, 2, 3}), b1 = param({6});
  both(conv1d(x1, w1, b1, 2, 1, 2, 2), {x1, w1, b1});
  both(conv_transpose1d(x1, param({4, 3, 3}), b1, 2, 1, 1, 2, 2), {x1, b1});
}

TEST_CASE("conv double backward: R1 penalty of a tiny CNN, gradchecked through its parameters") {
  manual_seed(25);
  Tensor x = randn({2, 2, 5, 5}, {.dtype = DType::f64});
  Tensor w1 = param({3, 2, 3, 3}, 0.5), b1 = param({3}), w2 = param({1, 3, 2, 2}, 0.5),
         b2 = param({1});
  auto penalty = [&x](const TensorList& p) {
    return r1_penalty(
        [&p](const Tensor& xi) {
          return conv2d(relu(conv2d(xi, p[0], p[1], 2, 1)), p[2], p[3], 1, 0, 1, 1).sum({1, 2, 3});
        },
        x);
  };
  CHECK(gradcheck(penalty, {w1, b1, w2, b2}));
  auto penalty_tanh = [&x](const TensorList& p) {
    return r1_penalty(
        [&p](const Tensor& xi) {
          return conv2d(tanh(conv2d(xi, p[0], p[1], 1, "same")), p[2], p[3], 2).sum({1, 2, 3});
        },
        x);
  };
  CHECK(gradcheck(penalty_tanh, {w1, b1, w2, b2}));
}

TEST_CASE("conv double backward: R1 penalties match PyTorch 1.13 (float64)") {
  // tools/gen_op_fixtures.py conv_r1: the same networks, inputs and parameters in torch's f64.
  // Every value is a few hundred f64 products and sums of O(1) terms on each side, in
  // different orders (our GEMMs vs MKL-DNN / THNN): ~1e-16 relative per operation, so 1e-12
  // relative; atol 1e-13 for the elements that cancel to near zero (O(1) terms summed).
  Fixture fx("conv_r1");
  auto params = [&fx](const std::string& c, int n) {
    TensorList p;
    for (int i = 0; i < n; ++i) p.push_back(fx.get(c, "p" + std::to_string(i)).requires_grad_());
    return p;
  };
  auto check = [&fx](const std::string& c, const TensorList& p, const Tensor& penalty) {
    CAPTURE(c);
    SL_CHECK_CLOSE(penalty.detach(), fx.get(c, "penalty"), 1e-12, 1e-13);
    variable_list g = grad({penalty}, p);
    for (size_t i = 0; i < p.size(); ++i) {
      CAPTURE(i);
      SL_CHECK_CLOSE(g[i], fx.get(c, "grad_p" + std::to_string(i)), 1e-12, 1e-13);
    }
  };
  {
    TensorList p = params("cnn2d", 5);
    Tensor penalty = r1_penalty(
        [&p](const Tensor& xi) {
          Tensor h = tanh(conv2d(xi, p[0], p[1], 2, 1));
          h = tanh(conv_transpose2d(h, p[2], p[3], 2, 1, 1, 2, {2, 1}));
          return conv2d(h, p[4], Tensor(), 1, {1, 0}, {1, 2}, 2).sum({1, 2, 3});
        },
        fx.get("cnn2d", "x"));
    check("cnn2d", p, penalty);
  }
  {
    TensorList p = params("cnn1d", 3);
    Tensor penalty = r1_penalty(
        [&p](const Tensor& xi) {
          Tensor h = tanh(conv1d(xi, p[0], p[1], 2, 1, 2, 2));
          return conv_transpose1d(h, p[2], Tensor(), 2, 1, 1, 3, 2).sum({1, 2});
        },
        fx.get("cnn1d", "x"));
    check("cnn1d", p, penalty);
  }
}

TEST_CASE("conv double backward: 16-bit inputs compute in float32 and stay differentiable") {
  // f16 / bf16 inputs: the second-order gradient of a penalty is computed (each map in float32,
  // rounded to 16 bits once per map) and agrees with the float32 one to the 16-bit format's
  // precision. About 8 roundings of unit u (2^-11 f16, 2^-8 bf16) lie on the way (x, w and v
  // themselves, the two maps' outputs, the square, the sum, the result), each relative to terms
  // no larger than the largest result, so atol = 8 u max |ref| (rtol 0: small elements are sums
  // that cancel, their error is the terms', not their own).
  manual_seed(26);
  Tensor x = randn({1, 2, 4, 4}), w = randn({2, 2, 2, 2}), v = randn({1, 2, 3, 3});
  auto second = [&](DType dt) {
    Tensor xi = x.to(dt).requires_grad_(), wi = w.to(dt).requires_grad_();
    Tensor y = conv2d(xi, wi, Tensor(), 1, 0);
    variable_list gx = grad({y}, {xi}, {v.to(dt)}, true, true);
    REQUIRE(gx[0].dtype() == dt);
    REQUIRE(gx[0].requires_grad());
    return grad({gx[0].square().sum()}, {wi})[0].to(DType::f32);
  };
  Tensor ref = second(DType::f32);
  const double scale = ref.abs().max().item<double>();
  SL_CHECK_CLOSE(second(DType::f16), ref, 0, 8 * std::ldexp(1.0, -11) * scale);
  SL_CHECK_CLOSE(second(DType::bf16), ref, 0, 8 * std::ldexp(1.0, -8) * scale);
}
