// Negative log-likelihood losses of distributions: torch.nn.functional's poisson_nll_loss and
// gaussian_nll_loss, and their modules PoissonNLLLoss and GaussianNLLLoss. Compositions of
// differentiable ops (every device, with gradients); inputs in float32 under autocast.
#pragma once

#include "nn/loss.h"

namespace sl::nn {
namespace functional {

/// Poisson negative log-likelihood: exp(input) - target * input with log_input, else
/// input - target * log(input + eps); with full, Stirling's term
/// target log(target) - target + log(2 pi target) / 2 is added where target > 1. input and
/// target of equal shapes (ShapeError; PyTorch broadcasts), floating (DTypeError). The target's
/// gradient of Stirling's term is 0 where target <= 1 (PyTorch's is NaN at target = 0).
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input = true,
                        bool full = false, double eps = 1e-8,
                        Reduction reduction = Reduction::mean);

/// Gaussian negative log-likelihood of target under N(input, var):
/// (log(max(var, eps)) + (input - target)^2 / max(var, eps)) / 2, plus log(2 pi) / 2 with full.
/// As PyTorch 1.13 the clamp of var is invisible to autograd: var's gradient is taken at the
/// clamped value and passes through the clamp. var has input's shape, or input's shape without
/// its last dim, or with a last dim of 1 (one variance per vector); target broadcasts to
/// input's shape. Throws ValueError "var is of incorrect size" (with the shapes) otherwise, and
/// ValueError when an entry of var is negative (read back to the host: one synchronisation on
/// CUDA), DTypeError, DeviceError.
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         bool full = false, double eps = 1e-6,
                         Reduction reduction = Reduction::mean);

}  // namespace functional

/// forward(input, target) = functional::poisson_nll_loss with the options given here.
class PoissonNLLLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit PoissonNLLLoss(bool log_input = true, bool full = false, double eps = 1e-8,
                          Reduction reduction = Reduction::mean);
  Tensor forward(const Tensor& input, const Tensor& target);
  bool log_input, full;
  double eps;
  Reduction reduction;
};

/// forward(input, target, var) = functional::gaussian_nll_loss with the options given here.
class GaussianNLLLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit GaussianNLLLoss(bool full = false, double eps = 1e-6,
                           Reduction reduction = Reduction::mean);
  Tensor forward(const Tensor& input, const Tensor& target, const Tensor& var);
  bool full;
  double eps;
  Reduction reduction;
};

}  // namespace sl::nn
