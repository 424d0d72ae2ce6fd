// gradcheck (finite differences in float64) for every differentiable case of the op-case table
// (tests/core/op_cases*.cpp), plus a check that every differentiable op got one.
#include <functional>
#include <set>

#include "core/op_cases.h"
#include "support/testing.h"

using namespace sl;
using namespace sl::testing;

TEST_CASE("gradcheck: every differentiable op case of the table") {
  std::set<std::string> checked;
  for (const OpCase& c : all_op_cases()) {
    if (!c.grad) continue;
    TensorList inputs = make_inputs(c, DType::f64, kCPU, /*requires_grad=*/true);
    if (!any_requires_grad(inputs)) continue;
    auto fn = joined_float_outputs(c);  // multi-output ops are checked whole
    try {
      CHECK_MESSAGE(gradcheck(fn, inputs), c.name);
      checked.insert(c.op);
    } catch (const std::exception& e) {
      FAIL_CHECK("gradcheck of '" << c.name << "' failed: " << e.what());
    }
  }
  for (const std::string& op : required_grad_ops()) {
    CHECK_MESSAGE(checked.count(op) == 1, "no gradcheck for differentiable op " << op);
  }
}

TEST_CASE("gradcheck: in-place ops (on a non-leaf copy of the input)") {
  manual_seed(17);
  auto f64 = [](const Shape& s) { return randn(s, {.dtype = DType::f64}).requires_grad_(); };
  Tensor x = f64({3, 4}), w = f64({4}),
         pos = (rand({3, 4}, {.dtype = DType::f64}) + 0.5).requires_grad_();
  Tensor mask = rand({3, 1}).gt(0.5);
  struct Case {
    const char* name;
    std::function<Tensor(const TensorList&)> fn;
    TensorList inputs;
  };
  const Case cases[] = {
      {"add_ tensor alpha",
       [](const TensorList& in) {
         Tensor y = in[0] * 1;
         y.add_(in[1], 0.5);
         return y;
       },
       {x, w}},
      {"sub_ tensor",
       [](const TensorList& in) {
         Tensor y = in[0] * 1;
         y.sub_(in[1]);
         return y;
       },
       {x, w}},
      {"mul_ tensor",
       [](const TensorList& in) {
         Tensor y = in[0] * 1;
         y.mul_(in[1]);
         return y;
       },
       {x, w}},
      {"div_ tensor",
       [](const TensorList& in) {
         Tensor y = in[0] * 1;
         y.div_(in[1]);
         return y;
       },
       {x, pos}},
      {"mul_ scalar",
       [](const TensorList& in) {
         Tensor y = in[0] * 1;
         y.mul_(-1.5);
         return y;
       },
       {x}},
      {"div_ scalar",
       [](const TensorList& in) {
         Tensor y = in[0] * 1;
         y.div_(4);
         return y;
       },
       {x}},
      {"add_ scalar then mul_",
       [](const TensorList& in) {
         Tensor y = in[0] * 1;
         y.add_(2);
         y.mul_(in[0]);
         return y;
       },
       {x}},
      {"clamp_",
       [](const TensorList& in) {
         Tensor y = in[0] * 1;
         y.clamp_(-0.5, 0.7);
         return y;
       },
       {x}},
      {"relu_",
       [](const TensorList& in) {
         Tensor y = in[0] * 1;
         y.relu_();
         return y;
       },
       {x}},
      {"masked_fill_",
       [mask](const TensorList& in) {
         Tensor y = in[0] * 1;
         y.masked_fill_(mask, 3);
         return y;
       },
       {x}},
      {"operators += -= *= /=",
       [](const TensorList& in) {
         Tensor y = in[0] * 1;
         y += in[1];
         y *= in[1];
         y -= 1.0;
         y /= in[2];
         return y;
       },
       {x, w, pos}},
  };
  for (const Case& c : cases) {
    try {
      CHECK_MESSAGE(gradcheck(c.fn, c.inputs), c.name);
    } catch (const std::exception& e) {
      FAIL_CHECK(c.name << ": " << e.what());
    }
  }
}

TEST_CASE("gradcheck: cross-device copy returns the gradient to the source device") {
  Tensor x = randn({2, 3}, {.dtype = DType::f64}).requires_grad_();
  CHECK(gradcheck([](const TensorList& in) { return (in[0].to(Device("cpu:1")) * 2).to(kCPU); },
                  {x}));
  Tensor y = x.to(Device("cpu:1"));
  y.sum().backward();
  CHECK(x.grad().device() == kCPU);
}
