// Parity with PyTorch for Linear and the activation modules (fixtures: linear, activation),
// plus gradchecks in float64.
#include <cmath>

#include "fixture.h"
#include "nn/activation.h"
#include "nn/linear.h"

using namespace sl;
using sl::testing::Fixture;

// f32 tolerances: rtol 1e-5, atol 1e-6 (the default). Inputs are O(1) and every output
// element is a short sum (<= 6 terms) or an elementwise function, so f32 rounding differences
// against PyTorch stay around 1e-7.
constexpr double kRtol = 1e-5, kAtol = 1e-6;

TEST_CASE("Linear matches PyTorch") {
  Fixture fx("linear");
  for (auto [name, in, out, bias] :
       {std::tuple{"linear", 5, 3, true}, std::tuple{"linear_nobias_3d", 6, 4, false}}) {
    CAPTURE(name);
    nn::Linear m(in, out, bias);
    fx.load_params(m, name);
    Tensor x = fx.input(name, 0);
    fx.check_backward(name, {m.forward(x)}, {x}, &m, kRtol, kAtol);
  }
}

TEST_CASE("activation modules match PyTorch") {
  Fixture fx("activation");
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> cases = {
      {"relu", std::make_shared<nn::ReLU>()},
      {"gelu", std::make_shared<nn::GELU>()},
      {"gelu_tanh", std::make_shared<nn::GELU>("tanh")},
      {"tanh", std::make_shared<nn::Tanh>()},
      {"sigmoid", std::make_shared<nn::Sigmoid>()},
      {"silu", std::make_shared<nn::SiLU>()},
      {"hardtanh", std::make_shared<nn::Hardtanh>(0.0, 2.0)},
      {"leaky_relu", std::make_shared<nn::LeakyReLU>(0.1)},
      {"softplus", std::make_shared<nn::Softplus>()},
      {"softplus_beta2_th3", std::make_shared<nn::Softplus>(2.0, 3.0)},
      {"elu", std::make_shared<nn::ELU>()},
      {"elu_alpha05", std::make_shared<nn::ELU>(0.5)},
      {"selu", std::make_shared<nn::SELU>()},
      {"mish", std::make_shared<nn::Mish>()},
      {"hardswish", std::make_shared<nn::Hardswish>()},
      {"hardsigmoid", std::make_shared<nn::Hardsigmoid>()},
  };
  for (auto& [name, m] : cases) {
    CAPTURE(name);
    Tensor x = fx.input(name, 0);
    fx.check_backward(name, {m->forward(x)}, {x}, m.get(), kRtol, kAtol);
  }
}

TEST_CASE("Softmax, LogSoftmax and Softmin modules match PyTorch, reprs included") {
  Fixture fx("activation");
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> cases = {
      {"softmax_dim1", std::make_shared<nn::Softmax>(1)},
      {"log_softmax_dim_neg1", std::make_shared<nn::LogSoftmax>(-1)},
      {"softmin_dim0", std::make_shared<nn::Softmin>(0)},
  };
  for (auto& [name, m] : cases) {
    CAPTURE(name);
    Tensor x = fx.input(name, 0);
    fx.check_backward(name, {m->forward(x)}, {x}, m.get(), kRtol, kAtol);
    CHECK(m->str() == fx.meta(name + ".repr"));
  }
}

TEST_CASE("Softmax-family modules: gradcheck in float64, the dim used, errors") {
  namespace F = sl::nn::functional;
  manual_seed(7);
  Tensor x = randn({2, 3, 4}, {.dtype = DType::f64}).requires_grad_();
  nn::Softmax sm(1);
  nn::LogSoftmax lsm(-1);
  nn::Softmin smin(0);
  CHECK(gradcheck([&](const TensorList& in) { return sm.forward(in[0]); }, {x}));
  CHECK(gradcheck([&](const TensorList& in) { return lsm.forward(in[0]); }, {x}));
  CHECK(gradcheck([&](const TensorList& in) { return smin.forward(in[0]); }, {x}));
  CHECK(gradcheck([&](const TensorList& in) { return F::softmin(in[0], -2); }, {x}));
  // each normalizes along its own dim: the sums over it are 1 (log: of the exponentials)
  Tensor d = x.detach();
  SL_CHECK_CLOSE(sm.forward(d).sum({1}), ones({2, 4}, {.dtype = DType::f64}), 1e-12, 1e-12);
  SL_CHECK_CLOSE(lsm.forward(d).exp().sum({2}), ones({2, 3}, {.dtype = DType::f64}), 1e-12, 1e-12);
  SL_CHECK_CLOSE(smin.forward(d).sum({0}), ones({3, 4}, {.dtype = DType::f64}), 1e-12, 1e-12);
  // softmin is the softmax of the negation, and picks the smallest: 1 / (1 + e^-1) at x = 0
  SL_CHECK_CLOSE(F::softmin(tensor({0.0, 1.0}), 0),
                 tensor({1 / (1 + std::exp(-1.0)), 1 / (1 + std::exp(1.0))}), 1e-15, 1e-15);
  // with a dtype, as F.softmin(x, 0, dtype=torch.float64)
  CHECK(F::softmin(tensor({1.f, 2.f}), 0, DType::f64).dtype() == DType::f64);
  SL_CHECK_THROWS(nn::Softmax(3).forward(d), IndexError, "softmax: dim 3 out of range");
  SL_CHECK_THROWS(nn::LogSoftmax(-4).forward(d), IndexError, "log_softmax: dim -4 out of range");
  SL_CHECK_THROWS(nn::Softmin(5).forward(d), IndexError, "softmin: dim 5 out of range");
  SL_CHECK_THROWS(nn::Softmin(0).forward(ones({2}, {.dtype = DType::i64})), DTypeError,
                  "softmin: expected a floating dtype, got int64");
  SL_CHECK_THROWS(nn::Softmax(0).forward(Tensor()), ValueError, "Softmax: the input is undefined");
  SL_CHECK_THROWS(nn::Softmin(0).forward(Tensor()), ValueError, "Softmin: the input is undefined");
  SL_CHECK_THROWS(F::softmin(Tensor(), 0), ValueError, "softmin");
}

TEST_CASE("hardtanh's gradient is 0 at its bounds, clamp's is 1, as in PyTorch") {
  // PyTorch 1.13: hardtanh([0, 20, 5, -1, 21], 0, 20).sum().backward() gives [0, 0, 1, 0, 0]
  // (hardtanh_backward compares strictly); clamp(x, 0, 20) gives [1, 1, 1, 0, 0]. A finite
  // difference cannot tell (both are kinks), so the values are PyTorch's.
  Tensor x = tensor({0.f, 20.f, 5.f, -1.f, 21.f}).requires_grad_();
  nn::Hardtanh(0.0, 20.0).forward(x).sum().backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{0, 0, 1, 0, 0});
  Tensor y = tensor({0.f, 20.f, 5.f, -1.f, 21.f}).requires_grad_();
  clamp(y, 0.0, 20.0).sum().backward();
  CHECK(y.grad().to_vector<float>() == std::vector<float>{1, 1, 1, 0, 0});
}

TEST_CASE("composed activations: values and gradients at their kinks and extremes are PyTorch's") {
  namespace F = sl::nn::functional;
  // Each row: inputs, then PyTorch 1.13's outputs and x.grad after f(x).sum().backward(), printed
  // with 10 digits (float32). The kinks are where a finite difference cannot decide, so these are
  // the reference.
  struct Row {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    std::vector<float> x, y, grad;
  };
  const std::vector<Row> rows = {
      // F.hardswish([-3, 3, 0, -1e-30])
      {"hardswish",
       [](const Tensor& x) { return F::hardswish(x); },
       {-3, 3, 0, -1e-30f},
       {-0.f, 3, 0, -5e-31f},
       {-0.5f, 1.5f, 0.5f, 0.5f}},
      // F.hardsigmoid([-3, 3, 0])
      {"hardsigmoid",
       [](const Tensor& x) { return F::hardsigmoid(x); },
       {-3, 3, 0},
       {0, 1, 0.5f},
       {0, 0, 1.f / 6}},
      // F.softplus([1.5, 1.5001, -100, 0], beta=2, threshold=3): 1.5 is the threshold (beta x
      // = 3 is not above it), 1.5001 passes through
      {"softplus",
       [](const Tensor& x) { return F::softplus(x, 2.0, 3.0); },
       {1.5f, 1.5001f, -100, 0},
       {1.5242936611f, 1.5001000166f, 0, 0.3465735912f},
       {0.9525741339f, 1, 0, 0.5f}},
      // F.softplus([1e30, -1e30, 50])
      {"softplus",
       [](const Tensor& x) { return F::softplus(x); },
       {1e30f, -1e30f, 50},
       {1e30f, 0, 50},
       {1, 0, 1}},
      // F.elu([0, -1], alpha=2), F.elu([1e30, -1e30, 100])
      {"elu",
       [](const Tensor& x) { return F::elu(x, 2.0); },
       {0, -1},
       {0, -1.2642411f},
       {2, 0.7357589f}},
      {"elu",
       [](const Tensor& x) { return F::elu(x); },
       {1e30f, -1e30f, 100},
       {1e30f, -1, 100},
       {1, 0, 1}},
      // F.selu([0, -1e4])
      {"selu",
       [](const Tensor& x) { return F::selu(x); },
       {0, -1e4f},
       {0, -1.7580993176f},
       {1.7580993176f, 0}},
      // F.mish([0, 1e30, -1e30, -50])
      {"mish",
       [](const Tensor& x) { return F::mish(x); },
       {0, 1e30f, -1e30f, -50},
       {0, 1e30f, -0.f, -9.6437497949e-21f},
       {0.6f, 1, 0, -9.4508745405e-21f}},
  };
  for (const Row& r : rows) {
    CAPTURE(r.name);
    CAPTURE(r.x);
    Tensor x = from_vector(r.x).requires_grad_();
    Tensor y = r.f(x);
    y.sum().backward();
    // rtol 1e-6: the printed digits, and float32 rounding of a few ops apart from PyTorch's
    SL_CHECK_CLOSE(y, from_vector(r.y), 1e-6, 0);
    SL_CHECK_CLOSE(x.grad(), from_vector(r.grad), 1e-6, 0);
  }
  // the sign of hardswish(-3) = -0 as PyTorch's -3 * 0 / 6
  CHECK(std::signbit(F::hardswish(tensor({-3.f})).to_vector<float>()[0]));
}

TEST_CASE("Linear and activations gradcheck in float64") {
  manual_seed(4);
  nn::Linear lin(3, 2);
  lin.to(DType::f64);
  Tensor x = randn({2, 3}, {.dtype = DType::f64}).requires_grad_();
  CHECK(sl::testing::module_gradcheck(lin, [&](const TensorList& in) { return lin.forward(in[0]); },
                                      {x}));
  nn::GELU g("tanh");
  nn::SiLU s;
  nn::Hardtanh h(-0.5, 0.5);
  CHECK(
      gradcheck([&](const TensorList& in) { return h.forward(s.forward(g.forward(in[0]))); }, {x}));
}

TEST_CASE("composed activations gradcheck in float64 away from their kinks") {
  namespace F = sl::nn::functional;
  manual_seed(5);
  // values of spread 3 on both sides of every kink; none lands within 1e-3 of one (checked), so
  // the finite differences (eps 1e-6) never straddle a kink
  Tensor x = (randn({4, 6}, {.dtype = DType::f64}) * 3.0);
  for (double k : {-3.0, 0.0, 3.0, 1.5}) CHECK((x - k).abs().min().item<double>() > 1e-3);
  x.requires_grad_();
  for (auto [name, f] : std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>>{
           {"softplus", [](const Tensor& t) { return F::softplus(t, 2.0, 3.0); }},
           {"elu", [](const Tensor& t) { return F::elu(t, 0.7); }},
           {"selu", [](const Tensor& t) { return F::selu(t); }},
           {"mish", [](const Tensor& t) { return F::mish(t); }},
           {"hardswish", [](const Tensor& t) { return F::hardswish(t); }},
           {"hardsigmoid", [](const Tensor& t) { return F::hardsigmoid(t); }}}) {
    CAPTURE(name);
    CHECK(gradcheck([&](const TensorList& in) { return f(in[0]); }, {x}));
  }
}

TEST_CASE("activation and shape module errors and reprs") {
  SL_CHECK_THROWS(nn::GELU("fast"), ValueError, "approximate must be 'none' or 'tanh', got 'fast'");
  SL_CHECK_THROWS(nn::Hardtanh(1.0, 0.0), ValueError, "min_val (1) must not exceed max_val (0)");
  SL_CHECK_THROWS(nn::ReLU().forward(Tensor()), ValueError, "ReLU: the input is undefined");
  // Reprs as torch 1.13 prints them.
  CHECK(nn::Hardtanh(0.0, 20.0).str() == "Hardtanh(min_val=0.0, max_val=20.0)");
  CHECK(nn::LeakyReLU(0.1).str() == "LeakyReLU(negative_slope=0.1)");
  CHECK(nn::Unflatten(1, {2, 3}).str() == "Unflatten(dim=1, unflattened_size=(2, 3))");
  CHECK(nn::Unflatten(1, {2, 3}).forward(zeros({4, 6})).sizes() == Shape{4, 2, 3});
  CHECK(nn::Flatten().forward(zeros({4, 2, 3})).sizes() == Shape{4, 6});
  CHECK(nn::Softplus().str() == "Softplus(beta=1, threshold=20)");
  CHECK(nn::Softplus(2, 10).str() == "Softplus(beta=2, threshold=10)");
  CHECK(nn::ELU(0.5).str() == "ELU(alpha=0.5)");
  CHECK(nn::ELU().str() == "ELU(alpha=1.0)");
  CHECK(nn::SELU().str() == "SELU()");
  CHECK(nn::Mish().str() == "Mish()");
  CHECK(nn::Hardswish().str() == "Hardswish()");
  CHECK(nn::Hardsigmoid().str() == "Hardsigmoid()");
  SL_CHECK_THROWS(nn::Softplus(0.0), ValueError,
                  "Softplus: beta must be finite and nonzero and threshold finite, got beta=0");
  SL_CHECK_THROWS(nn::functional::softplus(zeros({2}), 1.0, INFINITY), ValueError,
                  "softplus: beta must be finite and nonzero and threshold finite, got beta=1, "
                  "threshold=inf");
  SL_CHECK_THROWS(nn::Mish().forward(Tensor()), ValueError, "Mish: the input is undefined");
  SL_CHECK_THROWS(nn::functional::hardswish(ones({2}, {.dtype = DType::i64})), DTypeError,
                  "hardswish: the input must be floating point, got int64");
}

TEST_CASE("PReLU matches PyTorch: shared and per-channel slopes, inputs exactly 0") {
  Fixture fx("activation");
  // every third input of these cases is exactly 0, the kink
  const std::vector<std::pair<std::string, int>> cases = {
      {"prelu_shared", 1}, {"prelu_channels", 4},    {"prelu_channels_2d", 3},
      {"prelu_1d", 1},     {"prelu_channels_4d", 2}, {"prelu_at_zero", 3}};
  for (const auto& [name, params] : cases) {
    CAPTURE(name);
    nn::PReLU m(params);
    fx.load_params(m, name);
    Tensor x = fx.input(name, 0);
    fx.check_backward(name, {m.forward(x)}, {x}, &m, kRtol, kAtol);
  }
  nn::PReLU m(4);
  CHECK(m.str() == fx.meta("prelu_channels.repr"));
  CHECK(m.state_dict().keys() ==
        std::vector<std::string>{fx.meta("prelu_channels.state_dict_keys")});
  CHECK(nn::PReLU().str() == fx.meta("prelu_shared.repr"));
}

TEST_CASE("prelu at x == 0: the gradients are PyTorch's (input: weight, weight: 0)") {
  namespace F = sl::nn::functional;
  // PyTorch 1.13's gradients at an all-zero input [2, 3, 2] with 3 slopes, from the fixture; a
  // finite difference cannot decide at the kink, so these are the reference. Compared exactly:
  // each is one product weight * gout (or 0), the same float32 operation on both sides.
  Fixture fx("activation");
  Tensor w = fx.get("prelu_at_zero.param.weight").requires_grad_();
  Tensor x = fx.input("prelu_at_zero", 0);
  Tensor y = F::prelu(x, w);
  CHECK(y.abs().max().item<float>() == 0.0f);
  (y * fx.get("prelu_at_zero.gout.0")).sum().backward();
  SL_CHECK_CLOSE(x.grad(), fx.get("prelu_at_zero.gin.0"), 0, 0);
  SL_CHECK_CLOSE(w.grad(), fx.get("prelu_at_zero.gparam.weight"), 0, 0);
}

TEST_CASE("prelu gradcheck in float64, errors") {
  namespace F = sl::nn::functional;
  manual_seed(7);
  const TensorOptions f64{.dtype = DType::f64};
  // inputs kept 1e-3 away from the kink (checked) so the finite differences do not straddle it
  Tensor x = randn({2, 3, 4}, f64);
  x = where(x.abs().lt(1e-2), x + 0.5, x);
  CHECK(x.abs().min().item<double>() > 1e-3);
  x.requires_grad_();
  Tensor w3 = (rand({3}, f64) * 2 - 1).requires_grad_();
  Tensor w1 = full({1}, 0.25, f64).requires_grad_();
  CHECK(gradcheck([](const TensorList& in) { return F::prelu(in[0], in[1]); }, {x, w3}));
  CHECK(gradcheck([](const TensorList& in) { return F::prelu(in[0], in[1]); }, {x, w1}));
  Tensor x1 = x.detach().flatten().requires_grad_();  // rank 1: one channel
  CHECK(gradcheck([](const TensorList& in) { return F::prelu(in[0], in[1]); }, {x1, w1}));
  nn::PReLU m(3, 0.1, f64);
  CHECK(sl::testing::module_gradcheck(m, [&](const TensorList& in) { return m.forward(in[0]); },
                                      {x}));
  // PyTorch 1.13: "Mismatch of parameter numbers and input channel size. Found parameter
  // numbers = 3 and channel size = 1."
  SL_CHECK_THROWS(nn::PReLU(3).forward(zeros({3})), ShapeError,
                  "prelu: weight has 3 parameters but the input [3] has 1 channels (dim 1; 1 for "
                  "an input of rank < 2)");
  SL_CHECK_THROWS(nn::PReLU(2).forward(zeros({2, 3, 4})), ShapeError,
                  "prelu: weight has 2 parameters but the input [2, 3, 4] has 3 channels");
  SL_CHECK_THROWS(F::prelu(zeros({2, 3}), ones({3, 1})), ShapeError,
                  "prelu: weight must be a scalar or 1-d, got shape [3, 1]");
  SL_CHECK_THROWS(nn::PReLU(0), ValueError, "PReLU: num_parameters must be >= 1, got 0");
  SL_CHECK_THROWS(nn::PReLU().forward(Tensor()), ValueError, "PReLU: the input is undefined");
  CHECK(nn::PReLU(3, 0.1).str() == "PReLU(num_parameters=3)");
}
