// Finite-difference gradient checking in float64, available to every test.
#pragma once

#include <functional>
#include <string>

#include "core/tensor.h"

namespace sl {

struct GradcheckOptions {
  double eps = 1e-6;   ///< central-difference step
  double atol = 1e-5;  ///< |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-3;
  /// Throw AutogradError describing the first mismatch (true) or just return false.
  bool raise = true;
};

/// Compares the Jacobian that backward computes for fn at `inputs` with central differences.
/// Inputs must be CPU float64; only those with requires_grad are checked. fn returns one tensor
/// (its elements are all checked). Returns true when every entry agrees.
bool gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
               const GradcheckOptions& opts = {});

}  // namespace sl
