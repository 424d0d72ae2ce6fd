// NaN through the clamp-like activations and their gradients, as PyTorch 1.13 gives them: relu,
// relu_ and nn::ReLU keep a NaN input NaN and pass its gradient (threshold_backward stops it only
// where y <= 0); hardtanh (and ReLU6, hardtanh(0, 6)) passes the gradient at NaN (only x <= min or
// x >= max stop it); maximum/minimum give a NaN and, where a NaN meets anything, the whole
// gradient to both sides (neither operand loses). clamp stops the gradient at NaN (it passes only
// where min <= x <= max) and leaky_relu scales it by the slope (x > 0 is false): those already
// matched and are kept here so that the fixes above cannot change them. The expected values are
// PyTorch's, worked out from its backward formulas (and printed by torch 1.13 for these inputs).
#include "support/testing.h"

using namespace sl;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The input [NaN, -1, 2, 0] in dtype dt, a fresh leaf.
Tensor nan_input(DType dt) {
  return tensor({kNaN, -1.0, 2.0, 0.0}, {.dtype = dt}).requires_grad_();
}

Tensor expect(std::initializer_list<double> v, DType dt) {
  return tensor(v, {.dtype = dt});
}

/// y = f(x) and x's gradient for an upstream gradient of ones.
std::pair<Tensor, Tensor> run(const std::function<Tensor(const Tensor&)>& f, DType dt) {
  Tensor x = nan_input(dt);
  Tensor y = f(x);
  y.backward(ones_like(y));
  return {y.detach(), x.grad()};
}

}  // namespace

TEST_CASE("relu, relu_ and nn::ReLU keep NaN and pass its gradient, as PyTorch") {
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    const Tensor want_y = expect({kNaN, 0, 2, 0}, dt), want_g = expect({1, 0, 1, 0}, dt);
    nn::ReLU module;
    const std::pair<const char*, std::function<Tensor(const Tensor&)>> forms[] = {
        {"relu", [](const Tensor& x) { return relu(x); }},
        {"relu_", [](const Tensor& x) { return (x * 1).relu_(); }},
        {"nn::ReLU", [&module](const Tensor& x) { return module.forward(x); }},
    };
    for (const auto& [name, f] : forms) {
      CAPTURE(std::string(name));
      auto [y, g] = run(f, dt);
      SL_CHECK_CLOSE(y, want_y, 0, 0);
      SL_CHECK_CLOSE(g, want_g, 0, 0);
    }
    // the upstream gradient itself passes at NaN, not a 1
    Tensor x = nan_input(dt);
    relu(x).backward(expect({3, 4, 5, 6}, dt));
    SL_CHECK_CLOSE(x.grad(), expect({3, 0, 5, 0}, dt), 0, 0);
  }
}

TEST_CASE("relu keeps NaN on the vectorised paths too: long, strided and 16-bit inputs") {
  // 37 elements: the contiguous loops' vector body and tail; every third NaN, the others negative
  // (relu 0) or positive (kept).
  std::vector<double> v(37);
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 3 == 0 ? kNaN : (i % 3 == 1 ? -1.5 : 2.5);
  std::vector<double> want(v);
  for (double& w : want) w = w < 0 ? 0.0 : w;
  const Tensor x64 = from_vector(v, {37}, TensorOptions{.dtype = DType::f64});
  const Tensor w64 = from_vector(want, {37}, TensorOptions{.dtype = DType::f64});
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    CAPTURE(dt);
    SL_CHECK_CLOSE(relu(x64.to(dt)), w64.to(dt), 0, 0);
    Tensor in_place = x64.to(dt).clone();
    in_place.relu_();
    SL_CHECK_CLOSE(in_place, w64.to(dt), 0, 0);
    // strided: every other element of a [74] tensor
    Tensor wide = stack({x64, x64}, 1).reshape({74}).to(dt);
    SL_CHECK_CLOSE(relu(wide.slice(0, 0, 74, 2)), w64.to(dt), 0, 0);
  }
}

TEST_CASE("hardtanh and ReLU6 (hardtanh(0, 6)) pass the gradient at NaN, as PyTorch") {
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    auto [y, g] = run([](const Tensor& x) { return hardtanh(x); }, dt);
    SL_CHECK_CLOSE(y, expect({kNaN, -1, 1, 0}, dt), 0, 0);
    SL_CHECK_CLOSE(g, expect({1, 0, 0, 1}, dt), 0, 0);  // 0 at the bound -1, 1 inside
    nn::Hardtanh relu6(0.0, 6.0);
    auto [y6, g6] = run([&relu6](const Tensor& x) { return relu6.forward(x); }, dt);
    SL_CHECK_CLOSE(y6, expect({kNaN, 0, 2, 0}, dt), 0, 0);
    SL_CHECK_CLOSE(g6, expect({1, 0, 1, 0}, dt), 0, 0);  // 0 at the bound 0
  }
}

TEST_CASE("maximum and minimum give NaN and the whole gradient to both sides where a NaN meets") {
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    // a [NaN, -1, 2, 0, NaN] against b [0, 0, 0, 0, NaN]
    for (bool is_max : {true, false}) {
      CAPTURE(is_max);
      Tensor a = tensor({kNaN, -1.0, 2.0, 0.0, kNaN}, {.dtype = dt}).requires_grad_();
      Tensor b = tensor({0.0, 0.0, 0.0, 0.0, kNaN}, {.dtype = dt}).requires_grad_();
      Tensor y = is_max ? maximum(a, b) : minimum(a, b);
      y.backward(ones_like(y));
      SL_CHECK_CLOSE(
          y, is_max ? expect({kNaN, 0, 2, 0, kNaN}, dt) : expect({kNaN, -1, 0, 0, kNaN}, dt), 0, 0);
      // the loser gets 0, a tie 0.5 each, a NaN pair or a NaN against a number 1 each
      SL_CHECK_CLOSE(a.grad(),
                     is_max ? expect({1, 0, 1, 0.5, 1}, dt) : expect({1, 1, 0, 0.5, 1}, dt), 0, 0);
      SL_CHECK_CLOSE(b.grad(),
                     is_max ? expect({1, 1, 0, 0.5, 1}, dt) : expect({1, 0, 1, 0.5, 1}, dt), 0, 0);
    }
  }
}

TEST_CASE("clamp stops the gradient at NaN and leaky_relu scales it, as PyTorch") {
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    auto [y, g] = run([](const Tensor& x) { return clamp(x, -0.5, 0.5); }, dt);
    SL_CHECK_CLOSE(y, expect({kNaN, -0.5, 0.5, 0}, dt), 0, 0);
    SL_CHECK_CLOSE(g, expect({0, 0, 0, 1}, dt), 0, 0);
    auto [ym, gm] = run([](const Tensor& x) { return clamp(x, 0.0, std::nullopt); }, dt);
    SL_CHECK_CLOSE(ym, expect({kNaN, 0, 2, 0}, dt), 0, 0);
    SL_CHECK_CLOSE(gm, expect({0, 0, 1, 1}, dt), 0, 0);
    auto [yl, gl] = run([](const Tensor& x) { return leaky_relu(x, 0.25); }, dt);
    SL_CHECK_CLOSE(yl, expect({kNaN, -0.25, 2, 0}, dt), 0, 0);
    SL_CHECK_CLOSE(gl, expect({0.25, 0.25, 1, 0.25}, dt), 0, 0);
  }
}

// max() and min() over all elements share the gradient between the elements equal to the result
// and, when the result is NaN, between the NaNs (PyTorch's evenly_distribute_backward; amax's
// x == y rule matched nothing at a NaN result and gave NaN everywhere). Expected values printed
// by torch 1.13 (/usr/bin/python3) for y = x.max() (x.min()), (2 * y).backward(), float64:
//   [1, 3, 3, 2]      max 3 grad [0, 1, 1, 0]        min 1 grad [2, 0, 0, 0]
//   [1, nan, 3, nan]  max nan grad [0, 1, 0, 1]      min nan grad [0, 1, 0, 1]
//   [-0, 0, -1, 0]    max 0 grad [2/3, 2/3, 0, 2/3]  min -1 grad [0, 0, 2, 0]
TEST_CASE("max() and min() split the gradient between ties, and between NaNs at a NaN result") {
  struct Case {
    std::vector<double> x;
    bool is_max;
    double y;
    std::vector<double> grad;
  };
  const double third2 = 2.0 / 3.0;
  const Case cases[] = {
      {{1, 3, 3, 2}, true, 3, {0, 1, 1, 0}},
      {{1, 3, 3, 2}, false, 1, {2, 0, 0, 0}},
      {{1, kNaN, 3, kNaN}, true, kNaN, {0, 1, 0, 1}},
      {{1, kNaN, 3, kNaN}, false, kNaN, {0, 1, 0, 1}},
      {{-0.0, 0, -1, 0}, true, 0, {third2, third2, 0, third2}},
      {{-0.0, 0, -1, 0}, false, -1, {0, 0, 2, 0}},
  };
  for (DType dt : {DType::f32, DType::f64}) {
    for (const Case& c : cases) {
      CAPTURE(dt);
      CAPTURE(c.is_max);
      CAPTURE(c.x[1]);
      Tensor x = from_vector<double>(c.x).to(dt).requires_grad_();
      Tensor y = c.is_max ? max(x) : min(x);
      CHECK(std::string(y.grad_fn()->name()) == (c.is_max ? "MaxBackward" : "MinBackward"));
      (y * 2).backward();
      SL_CHECK_CLOSE(y.detach(), from_vector<double>({c.y}).view({}).to(dt), 0, 0);
      SL_CHECK_CLOSE(x.grad(), from_vector<double>(c.grad).to(dt), 0, 0);
    }
  }
}
