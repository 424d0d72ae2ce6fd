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

/// Checks second derivatives as PyTorch's gradgradcheck: the function g(inputs, v) = the
/// gradient of <fn(inputs), v> w.r.t. the inputs that require grad, computed by backward with
/// create_graph, is gradchecked w.r.t. those inputs and v (a fixed, non-trivial float64 tensor of
/// fn's output shape). So the Jacobian that a second backward computes through the recorded
/// first-order backward is compared with central differences of the first-order gradient. First,
/// that gradient is compared with the one a plain backward computes (to 1e-9, relative to 1 +
/// |plain|): an op may compute them differently (a kernel, or differentiable ops under
/// create_graph). Throws AutogradError (or returns false) as gradcheck, also when an op in fn does
/// not support double backward.
bool gradgradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                   const GradcheckOptions& opts = {});

}  // namespace sl
