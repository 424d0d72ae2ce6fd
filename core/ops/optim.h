// The "optim-fused" family: one-pass optimizer updates over flat spans, and the gradient
// checks that mixed-precision training needs. Not differentiable (optimizers run under no-grad).
//
// Note [Optimizer kernels over flat spans]
// Every kernel here takes 1-d contiguous tensors of equal length: a parameter, its gradient
// and its state buffers. They may be whole parameters flattened, or views into one flat buffer
// (a ZeRO shard), because the update of element i depends only on element i of each operand and
// on the scalars in the hyperparameter struct. The element update follows the order of
// operations of PyTorch 1.13's single-tensor implementations
// (torch/optim/{sgd,adam,adamw,rmsprop,adagrad,adamax,nadam,radam}.py, foreach=False), each
// operation rounded to the compute type as PyTorch's separate in-place ops round, so results agree
// with PyTorch to f32 rounding (the only freedom left is whether a backend contracts a*b+c into one
// fused multiply-add). The scalars derived from the hyperparameters (bias corrections, step size)
// are computed once in double by adam_step_scalars / sgd_step_scalars, shared by all backends.
//
// Dtypes: param is f32, f64, f16 or bf16; state buffers have param's dtype; grad has param's
// dtype, or is f16/bf16 when param is f32 (an fp32 master copy of a low-precision parameter
// updated from its low-precision gradient). Arithmetic is in float for f32/f16/bf16 and in
// double for f64.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// Hyperparameters of torch.optim.SGD (one parameter group).
struct SgdHyper {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
};

/// Hyperparameters of torch.optim.Adam / AdamW (decoupled_weight_decay = true).
struct AdamHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
  /// AdamW: param *= 1 - lr * weight_decay before the moments; otherwise (Adam) the decay is
  /// added to the gradient (L2 penalty).
  bool decoupled_weight_decay = false;
};

/// Scalars of one Adam step, computed in double exactly as PyTorch does in Python floats.
struct AdamStepScalars {
  double step_size;              ///< lr / (1 - beta1^step)
  double bias_correction2_sqrt;  ///< sqrt(1 - beta2^step)
  double decay;                  ///< AdamW: 1 - lr * weight_decay
};
inline AdamStepScalars adam_step_scalars(const AdamHyper& h, int64_t step) {
  double s = static_cast<double>(step);
  double bc1 = 1.0 - std::pow(h.beta1, s);
  double bc2 = 1.0 - std::pow(h.beta2, s);
  return {h.lr / bc1, std::sqrt(bc2), 1.0 - h.lr * h.weight_decay};
}

/// Hyperparameters of torch.optim.RMSprop (one parameter group).
struct RmspropHyper {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;
  /// Divides by the root of the variance (square_avg - grad_avg^2) instead of square_avg.
  bool centered = false;
  bool maximize = false;
};

/// Hyperparameters of torch.optim.Adagrad (one parameter group).
struct AdagradHyper {
  double lr = 1e-2;
  double lr_decay = 0.0;
  double weight_decay = 0.0;
  /// The value `sum` starts from (the optimizer fills it; the kernel only reads `sum`).
  double initial_accumulator_value = 0.0;
  double eps = 1e-10;
  bool maximize = false;
};
/// Adagrad's decayed learning rate at `step` (>= 1, after incrementing), in double as PyTorch's
/// Python float: lr / (1 + (step - 1) * lr_decay).
inline double adagrad_clr(const AdagradHyper& h, int64_t step) {
  return h.lr / (1.0 + static_cast<double>(step - 1) * h.lr_decay);
}

/// Hyperparameters of torch.optim.Adamax (one parameter group).
struct AdamaxHyper {
  double lr = 2e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool maximize = false;
};
/// Adamax's step size at `step` (>= 1), in double as PyTorch's Python floats: lr / (1 -
/// beta1^step).
inline double adamax_clr(const AdamaxHyper& h, int64_t step) {
  return h.lr / (1.0 - std::pow(h.beta1, static_cast<double>(step)));
}

/// Hyperparameters of torch.optim.NAdam (one parameter group; PyTorch 1.13's has no maximize).
struct NadamHyper {
  double lr = 2e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum_decay = 4e-3;
};
/// NAdam's momentum coefficient mu_t = beta1 (1 - 0.5 * 0.96^(t * momentum_decay)), in double.
inline double nadam_mu(const NadamHyper& h, int64_t step) {
  return h.beta1 * (1.0 - 0.5 * std::pow(0.96, static_cast<double>(step) * h.momentum_decay));
}
/// Note [NAdam's mu_product]
/// PyTorch 1.13 keeps mu_product, the product of mu_1 .. mu_t, per parameter as a float32 scalar
/// tensor (whatever the parameter's dtype): `mu_product *= mu` rounds mu to float32 and the
/// product to float32. It is per-parameter state, not a function of the step alone (beta1 and
/// momentum_decay may change between steps), so it is stored beside the step count: ParamState
/// holds it for the unsharded optimizer, ShardedOptimizer one per flat parameter (the same on
/// every rank), and both are saved in state_dicts and sharded checkpoints. Held here as the
/// double of that float32 value.
/// The mu_product after step `step` (>= 1) from the one before (1 before the first step).
inline double nadam_mu_product(const NadamHyper& h, int64_t step, double mu_product_before) {
  return static_cast<float>(static_cast<float>(mu_product_before) *
                            static_cast<float>(nadam_mu(h, step)));
}
/// Scalars of one NAdam step at `step` (>= 1), with `mu_product` the value after this step
/// (nadam_mu_product), computed as PyTorch does (Python floats, float32 products).
struct NadamStepScalars {
  double bias_correction2;  ///< 1 - beta2^step
  double grad_coef;         ///< -lr (1 - mu) / (1 - mu_product)
  double exp_avg_coef;      ///< -lr mu_next / (1 - mu_product mu mu_next), the product in float32
};
inline NadamStepScalars nadam_step_scalars(const NadamHyper& h, int64_t step, double mu_product) {
  const double mu = nadam_mu(h, step), mu_next = nadam_mu(h, step + 1);
  // mu_product_next = mu_product * mu * mu_next: a float32 tensor times two Python floats
  const double mu_product_next = static_cast<float>(
      static_cast<float>(static_cast<float>(mu_product) * static_cast<float>(mu)) *
      static_cast<float>(mu_next));
  return {1.0 - std::pow(h.beta2, static_cast<double>(step)),
          -h.lr * (1.0 - mu) / (1.0 - mu_product), -h.lr * mu_next / (1.0 - mu_product_next)};
}

/// Hyperparameters of torch.optim.RAdam (one parameter group; PyTorch 1.13's has no maximize).
struct RadamHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};
/// Scalars of one RAdam step, in double as PyTorch's Python floats. The update is rectified
/// (adaptive) when the length of the approximated SMA rho_t = rho_inf - 2 t beta2^t /
/// (1 - beta2^t), rho_inf = 2 / (1 - beta2) - 1, exceeds 5; otherwise it is SGD with momentum
/// on the bias-corrected first moment.
struct RadamStepScalars {
  double bias_correction1;       ///< 1 - beta1^step
  double bias_correction2_sqrt;  ///< sqrt(1 - beta2^step)
  double rho_t;
  bool rectified;  ///< rho_t > 5
  double rect;     ///< the variance rectification term (when rectified)
};
inline RadamStepScalars radam_step_scalars(const RadamHyper& h, int64_t step) {
  const double s = static_cast<double>(step);
  const double bc1 = 1.0 - std::pow(h.beta1, s), bc2 = 1.0 - std::pow(h.beta2, s);
  const double rho_inf = 2 / (1 - h.beta2) - 1;
  const double rho_t = rho_inf - 2 * s * std::pow(h.beta2, s) / bc2;
  RadamStepScalars sc{bc1, std::sqrt(bc2), rho_t, rho_t > 5.0, 0.0};
  if (sc.rectified) {
    sc.rect =
        std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
  }
  return sc;
}

/// Hyperparameters of LAMB (optim/lamb.h, Note [LAMB]) for one parameter group.
struct LambHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 0.01;
  bool bias_correction = true;
};

/// Note [LAMB over flat spans]
/// LAMB's step scales each parameter's update by a trust ratio ||w|| / ||u|| over the whole
/// parameter tensor, so unlike SGD/Adam it is not element-wise; it runs in two phases over a
/// span that may hold pieces of several parameters (segments), e.g. a ZeRO shard's run:
///   phase 1 (lamb_moments): updates exp_avg / exp_avg_sq, writes the raw update u into
///     `update` (a buffer of param's dtype and length), and stores, for segment j (elements
///     [bounds[j], bounds[j+1]) of the span), the sums of squares of w (before the step) and of
///     the stored u, in double, into sums[2 * rows[j]] and sums[2 * rows[j] + 1] (sums: a
///     contiguous f64 tensor on param's device). A segment's sums are computed in a fixed
///     order: the same bits for any thread count.
///   between the phases the caller may combine sums (a ZeRO rank holds only a piece of a
///     parameter: it all-reduces (sum) the sums across ranks);
///   phase 2 (lamb_apply): for segment j with ws = sums[2 rows[j]], us = sums[2 rows[j] + 1],
///     r = sqrt(ws) / sqrt(us) when both are > 0, else 1; param -= (lr * r) * u, the factor
///     computed in double and rounded to the compute type once.
/// The scalars of the moments follow the element-wise rule of Note [Optimizer kernels over flat
/// spans] (compute type float, double for f64); see lamb_element for the order of operations.
struct LambStepScalars {
  double bias_correction1;  ///< 1 - beta1^step (1 without bias correction)
  double bias_correction2;  ///< 1 - beta2^step (1 without bias correction)
};
inline LambStepScalars lamb_step_scalars(const LambHyper& h, int64_t step) {
  if (!h.bias_correction) return {1.0, 1.0};
  double s = static_cast<double>(step);
  return {1.0 - std::pow(h.beta1, s), 1.0 - std::pow(h.beta2, s)};
}
/// The trust ratio from the two sums of squares (Note [LAMB over flat spans]).
inline double lamb_trust_ratio(double w_sq, double u_sq) {
  return w_sq > 0.0 && u_sq > 0.0 ? std::sqrt(w_sq) / std::sqrt(u_sq) : 1.0;
}

/// One SGD step: param, grad and (when h.momentum != 0) momentum_buf are 1-d contiguous tensors
/// of equal length on one device (see Note [Optimizer kernels over flat spans]). With
/// init_momentum the buffer is set to the (decayed) gradient, as PyTorch does on the first step;
/// momentum_buf is undefined when h.momentum == 0.
SL_DECLARE_KERNEL(sgd_step_kernel,
                  void(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
                       const SgdHyper& h, bool init_momentum));
/// One Adam/AdamW step; `step` is the step number after incrementing (1 on the first step).
/// max_exp_avg_sq is used (and must be defined) only when h.amsgrad.
SL_DECLARE_KERNEL(adam_step_kernel,
                  void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                       const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, int64_t step,
                       const AdamHyper& h));
/// One RMSprop step: square_avg always, grad_avg only when h.centered and momentum_buf only when
/// h.momentum > 0 (each undefined otherwise); buffers start as zeros (the caller's job).
SL_DECLARE_KERNEL(rmsprop_step_kernel,
                  void(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                       const Tensor& grad_avg, const Tensor& momentum_buf, const RmspropHyper& h));
/// One Adagrad step; `step` is the step number after incrementing (1 on the first step), which
/// sets the decayed learning rate (adagrad_clr).
SL_DECLARE_KERNEL(adagrad_step_kernel,
                  void(const Tensor& param, const Tensor& grad, const Tensor& sum, int64_t step,
                       const AdagradHyper& h));
/// One Adamax step (exp_avg, exp_inf start as zeros); `step` >= 1 after incrementing.
SL_DECLARE_KERNEL(adamax_step_kernel,
                  void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                       const Tensor& exp_inf, int64_t step, const AdamaxHyper& h));
/// One NAdam step; `mu_product` is the value after this step (Note [NAdam's mu_product]).
SL_DECLARE_KERNEL(nadam_step_kernel, void(const Tensor& param, const Tensor& grad,
                                          const Tensor& exp_avg, const Tensor& exp_avg_sq,
                                          int64_t step, double mu_product, const NadamHyper& h));
/// One RAdam step; `step` >= 1 after incrementing.
SL_DECLARE_KERNEL(radam_step_kernel,
                  void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                       const Tensor& exp_avg_sq, int64_t step, const RadamHyper& h));
/// LAMB phase 1 (Note [LAMB over flat spans]): bounds has rows.size() + 1 entries, from 0 to
/// param.numel(), non-decreasing; `step` >= 1 is the step number after incrementing.
SL_DECLARE_KERNEL(lamb_moments_kernel,
                  void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                       const Tensor& exp_avg_sq, const Tensor& update,
                       const std::vector<int64_t>& bounds, const std::vector<int64_t>& rows,
                       const Tensor& sums, int64_t step, const LambHyper& h));
/// LAMB phase 2: param -= lr * r_j * update over each segment j.
SL_DECLARE_KERNEL(lamb_apply_kernel,
                  void(const Tensor& param, const Tensor& update,
                       const std::vector<int64_t>& bounds, const std::vector<int64_t>& rows,
                       const Tensor& sums, double lr));
/// Mixed-precision unscale: grad *= inv_scale (any floating dtype, 1-d contiguous), and sets
/// found_inf (a one-element f32 tensor on grad's device) to 1 when grad holds an inf or NaN;
/// never clears it. Writing a device flag instead of returning a bool lets a CUDA backend check
/// many tensors without a sync, and a distributed wrapper all-reduce (max) the flag.
SL_DECLARE_KERNEL(unscale_check_kernel,
                  void(const Tensor& grad, const Tensor& found_inf, double inv_scale));
/// Sum of |x|^p (p > 0, finite) or, for p = inf, max |x| of a 1-d contiguous floating tensor,
/// accumulated in double in a fixed order (the same bits for any thread count). A NaN element
/// makes the result NaN. The building block of clip_grad_norm_ and its sharded version.
SL_DECLARE_KERNEL(norm_partial_kernel, double(const Tensor& x, double p));

namespace ops {

/// Checks the operands (defined, one device, equal numel, contiguous, dtypes as in the Note,
/// hyperparameters finite and in range) and runs sgd_step_kernel on flattened views. Throws
/// ValueError/ShapeError/DTypeError/DeviceError naming "sgd_step" and the offending operand.
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
              const SgdHyper& h, bool init_momentum);
/// Checks as sgd_step does and runs adam_step_kernel; step >= 1.
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, int64_t step,
               const AdamHyper& h);
/// Checks as sgd_step does (grad_avg when h.centered, momentum_buf when h.momentum > 0, as
/// state buffers) and runs rmsprop_step_kernel; throws naming "rmsprop_step".
void rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                  const Tensor& grad_avg, const Tensor& momentum_buf, const RmspropHyper& h);
/// Checks as sgd_step does and runs adagrad_step_kernel; step >= 1. Throws naming
/// "adagrad_step".
void adagrad_step(const Tensor& param, const Tensor& grad, const Tensor& sum, int64_t step,
                  const AdagradHyper& h);
/// Checks as adam_step does and runs adamax_step_kernel; throws naming "adamax_step".
void adamax_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_inf, int64_t step, const AdamaxHyper& h);
/// Checks as adam_step does and runs nadam_step_kernel with `mu_product`, the value after this
/// step (nadam_mu_product; in (0, 1], ValueError otherwise); throws naming "nadam_step".
void nadam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, int64_t step, double mu_product, const NadamHyper& h);
/// Checks as adam_step does and runs radam_step_kernel; throws naming "radam_step".
void radam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, int64_t step, const RadamHyper& h);
/// LAMB phase 1 over a span of segments (Note [LAMB over flat spans]): checks param / grad /
/// exp_avg / exp_avg_sq / update as adam_step checks its operands (update as a state buffer),
/// the hyperparameters, step >= 1, the segments (bounds from 0 to param.numel(), one more than
/// rows, non-decreasing) and sums (contiguous f64 on param's device, every 2 * row + 1 in
/// range). Throws ValueError/ShapeError/DTypeError/DeviceError naming "lamb_moments".
void lamb_moments(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                  const Tensor& exp_avg_sq, const Tensor& update,
                  const std::vector<int64_t>& bounds, const std::vector<int64_t>& rows,
                  const Tensor& sums, int64_t step, const LambHyper& h);
/// LAMB phase 2; checks as lamb_moments (naming "lamb_apply") and lr finite >= 0.
void lamb_apply(const Tensor& param, const Tensor& update, const std::vector<int64_t>& bounds,
                const std::vector<int64_t>& rows, const Tensor& sums, double lr);
/// grad *= inv_scale and found_inf = 1 if grad has a non-finite value (see unscale_check_kernel).
/// grad must be contiguous; found_inf a one-element f32 tensor on grad's device.
void unscale_check_(const Tensor& grad, const Tensor& found_inf, double inv_scale);
/// sum |x|^p (or max |x| for p = inf) of a contiguous floating tensor, in double. p > 0.
double norm_partial(const Tensor& x, double p);

/// Check the hyperparameters as PyTorch 1.13's constructors do, with its messages and in its
/// order, each value also finite; ValueError naming `op` (the caller). SGD: lr, momentum,
/// weight_decay (then a finite dampening, and nesterov's momentum > 0 and zero dampening); Adam,
/// AdamW, Lamb, Adamax, NAdam and RAdam: lr, eps, betas in [0, 1), weight_decay (then NAdam's
/// momentum_decay); RMSprop: lr, eps, momentum, weight_decay, alpha; Adagrad: lr, lr_decay,
/// weight_decay, initial_accumulator_value, eps.
void check_sgd_hyper(const SgdHyper& h, const char* op);
void check_adam_hyper(const AdamHyper& h, const char* op);
void check_lamb_hyper(const LambHyper& h, const char* op);
void check_rmsprop_hyper(const RmspropHyper& h, const char* op);
void check_adagrad_hyper(const AdagradHyper& h, const char* op);
void check_adamax_hyper(const AdamaxHyper& h, const char* op);
void check_nadam_hyper(const NadamHyper& h, const char* op);
void check_radam_hyper(const RadamHyper& h, const char* op);

}  // namespace ops
}  // namespace sl
