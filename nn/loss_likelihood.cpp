#include "nn/loss_likelihood.h"

#include <cmath>
#include <numbers>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "core/amp.h"
#include "nn/loss_common.h"

namespace sl::nn {
namespace functional {

using detail::check_broadcasts_to;
using detail::check_floating;
using detail::reduce;
using detail::same_shape_operands;

Tensor poisson_nll_loss(const Tensor& input_in, const Tensor& target_in, bool log_input, bool full,
                        double eps, Reduction reduction) {
  const char* op = "poisson_nll_loss";
  const auto [x, y] = same_shape_operands(input_in, target_in, op);
  check_floating(y, op, "target");
  Tensor loss = log_input ? x.exp() - y * x : x - y * (x + eps).log();
  if (full) {
    // Stirling's term where target > 1, computed on a safe target elsewhere so that its masked
    // entries pass a zero gradient instead of 0 * log(0)
    Tensor big = y.gt(1);
    Tensor ys = where(big, y, 1.0);
    Tensor stirling = ys * ys.log() - ys + 0.5 * (ys * (2 * std::numbers::pi)).log();
    loss = loss + where(big, stirling, 0.0);
  }
  return reduce(loss, reduction);
}

Tensor gaussian_nll_loss(const Tensor& input_in, const Tensor& target_in, const Tensor& var_in,
                         bool full, double eps, Reduction reduction) {
  const char* op = "gaussian_nll_loss";
  const Tensor x = autocast(input_in, AmpPolicy::fp32), y = autocast(target_in, AmpPolicy::fp32);
  Tensor var = autocast(var_in, AmpPolicy::fp32);
  check_floating(x, op, "input");
  check_floating(y, op, "target");
  check_floating(var, op, "var");
  SL_CHECK_DEVICE(x.device() == y.device() && x.device() == var.device(), op,
                  ": input, target and var must be on one device, got ", x.device(), ", ",
                  y.device(), " and ", var.device());
  check_broadcasts_to(y, x, op, "target");
  if (var.sizes() != x.sizes()) {
    Shape lead = x.sizes();
    if (!lead.empty()) lead.pop_back();
    if (x.dim() >= 1 && var.sizes() == lead) {
      var = var.unsqueeze(-1);
    } else {
      Shape vlead = var.sizes();
      if (!vlead.empty()) vlead.pop_back();
      SL_CHECK(x.dim() >= 1 && var.dim() >= 1 && vlead == lead && var.size(-1) == 1, op,
               ": var is of incorrect size: ", shape_str(var_in.sizes()), " for input ",
               shape_str(x.sizes()),
               " (expected the input's shape, or it without the last dim, "
               "or with a last dim of 1)");
    }
  }
  SL_CHECK(!var.lt(0).any().item<bool>(), op, ": var has negative entry/entries");
  // PyTorch clamps a clone of var under no_grad: the value is max(var, eps), the gradient passes
  // through as the identity. var - var.detach() is exactly 0 (var is finite and >= 0 here).
  Tensor v = var - var.detach() + var.detach().clamp(eps);
  Tensor loss = 0.5 * (v.log() + (x - y).square() / v);
  if (full) loss = loss + 0.5 * std::log(2 * std::numbers::pi);
  return reduce(loss, reduction);
}

}  // namespace functional

PoissonNLLLoss::PoissonNLLLoss(bool li, bool f, double e, Reduction r)
    : Module("PoissonNLLLoss"), log_input(li), full(f), eps(e), reduction(r) {}

Tensor PoissonNLLLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::poisson_nll_loss(input, target, log_input, full, eps, reduction);
}

GaussianNLLLoss::GaussianNLLLoss(bool f, double e, Reduction r)
    : Module("GaussianNLLLoss"), full(f), eps(e), reduction(r) {}

Tensor GaussianNLLLoss::forward(const Tensor& input, const Tensor& target, const Tensor& var) {
  return functional::gaussian_nll_loss(input, target, var, full, eps, reduction);
}

}  // namespace sl::nn
