#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/optim.h"

namespace sl::optim {
namespace {

TensorList defined_grads(const TensorList& params) {
  TensorList out;
  for (const auto& p : params) {
    if (p.defined() && p.grad().defined()) out.push_back(p.grad());
  }
  return out;
}

// PyTorch accepts a negative or NaN max_norm and scales by a negative or NaN coefficient:
// gradients silently flipped or destroyed. A bad max_norm is a bug in the caller.
void check_max_norm(double max_norm) {
  SL_CHECK(max_norm >= 0 && !std::isnan(max_norm),
           "clip_grad_norm_: max_norm must be >= 0 (0 zeroes the gradients), got ", max_norm);
}

}  // namespace

double grad_norm_partial(const TensorList& tensors, double norm_type) {
  SL_CHECK(norm_type > 0 && !std::isnan(norm_type),
           "clip_grad_norm_: norm_type must be > 0 "
           "(or inf), got ",
           norm_type);
  const bool inf = std::isinf(norm_type);
  double acc = 0.0;
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    double part = ops::norm_partial(ops::contiguous(t), norm_type);
    if (inf) {
      acc = std::isnan(part) || std::isnan(acc) ? std::nan("") : std::max(acc, part);
    } else {
      acc += part;
    }
  }
  return acc;
}

double total_norm_from_partial(double partial, double norm_type) {
  if (std::isinf(norm_type)) return partial;
  if (norm_type == 2.0) return std::sqrt(partial);
  if (norm_type == 1.0) return partial;
  return std::pow(partial, 1.0 / norm_type);
}

void clip_grads_with_norm_(const TensorList& grads, double max_norm, double total_norm) {
  check_max_norm(max_norm);
  NoGradGuard no_grad;
  for (const auto& g : grads) {
    if (!g.defined()) continue;
    Scalar coef;
    if (g.dtype() == DType::f64) {
      double c = max_norm / (total_norm + 1e-6);
      if (c >= 1.0) continue;  // clamp(max=1): multiplying by 1 changes nothing
      coef = c;
    } else {
      // PyTorch computes the coefficient as a float32 tensor
      float c = static_cast<float>(max_norm) / (static_cast<float>(total_norm) + 1e-6f);
      if (c >= 1.0f) continue;
      coef = static_cast<double>(c);
    }
    ops::binary_(BinaryOp::mul, g, coef);
  }
}

double clip_grad_norm_(const TensorList& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  check_max_norm(max_norm);  // before the norm is computed
  TensorList grads = defined_grads(params);
  if (grads.empty()) return 0.0;
  double total = total_norm_from_partial(grad_norm_partial(grads, norm_type), norm_type);
  SL_CHECK(!error_if_nonfinite || std::isfinite(total),
           "clip_grad_norm_: the total norm of "
           "order ",
           norm_type, " for gradients from `parameters` is non-finite (", total,
           "), so it cannot be clipped. To disable this error and scale the gradients by the "
           "non-finite norm anyway, set error_if_nonfinite=false");
  clip_grads_with_norm_(grads, max_norm, total);
  return total;
}

void clip_grad_value_(const TensorList& params, double clip_value) {
  SL_CHECK(clip_value >= 0, "clip_grad_value_: clip_value must be >= 0, got ", clip_value);
  NoGradGuard no_grad;
  for (const auto& g : defined_grads(params)) ops::clamp_(g, -clip_value, clip_value);
}

}  // namespace sl::optim
