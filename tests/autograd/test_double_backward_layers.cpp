// Double backward (create_graph) through the normalisation layers: layer_norm, batch_norm
// (training and eval), group_norm and instance_norm, whose plain backward is a fused kernel and
// whose create_graph backward is recorded from differentiable ops (norm_backward_graph in
// autograd/ops/norm.cpp). References: gradgradcheck (central differences of the first-order
// gradient in float64, gradcheck's default tolerances), and the first-order gradient under
// create_graph against the fused kernel's.
#include <functional>

#include "autograd/ops/norm.h"
#include "support/testing.h"

using namespace sl;
using namespace sl::testing;

namespace {
Tensor param(const Shape& s) {
  return randn(s, {.dtype = DType::f64}).requires_grad_();
}
}  // namespace

TEST_CASE("double backward: layer_norm, with and without its affine part") {
  manual_seed(21);
  Tensor x = param({2, 3, 4}), w = param({3, 4}), b = param({3, 4}), w1 = param({4});
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return layer_norm(in[0], {3, 4}, in[1], in[2], 1e-5);
      },
      {x, w, b}));
  CHECK(gradgradcheck([](const TensorList& in) { return layer_norm(in[0], {4}, in[1]); }, {x, w1}));
  CHECK(gradgradcheck([](const TensorList& in) { return layer_norm(in[0], {2, 3, 4}); }, {x}));
}

TEST_CASE("double backward: batch_norm in training (batch statistics) and in eval") {
  manual_seed(22);
  Tensor x = param({3, 2, 2, 2}), w = param({2}), b = param({2}), x2 = param({5, 3});
  Tensor w3 = param({3}), b3 = param({3});
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5);
      },
      {x, w, b}));
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5);
      },
      {x2, w3, b3}));
  // eval: the running statistics are constants; the training forward also updates them, so each
  // gradgradcheck evaluation uses fresh copies in training mode
  Tensor rm = from_vector(std::vector<double>{0.25, -0.5}, {2});
  Tensor rv = from_vector(std::vector<double>{1.5, 0.75}, {2});
  CHECK(gradgradcheck(
      [&](const TensorList& in) {
        return batch_norm(in[0], rm, rv, in[1], in[2], false, 0.1, 1e-5);
      },
      {x, w, b}));
  CHECK(gradgradcheck(
      [&](const TensorList& in) {
        return batch_norm(in[0], rm.clone(), rv.clone(), in[1], in[2], true, 0.1, 1e-5);
      },
      {x, w, b}));
}

TEST_CASE("double backward: group_norm and instance_norm (layer_norm over a view)") {
  manual_seed(23);
  Tensor x = param({2, 4, 3}), w = param({4}), b = param({4});
  CHECK(gradgradcheck([](const TensorList& in) { return group_norm(in[0], 2, in[1], in[2]); },
                      {x, w, b}));
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return instance_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5);
      },
      {x, w, b}));
}

TEST_CASE("double backward: the first-order gradient under create_graph is the kernel's") {
  manual_seed(24);
  Tensor x = param({4, 3, 5}), w = param({3}), b = param({3}),
         g = randn({4, 3, 5}, {.dtype = DType::f64});
  auto check_same = [&](const std::function<Tensor()>& f, const Tensor& gy) {
    variable_list plain = grad({f()}, {x, w, b}, {gy});
    variable_list graph = grad({f()}, {x, w, b}, {gy}, false, /*create_graph=*/true);
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      // grad bias = sum(g) depends on nothing that requires grad
      CHECK(graph[i].requires_grad() == (i < 2));
      // the same formula evaluated in another order: float64 roundoff only
      CHECK(allclose(graph[i].detach(), plain[i], 1e-12, 1e-12));
    }
  };
  check_same([&] { return batch_norm(x, Tensor(), Tensor(), w, b, true, 0.1, 1e-5); }, g);
  // a non-contiguous input normalised over its last dim
  check_same([&] { return layer_norm(x.transpose(1, 2), {3}, w, b); }, g.transpose(1, 2));
}

TEST_CASE("double backward: a gradient penalty through layer_norm and batch_norm") {
  manual_seed(25);
  Tensor w = param({6, 4}), lw = param({6}), lb = param({6}), bw = param({6}), bb = param({6});
  Tensor x = randn({5, 4}, {.dtype = DType::f64});
  // R1-style |dD/dx|^2 with D = sum(tanh(batch_norm(layer_norm(x W^T)))), gradchecked as a
  // function of the parameters: its gradient is a second derivative of D
  auto penalty = [&x](const TensorList& in) {
    EnableGradGuard eg;
    Tensor xi = x.detach().requires_grad_();
    Tensor h = layer_norm(linear(xi, in[0]), {6}, in[1], in[2]);
    Tensor d = tanh(batch_norm(h, Tensor(), Tensor(), in[3], in[4], true, 0.1, 1e-5)).sum();
    variable_list gx = grad({d}, {xi}, {}, true, true);
    return gx[0].square().sum();
  };
  CHECK(gradcheck(penalty, {w, lw, lb, bw, bb}));
}
