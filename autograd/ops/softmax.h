// Differentiable softmax and log_softmax (stable, deterministic; see core/ops/softmax.h).
#pragma once

#include <optional>

#include "core/tensor.h"

namespace sl {

/// exp(x) / sum(exp(x)) along dim (negative dims count from the end); with `dtype`, x is
/// converted first (the gradient flows back in x's dtype). Same sizes as x. Throws IndexError
/// for a bad dim, DTypeError for integer or bool input without a floating `dtype`.
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
/// x - logsumexp(x) along dim, computed in one stable pass. Same contract as softmax.
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

}  // namespace sl
