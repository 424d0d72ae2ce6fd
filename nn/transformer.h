// TransformerEncoderLayer, as torch.nn.TransformerEncoderLayer (PyTorch 1.13): self-attention
// and a feed-forward block, each with a residual connection, LayerNorm after (post-LN, as BERT)
// or before (pre-LN, norm_first). Submodule names match PyTorch's: self_attn, linear1, dropout,
// linear2, norm1, norm2, dropout1, dropout2.
#pragma once

#include <string>

#include "core/ops/matmul.h"
#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/normalization.h"

namespace sl::nn {

struct TransformerEncoderLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  /// "relu" or "gelu" (exact); "gelu_tanh" for the tanh approximation.
  std::string activation = "relu";
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  /// Pre-LN: x + sa(norm1(x)), x + ff(norm2(x)); otherwise post-LN: norm1(x + sa(x)), ...
  bool norm_first = false;
  TensorOptions tensor_options = {};
};

/// Throws ValueError for an unknown activation (and as MultiheadAttention for the sizes).
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerEncoderLayerOptions opts = {});
  /// src [B, L, E] (batch_first) or [L, B, E]; masks as MultiheadAttention's attn_mask and
  /// key_padding_mask.
  Tensor forward(const Tensor& src, const Tensor& src_mask,
                 const Tensor& src_key_padding_mask = Tensor(), bool is_causal = false);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }

  const TransformerEncoderLayerOptions options;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout1, dropout2;

 private:
  /// options.activation as linear_act's Activation.
  Activation activation() const;
  Tensor sa_block(const Tensor& x, const Tensor& mask, const Tensor& kpm, bool is_causal);
  Tensor ff_block(const Tensor& x);
};

}  // namespace sl::nn
