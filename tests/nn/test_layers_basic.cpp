// Parity with PyTorch for Linear and the activation modules (fixtures: linear, activation),
// plus gradchecks in float64.
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
  };
  for (auto& [name, m] : cases) {
    CAPTURE(name);
    Tensor x = fx.input(name, 0);
    fx.check_backward(name, {m->forward(x)}, {x}, m.get(), kRtol, kAtol);
  }
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
}
