// Gradient hooks: on leaves (before accumulation), on non-leaves (gradients in flight),
// post-accumulate hooks (where DDP and ZeRO attach), retain_grad.
#include <functional>
#include <string>
#include <vector>

#include "support/testing.h"

using namespace sl;

TEST_CASE("a leaf hook sees and may replace the gradient before it is accumulated") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  std::vector<double> seen;
  size_t id = x.register_hook([&](const Tensor& g) {
    seen = g.to_vector<double>();
    return g * 10;
  });
  (x * 3).sum().backward();
  CHECK(seen == std::vector<double>{3, 3});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{30, 30});
  x.remove_hook(id);
  (x * 3).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{33, 33});
}

TEST_CASE("a leaf hook returning an undefined tensor consumes the gradient") {
  Tensor x = tensor({1.0}).requires_grad_();
  int calls = 0;
  x.register_hook([&](const Tensor&) {
    ++calls;
    return Tensor();
  });
  (x * 2).sum().backward();
  CHECK(calls == 1);
  CHECK(!x.grad().defined());
}

TEST_CASE("hooks on a non-leaf observe and modify the gradient in flight") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor h = x * x;
  std::vector<double> seen;
  h.register_hook([&](const Tensor& g) {
    seen = g.to_vector<double>();
    return g * 2;  // doubles what flows to x
  });
  (h * 5).sum().backward();
  CHECK(seen == std::vector<double>{5, 5});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{20, 40});  // 2 * 5 * 2x
  SL_CHECK_THROWS(ones({1}).register_hook([](const Tensor& g) { return g; }), AutogradError,
                  "register_hook: cannot register a hook on a tensor that does not require grad");
}

TEST_CASE("retain_grad keeps a non-leaf's gradient") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor h = x * 3;
  h.retain_grad();
  CHECK(h.retains_grad());
  (h * h).sum().backward();
  CHECK(h.grad().to_vector<double>() == std::vector<double>{6, 12});
}

TEST_CASE(
    "post-accumulate hooks run after accumulation, once per backward, latest-used leaf first") {
  Tensor w1 = tensor({1.0}).requires_grad_();
  Tensor w2 = tensor({2.0}).requires_grad_();
  std::vector<std::string> order;
  std::vector<double> w1_grad_seen;
  w1.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    order.push_back("w1");
    w1_grad_seen.push_back(leaf.grad().item<double>());
  });
  w2.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("w2"); });
  Tensor h = w1 * 3;               // w1 used first
  Tensor y = (h * w2 + w1).sum();  // w1 used again, w2 used last
  y.backward();
  // w1 receives two contributions (3 * w2 + 1 = 7) but its hook fires once, after the sum
  CHECK(w1_grad_seen == std::vector<double>{7});
  REQUIRE(order.size() == 2);
  CHECK(order[0] == "w2");  // used later in forward -> ready earlier in backward
  CHECK(order[1] == "w1");
  SL_CHECK_THROWS(h.register_post_accumulate_grad_hook([](const Tensor&) {}), AutogradError,
                  "register_post_accumulate_grad_hook: only leaf tensors that require grad");
}

TEST_CASE("post-accumulate hooks fire on every backward of a retained graph, after each sum") {
  Tensor w = tensor({2.0, -1.0}).requires_grad_();
  std::vector<std::vector<double>> seen;
  w.register_post_accumulate_grad_hook(
      [&](const Tensor& leaf) { seen.push_back(leaf.grad().to_vector<double>()); });
  Tensor y = (w * w).sum();  // dy/dw = 2w = {4, -2}
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::vector<double>{4, -2});
  CHECK(seen[1] == std::vector<double>{8, -4});  // the second call sees the accumulated .grad
}

TEST_CASE("a leaf hook runs once with the summed gradient of a leaf used several times") {
  Tensor x = tensor({1.0, 3.0}).requires_grad_();
  int calls = 0;
  std::vector<double> seen;
  x.register_hook([&](const Tensor& g) {
    ++calls;
    seen = g.to_vector<double>();
    return g;
  });
  (x * 2 + x * x + x).sum().backward();  // 2 + 2x + 1
  CHECK(calls == 1);
  CHECK(seen == std::vector<double>{5, 9});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{5, 9});
}

TEST_CASE("several hooks on one tensor run in registration order, each on the previous result") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor h = x * 1;
  std::vector<std::vector<double>> seen;
  h.register_hook([&](const Tensor& g) {
    seen.push_back(g.to_vector<double>());
    return g + 1;
  });
  size_t second = h.register_hook([&](const Tensor& g) {
    seen.push_back(g.to_vector<double>());
    return g * 3;
  });
  Tensor y = (h * h).sum();  // dy/dh = 2h = {2, 4}
  y.backward(Tensor(), /*retain_graph=*/true);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::vector<double>{2, 4});
  CHECK(seen[1] == std::vector<double>{3, 5});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{9, 15});  // (2h + 1) * 3
  // a removed hook no longer runs; the other one still does
  h.remove_hook(second);
  seen.clear();
  Tensor(x.grad()).zero_();  // a handle to the same .grad storage
  y.backward();
  REQUIRE(seen.size() == 1);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 5});
  SL_CHECK_THROWS(x.remove_hook(7), IndexError, "remove_hook: no hook with id 7");
}

TEST_CASE("a hook on an intermediate used twice runs once, on the sum of both paths") {
  Tensor x = tensor({2.0}).requires_grad_();
  Tensor h = x * 3;
  std::vector<double> seen;
  h.register_hook([&](const Tensor& g) {
    seen.push_back(g.item<double>());
    return g;
  });
  (h * 2 + h * h).sum().backward();  // 2 + 2h = 14 at h = 6
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == 14);
  CHECK(x.grad().item<double>() == 42);
}

TEST_CASE("hooks on two outputs of one op stay apart; remove_hook checks the id") {
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0}).requires_grad_();
  auto parts = split(x * 1, 2);
  int calls_a = 0, calls_b = 0;
  size_t ia = parts[0].register_hook([&](const Tensor& g) {
    ++calls_a;
    return g * 10;
  });
  size_t ib = parts[1].register_hook([&](const Tensor& g) {
    ++calls_b;
    return g;
  });
  CHECK(ia != ib);
  std::string want = "remove_hook: no hook with id " + std::to_string(ib) + " on this tensor";
  SL_CHECK_THROWS(parts[0].remove_hook(ib), IndexError, want.c_str());
  (parts[0].sum() + parts[1].sum()).backward();
  CHECK(calls_a == 1);
  CHECK(calls_b == 1);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{10, 10, 1, 1});
}

namespace {
enum class Changed { size, dtype, device };

/// CHECKs that backward() throws the error type of `what` with `msg` in its message.
void check_refused(Changed what, const std::function<void()>& backward, const std::string& m) {
  const char* msg = m.c_str();
  switch (what) {
    case Changed::size:
      SL_CHECK_THROWS(backward(), ShapeError, msg);
      break;
    case Changed::dtype:
      SL_CHECK_THROWS(backward(), DTypeError, msg);
      break;
    case Changed::device:
      SL_CHECK_THROWS(backward(), DeviceError, msg);
      break;
  }
}
}  // namespace

TEST_CASE("a hook may not change the gradient's size, dtype or device, on a leaf or a non-leaf") {
  // PyTorch: "hook 'h' has changed the size of value" (and the type, for dtype and device)
  struct Change {
    Changed what;
    GradHook hook;
    const char* message;
  };
  const Change changes[] = {
      {Changed::size, [](const Tensor&) { return ones({3}); },
       "has changed the size of the gradient: was [2], got [3]"},
      {Changed::size, [](const Tensor&) { return ones({1}); },  // broadcastable, still refused
       "has changed the size of the gradient: was [2], got [1]"},
      {Changed::dtype, [](const Tensor& g) { return g.to(DType::f64); },
       "has changed the dtype of the gradient: was float32, got float64"},
      {Changed::device, [](const Tensor& g) { return g.to(Device("cpu:1")); },
       "has changed the device of the gradient: was cpu, got cpu:1"},
  };
  for (const Change& c : changes) {
    CAPTURE(std::string(c.message));
    Tensor leaf = zeros({2}).requires_grad_();
    leaf.register_hook(c.hook);
    check_refused(
        c.what, [&] { (leaf * 2).sum().backward(); },
        std::string("register_hook: a hook on a leaf tensor ") + c.message);
    CHECK(!leaf.grad().defined());  // nothing accumulated
    Tensor x = zeros({2}).requires_grad_();
    Tensor h = x * 2;
    h.register_hook(c.hook);
    check_refused(
        c.what, [&] { h.sum().backward(); },
        std::string("register_hook: a hook on a non-leaf tensor ") + c.message);
    CHECK(!x.grad().defined());
  }
  // a hook that keeps all three still replaces the gradient
  Tensor x = zeros({2}).requires_grad_();
  x.register_hook([](const Tensor& g) { return g * 3; });
  (x * 2).sum().backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{6, 6});
}
