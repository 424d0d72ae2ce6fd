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
#pragma once

#include <cstdint>
#include <vector>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// Forward: nll [N] and log_alpha [N, T, 2 * S + 1] from log_probs [T, N, C] (contiguous,
/// f32 / f64), targets [N, S] (i64, padded), input_lengths / target_lengths [N] (i64), all
/// checked and on one device. nll is +inf for samples with no valid alignment.
SL_DECLARE_KERNEL(ctc_loss_forward_kernel,
                  void(const Tensor& nll, const Tensor& log_alpha, const Tensor& log_probs,
                       const Tensor& targets, const Tensor& input_lengths,
                       const Tensor& target_lengths, int64_t blank));
/// Backward: grad [T, N, C] (overwritten) as Note [CTC gradient] from grad_nll [N] and the
/// forward's nll and log_alpha.
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
/// input_lengths[b] > T, target longer than its input, target_lengths[b] > S or negative, a
/// target equal to blank), IndexError (a target outside [0, C)).
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
