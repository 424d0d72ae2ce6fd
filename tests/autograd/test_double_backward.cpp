// Double backward (create_graph, Note [Double backward] in autograd/engine.cpp): second
// derivatives checked against closed forms worked out by hand and against gradgradcheck (central
// differences of the first-order gradient, float64), for every differentiable case of the op-case
// table; the ops that do not support it refuse a second backward with an AutogradError.
#include <cmath>
#include <functional>
#include <set>
#include <string>

#include "autograd/function.h"
#include "core/op_cases.h"
#include "support/testing.h"

using namespace sl;
using namespace sl::testing;

namespace {
Tensor f64(const std::vector<double>& v, const Shape& s) {
  return from_vector(v, s);
}
bool mentions(const std::string& what, const char* part) {
  return what.find(part) != std::string::npos;
}
}  // namespace

TEST_CASE("double backward: d2/dx2 of x^3 and exp(x), exactly") {
  Tensor x = f64({-1.5, 0.25, 2.0}, {3}).requires_grad_();
  // y = sum(x * x * x): dy/dx = 3 x^2 (the first backward's graph), d/dx sum(3 x^2) = 6 x
  Tensor y = (x * x * x).sum();
  variable_list g = grad({y}, {x}, {}, /*retain_graph=*/false, /*create_graph=*/true);
  REQUIRE(g[0].requires_grad());
  CHECK(allclose(g[0], f64({6.75, 0.1875, 12.0}, {3}), 0, 1e-15));
  variable_list h = grad({g[0].sum()}, {x});
  CHECK(allclose(h[0], f64({-9.0, 1.5, 12.0}, {3}), 0, 1e-15));

  // exp saves its output (SavedTensor::output): the second backward goes through ExpBackward again
  Tensor e = exp(x);
  variable_list ge = grad({e.sum()}, {x}, {}, false, true);
  variable_list he = grad({ge[0].sum()}, {x});
  CHECK(allclose(he[0], exp(x.detach()), 1e-15, 0));
}

TEST_CASE("double backward: a gradient summed from two paths keeps both in its graph") {
  Tensor x = f64({0.5, -2.0}, {2}).requires_grad_();
  Tensor w = f64({3.0, 0.75}, {2}).requires_grad_();
  // y = sum(x^2 w + sin(x)): dy/dx = 2 x w + cos(x) (two paths into x, summed by the engine)
  Tensor y = (x * x * w + sin(x)).sum();
  variable_list g = grad({y}, {x}, {}, false, true);
  // d/dw sum(dy/dx) = 2 x ; d/dx sum(dy/dx) = 2 w - sin(x)
  variable_list h = grad({g[0].sum()}, {x, w});
  CHECK(allclose(h[0], f64({6.0 - std::sin(0.5), 1.5 - std::sin(-2.0)}, {2}), 1e-15, 0));
  CHECK(allclose(h[1], f64({1.0, -4.0}, {2}), 0, 1e-15));
}

TEST_CASE("double backward: Hessian-vector product of a quadratic form through matmul") {
  // f(x) = 0.5 x^T A x + b^T x, so grad f = 0.5 (A + A^T) x + b and H v = 0.5 (A + A^T) v
  const std::vector<double> a = {2, -1, 0.5, 3, 4, 1, -2, 0.25, 5};
  Tensor A = f64(a, {3, 3}), b = f64({1, -1, 2}, {3});
  Tensor x = f64({0.3, -0.7, 1.1}, {3}).requires_grad_();
  Tensor v = f64({1.0, 2.0, -0.5}, {3});
  Tensor f = matmul(x, matmul(A, x)) * 0.5 + dot(b, x);
  variable_list g = grad({f}, {x}, {}, false, true);
  variable_list hv = grad({g[0]}, {x}, {v});
  std::vector<double> expect(3);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j)
      expect[i] += 0.5 * (a[3 * i + j] + a[3 * j + i]) * v.to_vector<double>()[j];
  }
  CHECK(allclose(hv[0], f64(expect, {3}), 1e-14, 1e-14));
}

TEST_CASE("double backward: backward(create_graph) leaves a .grad() with a graph") {
  Tensor x = f64({1.0, -0.5}, {2}).requires_grad_();
  (x * x * x).sum().backward(Tensor(), false, /*create_graph=*/true);
  Tensor gx = x.grad();
  REQUIRE(gx.requires_grad());
  CHECK(allclose(gx, f64({3.0, 0.75}, {2}), 0, 1e-15));
  variable_list h = grad({gx.sum()}, {x});
  CHECK(allclose(h[0], f64({6.0, -3.0}, {2}), 0, 1e-15));
  // A second create_graph backward adds out of place, as PyTorch: .grad() = 3x^2 + 3x^2.
  (x * x * x).sum().backward(Tensor(), false, true);
  CHECK(allclose(x.grad(), f64({6.0, 1.5}, {2}), 0, 1e-15));
  // .grad() -> its graph -> x's AccumulateGrad -> x is a reference cycle (PyTorch warns of the
  // same); resetting .grad() breaks it.
  x.set_grad(Tensor());
}

TEST_CASE("double backward: a gradient cast back to the input's dtype stays differentiable") {
  Tensor x = f64({0.5, 1.5}, {2}).requires_grad_();
  Tensor y = (x.to(DType::f32) * x.to(DType::f32)).sum();  // float32 products, f64 leaf
  variable_list g = grad({y}, {x}, {}, false, true);
  REQUIRE(g[0].dtype() == DType::f64);
  variable_list h = grad({g[0].sum()}, {x});
  CHECK(allclose(h[0], f64({2.0, 2.0}, {2}), 0, 0));  // 2, exactly in float32
}

TEST_CASE("double backward: prod at zeros keeps its second derivative") {
  // f = prod(x) at x = [0, 0, 2, 3]: the gradient (products of the others) is all 0, and
  // H_ij = prod of x_k over k != i, j, so H = [[0, 6, 0, 0], [6, 0, 0, 0], 0, 0] and H 1 = [6, 6,
  // 0, 0]. PyTorch 1.13's first-order shortcut for two or more zeros (zeros_like) would give 0.
  Tensor x = f64({0.0, 0.0, 2.0, 3.0}, {4}).requires_grad_();
  variable_list g = grad({x.prod()}, {x}, {}, false, true);
  CHECK(allclose(g[0], f64({0, 0, 0, 0}, {4}), 0, 0));
  variable_list h = grad({g[0].sum()}, {x});
  CHECK(allclose(h[0], f64({6, 6, 0, 0}, {4}), 0, 0));
  // one zero in a row, two in the other, along a dim
  Tensor y = f64({0.0, 2.0, 3.0, 1.5, 0.0, 0.0}, {2, 3}).requires_grad_();
  CHECK(gradgradcheck([](const TensorList& in) { return in[0].prod(1); }, {y}));
  CHECK(gradgradcheck([](const TensorList& in) { return in[0].prod(); }, {x}));
}

TEST_CASE("double backward: an op without it refuses the second backward, naming the op") {
  // ctc_loss's gradient is a kernel (forward-backward over alignments): no formula to record.
  // log_probs [T=3, N=1, C=3], target [1, 2]
  Tensor lp = log_softmax(f64({0.1, 0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8, -0.9}, {3, 1, 3}), 2)
                  .detach()
                  .requires_grad_();
  Tensor tgt = from_vector(std::vector<int64_t>{1, 2}, {1, 2});
  auto loss = [&] { return ctc_loss(lp, tgt, std::vector<int64_t>{3}, std::vector<int64_t>{2}); };
  // the first-order gradient itself is the usual one
  variable_list g = grad({loss()}, {lp}, {}, false, /*create_graph=*/true);
  variable_list plain = grad({loss()}, {lp});
  CHECK(equal(g[0].detach(), plain[0]));
  REQUIRE(g[0].requires_grad());
  try {
    grad({g[0].sum()}, {lp});
    FAIL("no AutogradError for a second backward through ctc_loss");
  } catch (const AutogradError& e) {
    CHECK(mentions(e.what(), "CtcLossBackward"));
    CHECK(mentions(e.what(), "double backward is not supported"));
  }
}

TEST_CASE("gradgradcheck: a create_graph gradient that differs from the plain one fails") {
  // An op whose formula branches on grad mode (a kernel in a plain backward, differentiable ops
  // under create_graph) and gets the second branch wrong: central differences of that branch
  // alone would agree with its own second backward, so gradgradcheck compares the branches.
  auto scaled = [](const Tensor& x, double graph_factor) {
    Tensor out = x.detach() * 3.0;
    record(
        "ScaledBackward", {x}, {&out},
        [graph_factor](const BackwardCtx& c) -> variable_list {
          return {GradMode::is_enabled() ? c.grad() * graph_factor : c.grad() * 3.0};
        },
        DoubleBackward::supported);
    return out;
  };
  Tensor x = f64({0.5, -1.25}, {2}).requires_grad_();
  CHECK(gradgradcheck([&](const TensorList& in) { return scaled(in[0], 3.0).square(); }, {x}));
  try {
    gradgradcheck([&](const TensorList& in) { return scaled(in[0], 2.0).square(); }, {x});
    FAIL("no AutogradError");
  } catch (const AutogradError& e) {
    CHECK(mentions(e.what(), "differs from the plain backward's"));
  }
}

TEST_CASE("double backward: gradient penalty of a two-layer perceptron (gradgradcheck)") {
  manual_seed(5);
  auto p = [](const Shape& s) { return randn(s, {.dtype = DType::f64}).requires_grad_(); };
  Tensor x = p({4, 3}), w1 = p({5, 3}), b1 = p({5}), w2 = p({1, 5}), b2 = p({1});
  auto mlp = [](const TensorList& in) {
    return linear(tanh(linear(in[0], in[1], in[2])), in[3], in[4]);
  };
  CHECK(gradgradcheck(mlp, {x, w1, b1, w2, b2}));
  // WGAN-GP's penalty, mean((|dD/dx| - 1)^2), trained on through the parameters: its gradient
  // w.r.t. them is a second derivative of D; gradchecked as a function of the parameters.
  auto penalty = [&mlp](const TensorList& in) {
    EnableGradGuard eg;
    Tensor xi = in[0].requires_grad() ? in[0] : in[0].detach().requires_grad_();
    Tensor d = mlp({xi, in[1], in[2], in[3], in[4]});
    variable_list g = grad({d.sum()}, {xi}, {}, true, true);
    Tensor norm = sqrt(g[0].square().sum({1}));
    return (norm - 1).square().mean();
  };
  CHECK(gradcheck(penalty, {x.detach(), w1, b1, w2, b2}));
}

TEST_CASE("double backward: every differentiable op case passes gradgradcheck or refuses it") {
  std::set<std::string> supported, refused;
  for (const OpCase& c : all_op_cases()) {
    if (!c.grad) continue;
    TensorList inputs = make_inputs(c, DType::f64, kCPU, /*requires_grad=*/true);
    if (!any_requires_grad(inputs)) continue;
    auto fn = joined_float_outputs(c);  // multi-output ops are checked whole
    try {
      const bool ok = gradgradcheck(fn, inputs);  // throws on a mismatch, so ok is true here
      CHECK_MESSAGE(ok, c.name);
      supported.insert(c.op);
    } catch (const AutogradError& e) {
      if (mentions(e.what(), "double backward is not supported")) {
        refused.insert(c.op);
      } else {
        FAIL_CHECK("gradgradcheck of '" << c.name << "' failed: " << std::string(e.what()));
      }
    } catch (const std::exception& e) {
      FAIL_CHECK("gradgradcheck of '" << c.name << "' failed: " << std::string(e.what()));
    }
  }
  // The ops whose backward is built from differentiable ops (DoubleBackward::supported): each
  // must pass in every one of its cases.
  const std::set<std::string> required = {
      "add",       "sub",         "mul",           "div",         "neg",         "abs",
      "exp",       "log",         "log1p",         "expm1",       "sqrt",        "rsqrt",
      "square",    "reciprocal",  "tanh",          "sigmoid",     "relu",        "gelu",
      "silu",      "sin",         "cos",           "erf",         "pow",         "maximum",
      "minimum",   "clamp",       "where",         "masked_fill", "sum",         "mean",
      "matmul",    "mm",          "bmm",           "linear",      "addmm",       "dot",
      "outer",     "reshape",     "view",          "permute",     "transpose",   "t",
      "expand",    "squeeze",     "unsqueeze",     "flatten",     "unflatten",   "movedim",
      "clone",     "contiguous",  "hardtanh",      "leaky_relu",  "gelu_tanh",   "to_dtype",
      "softmax",   "log_softmax", "cat",           "stack",       "narrow",      "select",
      "slice",     "split",       "chunk",         "pad",         "flip",        "tril",
      "triu",      "repeat",      "gather",        "scatter",     "scatter_add", "index_select",
      "index_add", "embedding",   "masked_select", "sort",        "topk",        "max",
      "min",       "max_dim",     "min_dim",       "amax",        "amin",        "prod",
      "var",       "std",         "norm",          "logsumexp",   "cumsum",      "linear_act"};
  // the convolutions (cases in tests/core/op_cases_conv.cpp; test_double_backward_conv.cpp)
  const std::set<std::string> required_conv = {"conv1d", "conv2d", "conv_transpose1d",
                                               "conv_transpose2d"};
  for (const auto* list : {&required, &required_conv}) {
    for (const std::string& op : *list) {
      CHECK_MESSAGE(supported.count(op) == 1, "no gradgradcheck passed for " << op);
      CHECK_MESSAGE(refused.count(op) == 0, op << " refused double backward in some case");
    }
  }
  std::string s, r;
  for (const auto& op : supported) s += " " + op;
  for (const auto& op : refused) r += " " + op;
  MESSAGE("double backward supported:" << s);
  MESSAGE("double backward refused:" << r);
}

TEST_CASE("double backward: composite losses (mse, bce with logits) through a linear layer") {
  namespace F = sl::nn::functional;
  manual_seed(11);
  auto p = [](const Shape& s) { return randn(s, {.dtype = DType::f64}).requires_grad_(); };
  Tensor x = randn({6, 4}, {.dtype = DType::f64}), w = p({3, 4}), b = p({3});
  Tensor target = randn({6, 3}, {.dtype = DType::f64});
  Tensor labels = rand({6, 3}, {.dtype = DType::f64});
  // second derivatives of the losses w.r.t. the layer's parameters (what a Hessian-vector
  // product of the training loss needs)
  CHECK(gradgradcheck(
      [&](const TensorList& in) { return F::mse_loss(linear(x, in[0], in[1]), target); }, {w, b}));
  CHECK(gradgradcheck(
      [&](const TensorList& in) {
        return F::binary_cross_entropy_with_logits(linear(x, in[0], in[1]), labels);
      },
      {w, b}));
}

TEST_CASE("double backward: cross_entropy and nll_loss (log_softmax, gather, masked_fill)") {
  namespace F = sl::nn::functional;
  manual_seed(12);
  auto p = [](const Shape& s) { return randn(s, {.dtype = DType::f64}).requires_grad_(); };
  Tensor x = randn({6, 4}, {.dtype = DType::f64}), w = p({3, 4}), b = p({3});
  Tensor cls = from_vector(std::vector<int64_t>{0, 2, 1, 1, 0, 2}, {6});
  Tensor ignoring = from_vector(std::vector<int64_t>{0, -100, 1, 2, -100, 2}, {6});
  Tensor class_weight = f64({0.5, 2.0, 1.25}, {3});
  // Hessian-vector products of the training loss w.r.t. a layer's parameters, in each of the
  // loss's forms: plain, class weights (a weighted mean), ignored rows, label smoothing,
  // class-probability targets, nll_loss on log-probabilities, reduction none
  std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> forms = {
      {"plain", [&](const Tensor& z) { return F::cross_entropy(z, cls); }},
      {"weighted",
       [&](const Tensor& z) { return F::cross_entropy(z, cls, {.weight = class_weight}); }},
      {"ignore_index", [&](const Tensor& z) { return F::cross_entropy(z, ignoring); }},
      {"label_smoothing",
       [&](const Tensor& z) {
         return F::cross_entropy(z, ignoring, {.weight = class_weight, .label_smoothing = 0.2});
       }},
      {"probabilities",
       [&](const Tensor& z) { return F::cross_entropy(z, softmax(x.narrow(1, 0, 3), 1)); }},
      {"nll_loss", [&](const Tensor& z) { return F::nll_loss(log_softmax(z, 1), cls); }},
      {"none",
       [&](const Tensor& z) {
         return F::cross_entropy(z, cls, {.reduction = nn::Reduction::none}) *
                f64({1, -2, 3, 0.5, 1, -1}, {6});
       }},
  };
  for (const auto& [name, loss] : forms) {
    CAPTURE(name);
    CHECK(
        gradgradcheck([&](const TensorList& in) { return loss(linear(x, in[0], in[1])); }, {w, b}));
  }
}
