#include "nn/transformer.h"

#include "autograd/ops/matmul.h"

namespace sl::nn {

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d, int64_t h,
                                                 TransformerEncoderLayerOptions o)
    : Module("TransformerEncoderLayer"), options(o) {
  SL_CHECK(o.activation == "relu" || o.activation == "gelu" || o.activation == "gelu_tanh",
           "TransformerEncoderLayer: activation must be 'relu', 'gelu' or 'gelu_tanh', got '",
           o.activation, "'");
  SL_CHECK(o.dim_feedforward > 0, "TransformerEncoderLayer: dim_feedforward must be positive, got ",
           o.dim_feedforward);
  const TensorOptions& to = o.tensor_options;
  self_attn = register_module(
      "self_attn", std::make_shared<MultiheadAttention>(d, h, o.dropout, true, o.batch_first, to));
  linear1 = register_module("linear1", std::make_shared<Linear>(d, o.dim_feedforward, true, to));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, d, true, to));
  norm1 =
      register_module("norm1", std::make_shared<LayerNorm>(Shape{d}, o.layer_norm_eps, true, to));
  norm2 =
      register_module("norm2", std::make_shared<LayerNorm>(Shape{d}, o.layer_norm_eps, true, to));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
}

Activation TransformerEncoderLayer::activation() const {
  if (options.activation == "relu") return Activation::relu;
  return options.activation == "gelu" ? Activation::gelu : Activation::gelu_tanh;
}

Tensor TransformerEncoderLayer::sa_block(const Tensor& x, const Tensor& mask, const Tensor& kpm,
                                         bool is_causal) {
  AttentionOptions ao{
      .key_padding_mask = kpm, .need_weights = false, .attn_mask = mask, .is_causal = is_causal};
  return dropout1->forward(self_attn->forward(x, x, x, ao).first);
}

// linear1 and the activation as one op (linear_act: one cuBLASLt GEMM with the activation in its
// epilogue on CUDA; on the CPU the same ops, so the same bits, as linear1 then the activation).
Tensor TransformerEncoderLayer::ff_block(const Tensor& x) {
  Tensor h = linear_act(x, linear1->weight, linear1->bias, activation());
  return dropout2->forward(linear2->forward(dropout->forward(h)));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask,
                                        const Tensor& kpm, bool is_causal) {
  SL_CHECK(src.defined(), "TransformerEncoderLayer: the input is undefined");
  Tensor x = src;
  if (options.norm_first) {
    x = x + sa_block(norm1->forward(x), src_mask, kpm, is_causal);
    x = x + ff_block(norm2->forward(x));
  } else {
    x = norm1->forward(x + sa_block(x, src_mask, kpm, is_causal));
    x = norm2->forward(x + ff_block(x));
  }
  return x;
}

}  // namespace sl::nn
