// Gradient hooks: on leaves (before accumulation), on non-leaves (gradients in flight),
// post-accumulate hooks (where DDP and ZeRO attach), retain_grad.
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
