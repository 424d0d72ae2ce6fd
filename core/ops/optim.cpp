#include "core/ops/optim.h"

#include <cmath>

#include "core/ops/copy.h"
#include "core/ops/view.h"

namespace sl {

SL_DEFINE_KERNEL(sgd_step_kernel,
                 void(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
                      const SgdHyper& h, bool init_momentum));
SL_DEFINE_KERNEL(adam_step_kernel,
                 void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                      const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, int64_t step,
                      const AdamHyper& h));
SL_DEFINE_KERNEL(rmsprop_step_kernel,
                 void(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                      const Tensor& grad_avg, const Tensor& momentum_buf, const RmspropHyper& h));
SL_DEFINE_KERNEL(adagrad_step_kernel, void(const Tensor& param, const Tensor& grad,
                                           const Tensor& sum, int64_t step, const AdagradHyper& h));
SL_DEFINE_KERNEL(adamax_step_kernel,
                 void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                      const Tensor& exp_inf, int64_t step, const AdamaxHyper& h));
SL_DEFINE_KERNEL(nadam_step_kernel, void(const Tensor& param, const Tensor& grad,
                                         const Tensor& exp_avg, const Tensor& exp_avg_sq,
                                         int64_t step, double mu_product, const NadamHyper& h));
SL_DEFINE_KERNEL(radam_step_kernel,
                 void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                      const Tensor& exp_avg_sq, int64_t step, const RadamHyper& h));
SL_DEFINE_KERNEL(lamb_moments_kernel,
                 void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                      const Tensor& exp_avg_sq, const Tensor& update,
                      const std::vector<int64_t>& bounds, const std::vector<int64_t>& rows,
                      const Tensor& sums, int64_t step, const LambHyper& h));
SL_DEFINE_KERNEL(lamb_apply_kernel,
                 void(const Tensor& param, const Tensor& update, const std::vector<int64_t>& bounds,
                      const std::vector<int64_t>& rows, const Tensor& sums, double lr));
SL_DEFINE_KERNEL(unscale_check_kernel,
                 void(const Tensor& grad, const Tensor& found_inf, double inv_scale));
SL_DEFINE_KERNEL(norm_partial_kernel, double(const Tensor& x, double p));

namespace ops {
namespace {

bool is_low_precision(DType t) {
  return t == DType::f16 || t == DType::bf16;
}

/// Checks a param/grad pair and returns nothing; see Note [Optimizer kernels over flat spans].
void check_param_grad(const char* op, const Tensor& param, const Tensor& grad) {
  check_defined(op, param, "param");
  check_defined(op, grad, "grad");
  check_same_device(op, {&param, &grad});
  SL_CHECK_DTYPE(is_floating(param.dtype()), op, ": param must be floating, got ",
                 dtype_name(param.dtype()));
  bool grad_ok = grad.dtype() == param.dtype() ||
                 (param.dtype() == DType::f32 && is_low_precision(grad.dtype()));
  SL_CHECK_DTYPE(grad_ok, op, ": grad of dtype ", dtype_name(grad.dtype()),
                 " does not fit a param of dtype ", dtype_name(param.dtype()),
                 " (expected the same dtype, or f16/bf16 for an f32 master param)");
  SL_CHECK_SHAPE(grad.numel() == param.numel(), op, ": grad has ", grad.numel(),
                 " elements but param has ", param.numel());
  SL_CHECK(param.is_contiguous(), op, ": param must be contiguous (sizes ",
           shape_str(param.sizes()), ", strides ", shape_str(param.strides()), ")");
  SL_CHECK(grad.is_contiguous(), op, ": grad must be contiguous (sizes ", shape_str(grad.sizes()),
           ", strides ", shape_str(grad.strides()), ")");
}

void check_state(const char* op, const char* what, const Tensor& param, const Tensor& s) {
  check_defined(op, s, what);
  check_same_device(op, {&param, &s});
  SL_CHECK_DTYPE(s.dtype() == param.dtype(), op, ": ", what, " has dtype ", dtype_name(s.dtype()),
                 " but param has ", dtype_name(param.dtype()));
  SL_CHECK_SHAPE(s.numel() == param.numel(), op, ": ", what, " has ", s.numel(),
                 " elements but param has ", param.numel());
  SL_CHECK(s.is_contiguous(), op, ": ", what, " must be contiguous");
}

/// A 1-d view of a contiguous tensor (no autograd record).
Tensor flat(const Tensor& t) {
  return t.defined() && t.dim() != 1 ? ops::view(t, {t.numel()}) : t;
}

void check_finite_nonneg(const char* op, const char* name, double v) {
  SL_CHECK(std::isfinite(v) && v >= 0.0, op, ": invalid ", name, " ", v,
           " (expected a finite value >= 0)");
}

/// The checks of torch.optim.Adam / AdamW / Adamax / NAdam / RAdam's constructors, in their order
/// and with their messages (Lamb's too).
void check_adam_like(const char* op, double lr, double eps, double beta1, double beta2,
                     double weight_decay) {
  check_finite_nonneg(op, "learning rate", lr);
  check_finite_nonneg(op, "epsilon value", eps);
  SL_CHECK(beta1 >= 0.0 && beta1 < 1.0, op, ": invalid beta parameter at index 0: ", beta1,
           " (expected 0 <= beta1 < 1)");
  SL_CHECK(beta2 >= 0.0 && beta2 < 1.0, op, ": invalid beta parameter at index 1: ", beta2,
           " (expected 0 <= beta2 < 1)");
  check_finite_nonneg(op, "weight_decay value", weight_decay);
}

/// Checks LAMB's segments and sums (Note [LAMB over flat spans]).
void check_segments(const char* op, const Tensor& param, const std::vector<int64_t>& bounds,
                    const std::vector<int64_t>& rows, const Tensor& sums) {
  SL_CHECK_SHAPE(bounds.size() == rows.size() + 1, op, ": ", bounds.size(), " segment bounds for ",
                 rows.size(), " rows (expected one more bound than rows)");
  SL_CHECK(bounds.front() == 0 && bounds.back() == param.numel(), op,
           ": segment bounds must run from 0 to the span's ", param.numel(), " elements, got ",
           bounds.front(), " .. ", bounds.back());
  check_defined(op, sums, "sums");
  check_same_device(op, {&param, &sums});
  SL_CHECK_DTYPE(sums.dtype() == DType::f64, op, ": sums must be float64, got ",
                 dtype_name(sums.dtype()));
  SL_CHECK(sums.is_contiguous(), op, ": sums must be contiguous");
  for (size_t j = 0; j < rows.size(); ++j) {
    SL_CHECK(bounds[j] <= bounds[j + 1], op, ": segment bounds must not decrease, got ", bounds[j],
             " then ", bounds[j + 1]);
    SL_CHECK_INDEX(rows[j] >= 0 && 2 * rows[j] + 1 < sums.numel(), op, ": row ", rows[j],
                   " of segment ", j, " out of range for sums of ", sums.numel(),
                   " elements (2 per row)");
  }
}

}  // namespace

void check_sgd_hyper(const SgdHyper& h, const char* op) {
  check_finite_nonneg(op, "learning rate", h.lr);
  // PyTorch's order and messages (then ours: a finite dampening)
  check_finite_nonneg(op, "momentum value", h.momentum);
  check_finite_nonneg(op, "weight_decay value", h.weight_decay);
  SL_CHECK(std::isfinite(h.dampening), op, ": invalid dampening ", h.dampening);
  SL_CHECK(!h.nesterov || (h.momentum > 0 && h.dampening == 0), op,
           ": nesterov momentum requires a momentum > 0 and zero dampening (got momentum ",
           h.momentum, ", dampening ", h.dampening, ")");
}

void check_adam_hyper(const AdamHyper& h, const char* op) {
  check_adam_like(op, h.lr, h.eps, h.beta1, h.beta2, h.weight_decay);
}

void check_lamb_hyper(const LambHyper& h, const char* op) {
  check_adam_like(op, h.lr, h.eps, h.beta1, h.beta2, h.weight_decay);
}

void check_rmsprop_hyper(const RmspropHyper& h, const char* op) {
  // PyTorch's order and messages
  check_finite_nonneg(op, "learning rate", h.lr);
  check_finite_nonneg(op, "epsilon value", h.eps);
  check_finite_nonneg(op, "momentum value", h.momentum);
  check_finite_nonneg(op, "weight_decay value", h.weight_decay);
  check_finite_nonneg(op, "alpha value", h.alpha);
}

void check_adagrad_hyper(const AdagradHyper& h, const char* op) {
  check_finite_nonneg(op, "learning rate", h.lr);
  check_finite_nonneg(op, "lr_decay value", h.lr_decay);
  check_finite_nonneg(op, "weight_decay value", h.weight_decay);
  check_finite_nonneg(op, "initial_accumulator_value value", h.initial_accumulator_value);
  check_finite_nonneg(op, "epsilon value", h.eps);
}

void check_adamax_hyper(const AdamaxHyper& h, const char* op) {
  check_adam_like(op, h.lr, h.eps, h.beta1, h.beta2, h.weight_decay);
}

void check_nadam_hyper(const NadamHyper& h, const char* op) {
  check_adam_like(op, h.lr, h.eps, h.beta1, h.beta2, h.weight_decay);
  check_finite_nonneg(op, "momentum_decay value", h.momentum_decay);
}

void check_radam_hyper(const RadamHyper& h, const char* op) {
  check_adam_like(op, h.lr, h.eps, h.beta1, h.beta2, h.weight_decay);
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
              const SgdHyper& h, bool init_momentum) {
  const char* op = "sgd_step";
  check_param_grad(op, param, grad);
  check_sgd_hyper(h, op);
  if (h.momentum != 0.0) check_state(op, "momentum_buf", param, momentum_buf);
  if (param.numel() == 0) return;
  sgd_step_kernel(param.device().kind, flat(param), flat(grad),
                  h.momentum != 0.0 ? flat(momentum_buf) : Tensor(), h, init_momentum);
  param.bump_version();
  if (h.momentum != 0.0) momentum_buf.bump_version();
}

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, int64_t step,
               const AdamHyper& h) {
  const char* op = "adam_step";
  check_param_grad(op, param, grad);
  check_adam_hyper(h, op);
  SL_CHECK(step >= 1, op, ": step must be >= 1 (the step number after incrementing), got ", step);
  check_state(op, "exp_avg", param, exp_avg);
  check_state(op, "exp_avg_sq", param, exp_avg_sq);
  if (h.amsgrad) check_state(op, "max_exp_avg_sq", param, max_exp_avg_sq);
  if (param.numel() == 0) return;
  adam_step_kernel(param.device().kind, flat(param), flat(grad), flat(exp_avg), flat(exp_avg_sq),
                   h.amsgrad ? flat(max_exp_avg_sq) : Tensor(), step, h);
  param.bump_version();
  exp_avg.bump_version();
  exp_avg_sq.bump_version();
  if (h.amsgrad) max_exp_avg_sq.bump_version();
}

void rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                  const Tensor& grad_avg, const Tensor& momentum_buf, const RmspropHyper& h) {
  const char* op = "rmsprop_step";
  check_param_grad(op, param, grad);
  check_rmsprop_hyper(h, op);
  const bool momentum = h.momentum > 0.0;
  check_state(op, "square_avg", param, square_avg);
  if (h.centered) check_state(op, "grad_avg", param, grad_avg);
  if (momentum) check_state(op, "momentum_buf", param, momentum_buf);
  if (param.numel() == 0) return;
  rmsprop_step_kernel(param.device().kind, flat(param), flat(grad), flat(square_avg),
                      h.centered ? flat(grad_avg) : Tensor(),
                      momentum ? flat(momentum_buf) : Tensor(), h);
  param.bump_version();
  square_avg.bump_version();
  if (h.centered) grad_avg.bump_version();
  if (momentum) momentum_buf.bump_version();
}

void adagrad_step(const Tensor& param, const Tensor& grad, const Tensor& sum, int64_t step,
                  const AdagradHyper& h) {
  const char* op = "adagrad_step";
  check_param_grad(op, param, grad);
  check_adagrad_hyper(h, op);
  SL_CHECK(step >= 1, op, ": step must be >= 1 (the step number after incrementing), got ", step);
  check_state(op, "sum", param, sum);
  if (param.numel() == 0) return;
  adagrad_step_kernel(param.device().kind, flat(param), flat(grad), flat(sum), step, h);
  param.bump_version();
  sum.bump_version();
}

void adamax_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_inf, int64_t step, const AdamaxHyper& h) {
  const char* op = "adamax_step";
  check_param_grad(op, param, grad);
  check_adamax_hyper(h, op);
  SL_CHECK(step >= 1, op, ": step must be >= 1 (the step number after incrementing), got ", step);
  check_state(op, "exp_avg", param, exp_avg);
  check_state(op, "exp_inf", param, exp_inf);
  if (param.numel() == 0) return;
  adamax_step_kernel(param.device().kind, flat(param), flat(grad), flat(exp_avg), flat(exp_inf),
                     step, h);
  param.bump_version();
  exp_avg.bump_version();
  exp_inf.bump_version();
}

void nadam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, int64_t step, double mu_product, const NadamHyper& h) {
  const char* op = "nadam_step";
  check_param_grad(op, param, grad);
  check_nadam_hyper(h, op);
  SL_CHECK(step >= 1, op, ": step must be >= 1 (the step number after incrementing), got ", step);
  SL_CHECK(mu_product >= 0.0 && mu_product < 1.0, op,
           ": mu_product must be in [0, 1) after a step, got ", mu_product);
  check_state(op, "exp_avg", param, exp_avg);
  check_state(op, "exp_avg_sq", param, exp_avg_sq);
  if (param.numel() == 0) return;
  nadam_step_kernel(param.device().kind, flat(param), flat(grad), flat(exp_avg), flat(exp_avg_sq),
                    step, mu_product, h);
  param.bump_version();
  exp_avg.bump_version();
  exp_avg_sq.bump_version();
}

void radam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, int64_t step, const RadamHyper& h) {
  const char* op = "radam_step";
  check_param_grad(op, param, grad);
  check_radam_hyper(h, op);
  SL_CHECK(step >= 1, op, ": step must be >= 1 (the step number after incrementing), got ", step);
  check_state(op, "exp_avg", param, exp_avg);
  check_state(op, "exp_avg_sq", param, exp_avg_sq);
  if (param.numel() == 0) return;
  radam_step_kernel(param.device().kind, flat(param), flat(grad), flat(exp_avg), flat(exp_avg_sq),
                    step, h);
  param.bump_version();
  exp_avg.bump_version();
  exp_avg_sq.bump_version();
}

void lamb_moments(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                  const Tensor& exp_avg_sq, const Tensor& update,
                  const std::vector<int64_t>& bounds, const std::vector<int64_t>& rows,
                  const Tensor& sums, int64_t step, const LambHyper& h) {
  const char* op = "lamb_moments";
  check_param_grad(op, param, grad);
  check_lamb_hyper(h, op);
  SL_CHECK(step >= 1, op, ": step must be >= 1 (the step number after incrementing), got ", step);
  check_state(op, "exp_avg", param, exp_avg);
  check_state(op, "exp_avg_sq", param, exp_avg_sq);
  check_state(op, "update", param, update);
  check_segments(op, param, bounds, rows, sums);
  lamb_moments_kernel(param.device().kind, flat(param), flat(grad), flat(exp_avg), flat(exp_avg_sq),
                      flat(update), bounds, rows, sums, step, h);
  exp_avg.bump_version();
  exp_avg_sq.bump_version();
  update.bump_version();
  sums.bump_version();
}

void lamb_apply(const Tensor& param, const Tensor& update, const std::vector<int64_t>& bounds,
                const std::vector<int64_t>& rows, const Tensor& sums, double lr) {
  const char* op = "lamb_apply";
  check_defined(op, param, "param");
  SL_CHECK_DTYPE(is_floating(param.dtype()), op, ": param must be floating, got ",
                 dtype_name(param.dtype()));
  SL_CHECK(param.is_contiguous(), op, ": param must be contiguous (sizes ",
           shape_str(param.sizes()), ", strides ", shape_str(param.strides()), ")");
  check_state(op, "update", param, update);
  check_finite_nonneg(op, "learning rate", lr);
  check_segments(op, param, bounds, rows, sums);
  if (param.numel() == 0) return;
  lamb_apply_kernel(param.device().kind, flat(param), flat(update), bounds, rows, sums, lr);
  param.bump_version();
}

void unscale_check_(const Tensor& grad, const Tensor& found_inf, double inv_scale) {
  const char* op = "unscale_check_";
  check_defined(op, grad, "grad");
  check_defined(op, found_inf, "found_inf");
  check_same_device(op, {&grad, &found_inf});
  SL_CHECK_DTYPE(is_floating(grad.dtype()), op, ": grad must be floating, got ",
                 dtype_name(grad.dtype()));
  SL_CHECK_DTYPE(found_inf.dtype() == DType::f32, op, ": found_inf must be float32, got ",
                 dtype_name(found_inf.dtype()));
  SL_CHECK_SHAPE(found_inf.numel() == 1, op, ": found_inf must have one element, got ",
                 found_inf.numel());
  SL_CHECK(grad.is_contiguous(), op, ": grad must be contiguous");
  SL_CHECK(std::isfinite(inv_scale), op, ": inv_scale must be finite, got ", inv_scale);
  if (grad.numel() == 0) return;
  unscale_check_kernel(grad.device().kind, flat(grad), found_inf, inv_scale);
  grad.bump_version();
  found_inf.bump_version();
}

double norm_partial(const Tensor& x, double p) {
  const char* op = "norm_partial";
  check_defined(op, x);
  SL_CHECK_DTYPE(is_floating(x.dtype()), op, ": expected a floating tensor, got ",
                 dtype_name(x.dtype()));
  SL_CHECK(p > 0.0 && !std::isnan(p), op, ": norm type must be > 0 (or inf), got ", p);
  SL_CHECK(x.is_contiguous(), op, ": input must be contiguous");
  if (x.numel() == 0) return 0.0;
  return norm_partial_kernel(x.device().kind, flat(x), p);
}

}  // namespace ops
}  // namespace sl
