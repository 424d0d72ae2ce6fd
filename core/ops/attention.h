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
/// view (bool, or the scores' dtype) as Note [Attention masks] describes. With is_causal, row i
/// is query i + causal_offset (causal_offset >= 0): keys j > i + causal_offset are masked, so
/// that a block of rows starting at query r0 is computed with causal_offset = r0.
SL_DECLARE_KERNEL(attention_softmax_forward_kernel,
                  void(const Tensor& probs, const Tensor& scores, const Tensor& mask,
                       bool is_causal, double scale, int64_t causal_offset));
/// grad_scores = scale * probs * (grad_probs - sum_j grad_probs * probs), row-wise over
/// contiguous [A, B, L, S] tensors (grad_scores is overwritten).
SL_DECLARE_KERNEL(attention_softmax_backward_kernel,
                  void(const Tensor& grad_scores, const Tensor& grad_probs, const Tensor& probs,
                       double scale));

// Note [Attention row statistics]
// The blocked fused path (Note [Fused attention]) keeps, per query row, the softmax's maximum m
// and inverse sum z = 1 / sum_j exp(y_j - m), where y = scale * scores + mask terms: [A, B, L, 2]
// values, a sliver of the probabilities' size. With them the backward recomputes each block's
// probabilities in one pass, p_j = exp(y_j - m) * z, the forward's very bits (the same
// exponential loop), instead of a whole softmax (max, exponentials and sum, normalisation).
// The row dot product the softmax backward needs, sum_j dP_j p_j, equals dO . O for the row's
// output O and output gradient dO (FlashAttention, arXiv 2205.14135, section B.2), an
// E-element sum instead of an S-element one, so that pass goes too. A fully masked row has
// m = -inf (and NaN probabilities, as in the forward). Devices without these kernels (CUDA for
// now: its forward is one kernel that returns no statistics) take the plain recomputation.

/// As attention_softmax_forward_kernel, and also writes each row's statistics (Note [Attention
/// row statistics]) to stats, an [A, B, L, 2] strided view of the scores' dtype. probs may be
/// the scores themselves (computed in place).
SL_DECLARE_KERNEL(attention_softmax_stats_forward_kernel,
                  void(const Tensor& probs, const Tensor& stats, const Tensor& scores,
                       const Tensor& mask, bool is_causal, double scale, int64_t causal_offset));
/// probs = the probabilities of the rows whose statistics attention_softmax_stats_forward_kernel
/// wrote (same scores, mask, is_causal, scale and causal_offset: the same bits), then
/// grad_scores = scale * probs * (grad_probs - dot) with dot an [A, B, L] strided view of each
/// row's sum_j grad_probs * probs. probs may be the scores and grad_scores the grad_probs.
SL_DECLARE_KERNEL(attention_softmax_recompute_backward_kernel,
                  void(const Tensor& probs, const Tensor& grad_scores, const Tensor& scores,
                       const Tensor& grad_probs, const Tensor& mask, const Tensor& stats,
                       const Tensor& dot, bool is_causal, double scale, int64_t causal_offset));

/// out = softmax(scale * q k^T + mask terms) v in one pass over contiguous q [A, B, L, E],
/// k [A, B, S, E], v [A, B, S, Ev] and out [A, B, L, Ev] of one floating dtype (L, S >= 1), the
/// mask as for attention_softmax_forward_kernel. Returns false, having written nothing, when the
/// backend's kernel does not take these dtypes or sizes: generic code then computes the blocked
/// form (Note [Fused attention]).
SL_DECLARE_KERNEL(attention_fused_forward_kernel,
                  bool(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& mask, bool is_causal, double scale));

namespace ops {

// Note [Fused attention]
// scaled dot-product attention that never holds the whole [..., L, S] probability matrix, in
// the forward or between forward and backward. The forward is one kernel where the device has
// one (CUDA: Note [Fused attention kernel]); elsewhere, and for what that kernel does not take,
// it is computed in blocks of queries (and of the leading batch dim): per block the scores, the
// attention softmax and the product with v, with at most attention_block_elements() scores
// alive at once. Only q, k, v, the mask, the output and each row's softmax statistics (Note
// [Attention row statistics]) are kept for the backward, which recomputes each block's
// probabilities and then forms
//   dv += p^T dout,  ds = softmax_backward(dout v^T, p),  dq = ds k,  dk += ds^T q
// (FlashAttention's backward, arXiv 2205.14135, by blocks of queries; dk and dv accumulate in
// float32 for 16-bit inputs). The cost is a second q k^T product in the backward. With
// is_causal a block of queries reads only the keys up to its last query. Rows are independent,
// so the forward gives the unfused path's values up to the rounding of the products (the same
// bits when everything is one block); dk and dv are summed in another order.

/// Checks the fused path's inputs: q [..., L, E], k [..., S, E], v [..., S, Ev] with identical
/// batch dims, one floating dtype, one device; mask as check_attention_mask. Throws ShapeError /
/// DTypeError / DeviceError naming `op`.
void check_fused_attention_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& mask);
/// softmax(scale * q k^T + mask terms) v -> [..., L, Ev] without the probabilities (Note [Fused
/// attention]); inputs as check_fused_attention_inputs.
Tensor attention_fused_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& mask, bool is_causal, double scale);
/// The fused forward's output, and the rows' statistics [..., L, 2] of Note [Attention row
/// statistics] where the blocked form computed them (float32 / float64 on a device with the
/// statistics kernels); stats is undefined otherwise.
struct AttentionForward {
  Tensor out, stats;
};
/// attention_fused_forward, keeping the rows' statistics for attention_fused_backward.
AttentionForward attention_fused_forward_with_stats(const Tensor& q, const Tensor& k,
                                                    const Tensor& v, const Tensor& mask,
                                                    bool is_causal, double scale);
/// Gradients of attention_fused_forward w.r.t. q, k and v (the mask is a constant).
struct AttentionGrads {
  Tensor q, k, v;
};
/// Recomputes the probabilities block by block (Note [Fused attention]); grad_out [..., L, Ev].
/// Given the forward's output and statistics (attention_fused_forward_with_stats, both defined)
/// it recomputes them in one pass from the statistics (Note [Attention row statistics]); out and
/// stats must then have the shapes and dtype that forward gave (ShapeError / DTypeError).
AttentionGrads attention_fused_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const Tensor& mask, bool is_causal,
                                        double scale, const Tensor& out = Tensor(),
                                        const Tensor& stats = Tensor());
/// The most score elements one block of the blocked form holds (default 4 Mi elements: 16 MiB
/// of float32 scores; a block also holds probabilities, and in the backward two more of that
/// size).
int64_t attention_block_elements();
/// Sets attention_block_elements() (>= 1; ValueError otherwise); returns the previous value.
/// Tests use it to force many blocks on small inputs.
int64_t set_attention_block_elements(int64_t n);

/// Checks a mask (bool or floating, same device) against scores of shape [..., L, S]: it must
/// broadcast to that shape. Throws ShapeError / DTypeError / DeviceError naming `op`.
void check_attention_mask(const char* op, const Shape& scores_shape, Device device,
                          const Tensor& mask);
/// The fused masked softmax over the last dim of scores [..., L, S] (at least 2 dims). Row i
/// of the scores is query i + causal_offset for the causal mask (see the kernel above); throws
/// ValueError when causal_offset < 0.
Tensor attention_softmax_forward(const Tensor& scores, const Tensor& mask, bool is_causal,
                                 double scale, int64_t causal_offset = 0);
/// Gradient w.r.t. scores of attention_softmax_forward from its output probs.
Tensor attention_softmax_backward(const Tensor& grad_probs, const Tensor& probs, double scale);

}  // namespace ops
}  // namespace sl
