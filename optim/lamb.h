// LAMB: Adam's moments with a per-tensor trust ratio, for large-batch training (BERT).
//
// Note [LAMB]
// You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes"
// (arXiv 1904.00962), Algorithm 2. For each parameter tensor w with gradient g, at step t:
//   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
//   with bias correction: m^ = m / (1 - b1^t), v^ = v / (1 - b2^t) (else m^ = m, v^ = v)
//   u = m^ / (sqrt(v^) + eps) + weight_decay * w
//   r = ||w||_2 / ||u||_2 when both norms are > 0, else 1
//   w -= lr * r * u
// The norms are over the whole parameter tensor (a ZeRO rank holding a piece of it combines
// the pieces' sums of squares across ranks: Note [LAMB over flat spans], core/ops/optim.h);
// the paper's scaling function phi is the identity, as in apex and most implementations.
//
// Compared with NVIDIA apex's FusedLAMB (apex/optimizers/fused_lamb.py and
// csrc/multi_tensor_lamb.cu, read at the source): with its defaults (adam_w_mode and
// grad_averaging on, bias_correction on, lr 1e-3, betas (0.9, 0.999), eps 1e-6, weight_decay
// 0.01, which are ours) the per-element rule is the same: weight_decay * w is added to the update
// u, not to the gradient. The differences:
// - apex computes the global norm of all gradients and divides every gradient by
//   norm / max_grad_norm when the norm exceeds max_grad_norm (1.0 by default) inside the
//   optimizer; here clipping is the strategy's max_grad_norm (dist/strategy.h), applied before
//   the step and off unless asked for, so an apex run with defaults is ours with max_grad_norm 1.
// - apex applies the trust ratio only to parameters whose group has weight_decay != 0 unless
//   use_nvlamb = True (default False); we apply it to every parameter, as the paper and apex's
//   use_nvlamb = True do.
// - apex takes r = 1 when either norm is 0, as we do; it computes the norms in float, we sum the
//   squares in double.
// - apex keeps no master weights (its 16-bit parameters are updated in place); ours are optional.
#pragma once

#include <tuple>
#include <utility>

#include "optim/adam_like.h"

namespace sl::optim {

struct LambOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 1e-2;
  bool bias_correction = true;
  /// Keep an fp32 master copy of f16/bf16 parameters (and fp32 moments) and update that.
  bool master_weights = false;
  /// The kernel hyperparameters.
  LambHyper hyper() const { return {lr, beta1, beta2, eps, weight_decay, bias_correction}; }
  /// The options beyond Adam's common ones, as a saved group lists them (AdamLike).
  static constexpr auto own_options() {
    return std::make_tuple(std::pair{"bias_correction", &LambOptions::bias_correction});
  }
};

/// step(): one LAMB step of every parameter with a gradient (Note [LAMB]); state exp_avg,
/// exp_avg_sq (and master) as Adam's. Throws ValueError for hyperparameters made invalid since
/// construction.
class Lamb : public AdamLike<LambOptions, &lamb_update, &ops::check_lamb_hyper> {
 public:
  /// One group. Throws ValueError for invalid hyperparameters (negative or non-finite lr, eps or
  /// weight_decay, betas outside [0, 1)), naming the option and its value.
  explicit Lamb(const TensorList& params, LambOptions options = {});
  explicit Lamb(const std::vector<ParamGroup<LambOptions>>& groups);
  const char* name() const override { return "Lamb"; }
  StateKeys state_keys(size_t) const override { return state_keys_of({"exp_avg", "exp_avg_sq"}); }
};

}  // namespace sl::optim
