// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_, split into pieces a
// sharded optimizer can compose: each rank computes grad_norm_partial over the gradient shard
// it owns, the partials are all-reduced (sum, or max for the inf norm), total_norm_from_partial
// finishes the norm, and clip_grads_with_norm_ scales the local gradients. Every rank then uses
// the same total norm, so no rank clips differently.
#pragma once

#include "core/tensor.h"

namespace sl::optim {

/// Sum over all tensors of sum |x|^p (norm_type p > 0), or max |x| for p = inf, in double.
/// Undefined tensors are skipped. Throws ValueError for norm_type <= 0 or NaN.
double grad_norm_partial(const TensorList& tensors, double norm_type);
/// partial^(1/p), or partial itself for p = inf.
double total_norm_from_partial(double partial, double norm_type);
/// Multiplies every defined tensor by min(1, max_norm / (total_norm + 1e-6)) (computed in the
/// tensors' precision as PyTorch does: float for f32/f16/bf16). No-op when that is 1. Throws
/// ValueError for a negative or NaN max_norm (PyTorch would flip or NaN the gradients).
void clip_grads_with_norm_(const TensorList& grads, double max_norm, double total_norm);

/// Clips the gradients of `params` (those defined) so their total norm_type-norm is at most
/// max_norm; returns the total norm before clipping (0 when no parameter has a gradient).
/// error_if_nonfinite: throws ValueError when the total norm is inf or NaN (then no gradient is
/// changed); otherwise non-finite norms scale the gradients to NaN, as in PyTorch. A negative
/// or NaN max_norm throws ValueError before anything is computed.
double clip_grad_norm_(const TensorList& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
/// Clamps every defined gradient of `params` into [-clip_value, clip_value]. Throws ValueError
/// for a negative or NaN clip_value.
void clip_grad_value_(const TensorList& params, double clip_value);

}  // namespace sl::optim
