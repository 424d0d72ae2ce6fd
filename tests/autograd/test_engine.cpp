// The backward engine: accumulation, retain_graph, explicit gradients, sl::grad, graph shapes,
// and the errors of misuse.
#include "support/testing.h"

using namespace sl;

TEST_CASE("backward through mul/add/sum") {
  Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
  Tensor y = (x * x + x).sum();
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 5, 7});
}

TEST_CASE("gradcheck matmul") {
  manual_seed(0);
  Tensor a = randn({3, 4}, {.dtype = DType::f64}).requires_grad_();
  Tensor b = randn({4, 2}, {.dtype = DType::f64}).requires_grad_();
  CHECK(gradcheck([](const TensorList& in) { return matmul(in[0], in[1]).tanh(); }, {a, b}));
}

TEST_CASE("gradients accumulate across backward calls; retain_graph allows a second pass") {
  Tensor x = tensor({1.0, -2.0}).requires_grad_();
  Tensor y = (x * x).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, -4});
  y.backward();  // graph kept by the first call; this one frees it
  CHECK(x.grad().to_vector<double>() == std::vector<double>{4, -8});
  SL_CHECK_THROWS(y.backward(), AutogradError,
                  "SumBackward: trying to backward through the graph a second time");
}

TEST_CASE("a second backward without retain_graph is a clear error") {
  Tensor x = tensor({0.5}).requires_grad_();
  Tensor y = x.exp().sum();
  y.backward();
  SL_CHECK_THROWS(y.backward(), AutogradError, "call backward with retain_graph=true");
}

TEST_CASE("backward with an explicit gradient, and its errors") {
  Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
  Tensor y = x * 2;
  SL_CHECK_THROWS(y.backward(), AutogradError,
                  "backward: grad can be implicitly created only for tensors with one element, got "
                  "shape [3]");
  SL_CHECK_THROWS(y.backward(ones({2}, {.dtype = DType::f64})), ShapeError,
                  "backward: gradient of shape [2] does not match the tensor's shape [3]");
  y.backward(tensor({1.0, 0.0, -1.0}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 0, -2});
  SL_CHECK_THROWS(
      ones({1}).backward(), AutogradError,
      "backward: element 0 of tensors does not require grad and does not have a grad_fn");
}

TEST_CASE("diamond graph: a tensor used twice gets the sum of both paths") {
  Tensor x = tensor({3.0}).requires_grad_();
  Tensor y = x * 2;
  Tensor z = y + y * y;  // z = 2x + 4x^2, dz/dx = 2 + 8x
  z.backward();
  CHECK(x.grad().item<double>() == 2 + 8 * 3.0);
}

TEST_CASE("sl::grad returns gradients without touching .grad") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor w = tensor({3.0}).requires_grad_();
  Tensor unused = tensor({1.0}).requires_grad_();
  Tensor h = x * w;  // non-leaf input of grad()
  Tensor y = (h * h).sum();
  variable_list g = grad({y}, {x, h, unused});
  REQUIRE(g.size() == 3);
  // dy/dx = 2 h w = 2 x w^2, dy/dh = 2 h
  CHECK(g[0].to_vector<double>() == std::vector<double>{18, 36});
  CHECK(g[1].to_vector<double>() == std::vector<double>{6, 12});
  CHECK(!g[2].defined());
  CHECK(!x.grad().defined());
  CHECK(!w.grad().defined());
  SL_CHECK_THROWS(grad({y}, {ones({1})}), AutogradError, "grad: input 0 does not require grad");
}

TEST_CASE("gradients arrive in the leaf's dtype (ToCopyBackward)") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = x.to(DType::f32) * 3;
  y.sum().backward();
  CHECK(x.grad().dtype() == DType::f64);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 3});
}

TEST_CASE("requires_grad rules") {
  SL_CHECK_THROWS(arange(3).requires_grad_(), AutogradError,
                  "requires_grad_: only floating point tensors can require gradients, got int64");
  Tensor x = ones({2}).requires_grad_();
  Tensor y = x * 2;
  CHECK(y.requires_grad());
  CHECK(!y.is_leaf());
  SL_CHECK_THROWS(y.requires_grad_(false), AutogradError,
                  "requires_grad_: can only change the flag of leaf tensors");
  CHECK(!x.gt(0).requires_grad());  // comparisons are not differentiable
  CHECK(!argmax(x).requires_grad());
}

TEST_CASE("set_grad refuses a gradient of another shape, dtype or device, as PyTorch") {
  // PyTorch: "assigned grad has data of a different size / type / located on a different device"
  Tensor x = zeros({2}).requires_grad_();
  SL_CHECK_THROWS(x.set_grad(zeros({3})), ShapeError,
                  "set_grad: gradient of shape [3] for a tensor of shape [2]");
  SL_CHECK_THROWS(x.set_grad(zeros({2}, {.dtype = DType::f64})), DTypeError,
                  "set_grad: gradient of dtype float64 for a tensor of dtype float32");
  SL_CHECK_THROWS(x.set_grad(zeros({2}, {.dtype = DType::i64})), DTypeError,
                  "set_grad: gradient of dtype int64 for a tensor of dtype float32");
  SL_CHECK_THROWS(x.set_grad(zeros({2}, {.device = Device("cpu:1")})), DeviceError,
                  "set_grad: gradient on cpu:1 for a tensor on cpu");
  CHECK(!x.grad().defined());  // nothing was stored
  x.set_grad(full({2}, 4.0f));
  CHECK(x.grad().to_vector<float>() == std::vector<float>{4, 4});
  x.set_grad(Tensor());  // clearing is always allowed
  CHECK(!x.grad().defined());
}
