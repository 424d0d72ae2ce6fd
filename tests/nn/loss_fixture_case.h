// One fixture case of a loss or distance function: its output and input gradients against
// PyTorch's, at the nn parity tolerances of the case's dtype. Shared by tests/nn/test_loss_*.cpp
// and test_distance.cpp.
#pragma once

#include <functional>
#include <string>

#include "fixture.h"

namespace sl::testing {

/// float32: rtol 1e-5, atol 1e-6, the nn parity default (sums of at most ~30 O(1) terms).
/// float64: rtol 1e-12, atol 1e-14: the same formulas in other orders, a few double ulps.
constexpr double kLossRtol32 = 1e-5, kLossAtol32 = 1e-6, kLossRtol64 = 1e-12, kLossAtol64 = 1e-14;

/// Reads n inputs of case `name` (floating ones require grad), runs fn on them, and checks the
/// output and every input gradient PyTorch stored, at the tolerances above for input 0's dtype.
inline void check_loss_case(const Fixture& fx, const std::string& name, int n,
                            const std::function<Tensor(const TensorList&)>& fn) {
  CAPTURE(name);
  TensorList ins;
  for (int i = 0; i < n; ++i) ins.push_back(fx.input(name, i));
  const bool f64 = ins[0].dtype() == DType::f64;
  fx.check_backward(name, {fn(ins)}, ins, nullptr, f64 ? kLossRtol64 : kLossRtol32,
                    f64 ? kLossAtol64 : kLossAtol32);
}

}  // namespace sl::testing
