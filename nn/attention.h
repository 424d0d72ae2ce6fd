// MultiheadAttention, as torch.nn.MultiheadAttention (PyTorch 1.13), with its parameter names
// (in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias) so weights load by name.
#pragma once

#include <utility>

#include "nn/linear.h"
#include "nn/module.h"

namespace sl::nn {

/// Masks and flags of one attention call.
struct AttentionOptions {
  /// [B, S] (or [S] unbatched): bool, true = this key is padding and is ignored; or floating,
  /// added to the scores.
  Tensor key_padding_mask;
  /// Return the attention weights (second result); otherwise it is undefined.
  bool need_weights = true;
  /// [L, S] or [B * num_heads, L, S]: bool, true = not allowed to attend; or floating, added to
  /// the scores (e.g. -inf above the diagonal for causal attention).
  Tensor attn_mask;
  /// Weights averaged over heads [B, L, S]; else per head [B, num_heads, L, S].
  bool average_attn_weights = true;
  /// Adds a causal mask (query i sees keys 0..i), alone or together with attn_mask.
  bool is_causal = false;
};

/// Scaled dot-product attention over num_heads heads of size embed_dim / num_heads:
///   out = out_proj(concat_h softmax(q_h k_h^T / sqrt(d) + masks) v_h), q/k/v = in projections.
/// Inputs are [B, L, E] (batch_first) or [L, B, E], or unbatched [L, E]. Attention dropout
/// applies in training only. A query whose keys are all masked gets NaN, as in PyTorch.
/// Masks merge as in PyTorch 2.x (`_canonical_mask`, then attn_mask + key_padding_mask): each
/// bool mask becomes an additive one (-inf where true) and the masks are added. PyTorch 1.13
/// differs only for masks of different kinds: with a bool attn_mask it ORs the masks (a float
/// key_padding_mask then hides every key where it is nonzero), and with a float attn_mask it
/// fills the bool key_padding_mask's keys with -inf (a +inf score there gives -inf, here NaN).
/// Init as PyTorch: in_proj_weight xavier_uniform, biases 0, out_proj.weight Linear's default.
/// Throws ValueError when embed_dim is not divisible by num_heads; forward throws ShapeError for
/// inputs or masks whose shapes do not fit, DTypeError for an integer mask.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool batch_first = false, TensorOptions opts = {});
  /// (output [like query], weights or undefined).
  std::pair<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const AttentionOptions& opts = {});
  /// Self-attention without masks, output only (for Sequential).
  Tensor forward(const Tensor& x) override;
  void reset_parameters();

  const int64_t embed_dim, num_heads, head_dim;
  const double dropout;
  const bool batch_first;
  Tensor in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;
};

/// A bool [L, S] mask that is true above the diagonal (the positions causal attention hides).
Tensor causal_mask(int64_t L, int64_t S, Device device = kCPU);

}  // namespace sl::nn
