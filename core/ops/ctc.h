// The "ctc" family: the connectionist temporal classification loss (Graves et al. 2006) in log
// space, forward (alpha recursion) and backward (beta recursion), with PyTorch's gradient.
// Not differentiable (see autograd/ops/ctc.h).
//
// Note [CTC gradient]
// The kernels follow PyTorch's ctc_loss: for a sample b with input length T_b and loss nll,
//   grad[t, b, c] = grad_nll[b] * (exp(lp[t, b, c]) - exp(lcab[t, c] + nll - lp[t, b, c]))
// for t < T_b (0 beyond), where lcab[t, c] = logsumexp over the extended-label positions s
// holding c of log_alpha[t, s] + log_beta[t, s]. This is the gradient w.r.t. the logits
// under a log_softmax (the exp(lp) term vanishes through log_softmax's backward), which is
// what PyTorch returns for log_probs; it is not the plain derivative w.r.t. log_probs, so
// gradchecks must go through a log_softmax. With zero_infinity, samples whose loss is
// infinite get a zero loss and a zero gradient.
//
// Note [CTC impossible samples]
// A sample has no alignment when its target needs more steps than its input has (L_b labels
// plus one blank between each pair of equal neighbours > T_b), in particular whenever
// target_lengths[b] > input_lengths[b], which check_ctc accepts as PyTorch does. The kernels
// need no special case: every loop is bounded by T_b in time and by the sample's own 2 L_b + 1
// extended states (<= 2 S + 1, the row length of log_alpha) in s, and a log-space sum whose
// terms are all -inf is -inf (never NaN), so every log_alpha[t, s] + log_beta[t, s] of such a
// sample is -inf and its nll is +inf. Backward, as PyTorch's (checked with 1.13 on the CPU;
// its CUDA kernel uses the same formula):
//   - zero_infinity: the sample's loss and all T rows of its gradient are exactly 0;
//   - otherwise: grad[t, b, :] is NaN for t < T_b (exp(lcab + nll - lp) = exp(-inf + inf)),
//     even where grad_nll[b] is 0 (NaN * 0), and 0 for t >= T_b; "sum" and "mean" are +inf.
// T_b = 0 is the exception: nll is 0 for an empty target and +inf otherwise, and the gradient
// is 0 with or without zero_infinity (there is no time step to differentiate). (PyTorch 1.13's
// CPU kernel returns an uninitialized value for this loss, so there is no fixture for it.)
#pragma once

#include <cstdint>
#include <vector>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// Forward: nll [N] and log_alpha [N, T, 2 * S + 1] from log_probs [T, N, C] (contiguous,
/// f32 / f64), targets [N, S] (i64, padded), input_lengths / target_lengths [N] (i64), all
/// checked and on one device. nll is +inf for samples with no valid alignment, including
/// targets longer than their input (Note [CTC impossible samples]).
SL_DECLARE_KERNEL(ctc_loss_forward_kernel,
                  void(const Tensor& nll, const Tensor& log_alpha, const Tensor& log_probs,
                       const Tensor& targets, const Tensor& input_lengths,
                       const Tensor& target_lengths, int64_t blank));
/// Backward: grad [T, N, C] (overwritten) as Note [CTC gradient] from grad_nll [N] and the
/// forward's nll and log_alpha; NaN rows for an infinite nll unless zero_infinity (Note [CTC
/// impossible samples]).
SL_DECLARE_KERNEL(ctc_loss_backward_kernel,
                  void(const Tensor& grad, const Tensor& grad_nll, const Tensor& log_probs,
                       const Tensor& targets, const Tensor& input_lengths,
                       const Tensor& target_lengths, const Tensor& nll, const Tensor& log_alpha,
                       int64_t blank, bool zero_infinity));

namespace ops {

/// Checked CTC arguments in kernel form (Note [CTC gradient]).
struct CtcArgs {
  Tensor log_probs;       ///< [T, N, C] contiguous, f32 / f64
  Tensor targets;         ///< [N, S] i64 padded
  Tensor input_lengths;   ///< [N] i64
  Tensor target_lengths;  ///< [N] i64
  std::vector<int64_t> target_lengths_host;
  int64_t blank = 0;
  bool unbatched = false;  ///< log_probs was [T, C]
};

/// Validates a ctc_loss call and converts its arguments: log_probs [T, N, C] (or [T, C]
/// unbatched) floating; targets [N, S] padded or 1-d concatenated (sum of target_lengths
/// entries; unbatched: [S]); lengths integer tensors of N entries (unbatched: 1). Throws
/// ShapeError (ranks, sizes), DTypeError, DeviceError, ValueError (blank outside [0, C),
/// input_lengths[b] > T or negative, target_lengths[b] > S or negative, a target equal to
/// blank), IndexError (a target outside [0, C)). A target longer than its input is valid: its
/// sample has nll = +inf (Note [CTC impossible samples]).
CtcArgs check_ctc(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                  const Tensor& target_lengths, int64_t blank);
/// {nll [N] (+inf where no alignment exists), log_alpha}.
std::pair<Tensor, Tensor> ctc_loss_forward(const CtcArgs& a);
/// Gradient w.r.t. log_probs [T, N, C] (or [T, C] unbatched) in out_dtype from grad_nll [N]
/// and the forward's results.
Tensor ctc_loss_backward(const CtcArgs& a, const Tensor& grad_nll, const Tensor& nll,
                         const Tensor& log_alpha, bool zero_infinity, DType out_dtype);

}  // namespace ops
}  // namespace sl
