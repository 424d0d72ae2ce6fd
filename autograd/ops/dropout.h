// Differentiable dropout, as torch.nn.functional.dropout, plus a seeded form whose mask is a
// pure function of (seed, offset) (Note [Dropout mask] in core/ops/dropout.h), e.g. to replay
// the same mask when a checkpointed segment is recomputed.
#pragma once

#include "core/random.h"
#include "core/tensor.h"

namespace sl {

/// training and 0 < p < 1: zeroes each element with probability p and scales the kept ones by
/// 1 / (1 - p); the mask comes from `gen` (the default generator when null), which advances by
/// ceil(numel / 4) Philox blocks. p == 1 gives zeros; p == 0 or !training returns input itself
/// (no random numbers drawn). The gradient is the output's mask and scale applied to the
/// incoming gradient. Throws ValueError unless 0 <= p <= 1, DTypeError for non-floating input.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true, Generator* gen = nullptr);

/// Dropout (always applied, as training=true) with the mask drawn from `state` = {seed,
/// offset} without touching any generator: equal states give equal masks, on every device.
/// Same p rules and errors as dropout.
Tensor dropout_seeded(const Tensor& input, double p, const GeneratorState& state);

}  // namespace sl
