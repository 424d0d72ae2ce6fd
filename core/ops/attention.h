// The "attention" family: the fused masked softmax at the heart of scaled dot-product
// attention (scale, boolean / additive / causal masks, softmax, and its backward in one pass
// each). The matrix products around it are the matmul family's. Not differentiable (see
// autograd/ops/attention.h).
//
// Note [Attention masks]
// Scores are viewed as [A, B, L, S] (A * B = the batch dims of q, L queries, S keys). The mask
// is broadcast to that shape and handed to kernels as a strided view (zero strides where it
// was broadcast, so a [L, S] or [N, 1, 1, S] mask is never materialised). A bool mask keeps
// the positions where it is true (torch.nn.functional.scaled_dot_product_attention's
// convention; nn.MultiheadAttention's masks mean the opposite and are inverted by the layer);
// a floating mask is added to the scaled scores; is_causal masks key j > query i (top-left
// aligned when L != S, as PyTorch). A row whose every position is masked is NaN, as in PyTorch.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// probs[a, b, i, :] = softmax(scale * scores[a, b, i, :] + mask terms) over contiguous
/// [A, B, L, S] scores / probs of one floating dtype; mask undefined or an [A, B, L, S] strided
/// view (bool, or the scores' dtype) as Note [Attention masks] describes.
SL_DECLARE_KERNEL(attention_softmax_forward_kernel,
                  void(const Tensor& probs, const Tensor& scores, const Tensor& mask,
                       bool is_causal, double scale));
/// grad_scores = scale * probs * (grad_probs - sum_j grad_probs * probs), row-wise over
/// contiguous [A, B, L, S] tensors (grad_scores is overwritten).
SL_DECLARE_KERNEL(attention_softmax_backward_kernel,
                  void(const Tensor& grad_scores, const Tensor& grad_probs, const Tensor& probs,
                       double scale));

namespace ops {

/// Checks a mask (bool or floating, same device) against scores of shape [..., L, S]: it must
/// broadcast to that shape. Throws ShapeError / DTypeError / DeviceError naming `op`.
void check_attention_mask(const char* op, const Shape& scores_shape, Device device,
                          const Tensor& mask);
/// The fused masked softmax over the last dim of scores [..., L, S] (at least 2 dims).
Tensor attention_softmax_forward(const Tensor& scores, const Tensor& mask, bool is_causal,
                                 double scale);
/// Gradient w.r.t. scores of attention_softmax_forward from its output probs.
Tensor attention_softmax_backward(const Tensor& grad_probs, const Tensor& probs, double scale);

}  // namespace ops
}  // namespace sl
