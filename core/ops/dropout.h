// The "dropout" family: masks drawn from the Philox stream (Note [Random streams]), so the CPU
// and CUDA kernels keep exactly the same elements for the same (seed, offset). Not
// differentiable (see autograd/ops/dropout.h).
//
// Note [Dropout mask]
// Element i (row-major over the input's sizes) is kept iff
//   philox_uniform_f32(seed, offset, i) < 1 - p     (computed in float, as RandomDist::bernoulli)
// and a kept element is scaled by 1 / (1 - p). A dropout call reserves ceil(numel / 4) Philox
// blocks from its generator, like a bernoulli_ fill of the same size, so the mask equals
// `bernoulli_(1 - p)` on a tensor of the input's shape drawn from the same generator state.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/random.h"
#include "core/tensor.h"

namespace sl {

/// out = keep ? input * scale : 0 and mask = keep (bool), for contiguous out / mask / input of
/// the same sizes; keep as Note [Dropout mask] says with threshold 1 - p; scale = 1 / (1 - p).
SL_DECLARE_KERNEL(dropout_forward_kernel,
                  void(const Tensor& out, const Tensor& mask, const Tensor& input, double p,
                       double scale, uint64_t seed, uint64_t offset));
/// grad_input = mask ? grad_out * scale : 0 (contiguous, same sizes).
SL_DECLARE_KERNEL(dropout_backward_kernel, void(const Tensor& grad_input, const Tensor& grad_out,
                                                const Tensor& mask, double scale));

namespace ops {

/// Throws ValueError unless 0 <= p <= 1; `op` names the caller.
void check_dropout_p(const char* op, double p);
/// {out, mask} with the mask drawn from (seed, offset) (Note [Dropout mask]); p < 1. Floating
/// inputs only (DTypeError otherwise).
std::pair<Tensor, Tensor> dropout_forward(const Tensor& input, double p, uint64_t seed,
                                          uint64_t offset);
Tensor dropout_backward(const Tensor& grad_out, const Tensor& mask, double p);
/// Philox blocks a dropout over n elements consumes (ceil(n / 4)).
inline uint64_t dropout_blocks(int64_t n) {
  return (static_cast<uint64_t>(n) + 3) / 4;
}

}  // namespace ops
}  // namespace sl
