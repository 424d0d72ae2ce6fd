// Differentiable CTC loss, as torch.nn.functional.ctc_loss (kernels: core/ops/ctc.h).
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace sl {

/// Connectionist temporal classification loss, computed in log space.
///   log_probs      [T, N, C] log-probabilities (log_softmax over C), or [T, C] unbatched
///   targets        [N, S] padded (each row's first target_lengths[b] labels count) or 1-d
///                  concatenated (sum(target_lengths) labels); unbatched: [S]
///   input_lengths  [N] integers, 0 <= input_lengths[b] <= T
///   target_lengths [N] integers, 0 <= target_lengths[b] (<= S when padded); a target longer
///                  than its input is accepted, as in PyTorch, and has an infinite loss
///   blank          the blank class, in [0, C); targets must not contain it
///   reduction      "none" ([N] losses), "sum", or "mean" (PyTorch's: each loss divided by its
///                  target length (at least 1), then the mean over the batch)
///   zero_infinity  infinite losses (no valid alignment: a target longer than its input, or
///                  repeats needing more steps than the input has) and their gradients become
///                  exactly 0
/// The gradient w.r.t. log_probs is PyTorch's (Note [CTC gradient] in core/ops/ctc.h): exact
/// for logits passed through log_softmax. A sample with an infinite loss makes "sum" and "mean"
/// +inf and, without zero_infinity, has a NaN gradient in its rows t < input_lengths[b] (0
/// beyond), as PyTorch (Note [CTC impossible samples]). Throws ShapeError (ranks, sizes,
/// concatenated length), DTypeError (non-floating log_probs, non-integer targets or lengths),
/// DeviceError, ValueError (bad reduction, blank out of range, a length negative or above its
/// bound, a blank label in targets), IndexError (a label outside [0, C)).
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank = 0,
                const std::string& reduction = "mean", bool zero_infinity = false);

/// ctc_loss with the lengths given as host vectors.
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets,
                const std::vector<int64_t>& input_lengths,
                const std::vector<int64_t>& target_lengths, int64_t blank = 0,
                const std::string& reduction = "mean", bool zero_infinity = false);

}  // namespace sl
