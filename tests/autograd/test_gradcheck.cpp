// gradcheck (finite differences in float64) for every differentiable case of the op-case table
// (tests/core/op_cases*.cpp), plus a check that every differentiable op got one.
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
    bool any = false;
    for (const Tensor& t : inputs) any = any || t.requires_grad();
    if (!any) continue;
    // All floating outputs, flattened and joined, so multi-output ops are checked whole.
    auto fn = [&c](const TensorList& x) {
      TensorList flat;
      for (const Tensor& o : c.run(x)) {
        if (o.is_floating_point()) flat.push_back(o.reshape({-1}));
      }
      return flat.size() == 1 ? flat[0] : cat(flat, 0);
    };
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
