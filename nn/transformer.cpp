#include "nn/transformer.h"

#include <cmath>

#include "autograd/ops/matmul.h"
#include "core/creation.h"
#include "nn/init.h"

namespace sl::nn {

namespace {

void check_layer_options(const char* op, const TransformerLayerOptions& o) {
  SL_CHECK(o.activation == "relu" || o.activation == "gelu" || o.activation == "gelu_tanh", op,
           ": activation must be 'relu', 'gelu' or 'gelu_tanh', got '", o.activation, "'");
  SL_CHECK(o.dim_feedforward > 0, op, ": dim_feedforward must be positive, got ",
           o.dim_feedforward);
}

/// options.activation as linear_act's Activation (validated by check_layer_options).
Activation activation_of(const TransformerLayerOptions& o) {
  if (o.activation == "relu") return Activation::relu;
  return o.activation == "gelu" ? Activation::gelu : Activation::gelu_tanh;
}

std::shared_ptr<LayerNorm> layer_norm(int64_t d, const TransformerLayerOptions& o) {
  return std::make_shared<LayerNorm>(Shape{d}, o.layer_norm_eps, true, o.tensor_options);
}

/// linear1 and the activation as one op (linear_act: one cuBLASLt GEMM with the activation in
/// its epilogue on CUDA; on the CPU the same ops, so the same bits, as linear1 then the
/// activation), then dropout, linear2 and the block's own dropout.
Tensor feed_forward(const Tensor& x, const TransformerLayerOptions& o, Linear& linear1,
                    Dropout& dropout, Linear& linear2, Dropout& block_dropout) {
  Tensor h = linear_act(x, linear1.weight, linear1.bias, activation_of(o));
  return block_dropout.forward(linear2.forward(dropout.forward(h)));
}

/// The clone of Note [Cloning transformer layers]: a layer built from the prototype's d_model,
/// nhead and options, on its device and dtype, then given its state, requires_grad flags and
/// training modes.
template <class L>
std::shared_ptr<L> clone_layer(const L& proto) {
  TransformerLayerOptions o = proto.options;
  const Tensor& w = proto.self_attn->in_proj_weight;
  o.tensor_options.dtype = w.dtype();
  o.tensor_options.device = w.device();
  auto copy = std::make_shared<L>(proto.self_attn->embed_dim, proto.self_attn->num_heads, o);
  copy->load_state_dict(proto.state_dict());  // copies: the copy keeps its own memory
  auto src = proto.named_parameters(), dst = copy->named_parameters();
  for (size_t i = 0; i < src.size(); ++i)
    dst[i].second.requires_grad_(src[i].second.requires_grad());
  // named_modules lists a parent before its children and train() recurses, so setting each in
  // order leaves every module with its prototype's mode.
  auto msrc = proto.named_modules(), mdst = copy->named_modules();
  for (size_t i = 0; i < msrc.size(); ++i) mdst[i].second->train(msrc[i].second->is_training());
  return copy;
}

/// Which layout a batch-size message refers to.
const char* layout(bool batch_first) {
  return batch_first ? "batch_first=true" : "batch_first=false";
}

}  // namespace

// ---- TransformerEncoderLayer ----------------------------------------------------------------

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d, int64_t h,
                                                 TransformerEncoderLayerOptions o)
    : Module("TransformerEncoderLayer"), options(o) {
  check_layer_options("TransformerEncoderLayer", o);
  const TensorOptions& to = o.tensor_options;
  self_attn = register_module(
      "self_attn", std::make_shared<MultiheadAttention>(d, h, o.dropout, true, o.batch_first, to));
  linear1 = register_module("linear1", std::make_shared<Linear>(d, o.dim_feedforward, true, to));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, d, true, to));
  norm1 = register_module("norm1", layer_norm(d, o));
  norm2 = register_module("norm2", layer_norm(d, o));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
}

std::shared_ptr<TransformerEncoderLayer> TransformerEncoderLayer::clone() const {
  return clone_layer(*this);
}

Tensor TransformerEncoderLayer::sa_block(const Tensor& x, const Tensor& mask, const Tensor& kpm,
                                         bool is_causal) {
  AttentionOptions ao{
      .key_padding_mask = kpm, .need_weights = false, .attn_mask = mask, .is_causal = is_causal};
  return dropout1->forward(self_attn->forward(x, x, x, ao).first);
}

Tensor TransformerEncoderLayer::ff_block(const Tensor& x) {
  return feed_forward(x, options, *linear1, *dropout, *linear2, *dropout2);
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

// ---- TransformerDecoderLayer ----------------------------------------------------------------

TransformerDecoderLayer::TransformerDecoderLayer(int64_t d, int64_t h,
                                                 TransformerDecoderLayerOptions o)
    : Module("TransformerDecoderLayer"), options(o) {
  check_layer_options("TransformerDecoderLayer", o);
  const TensorOptions& to = o.tensor_options;
  auto mha = [&] {
    return std::make_shared<MultiheadAttention>(d, h, o.dropout, true, o.batch_first, to);
  };
  self_attn = register_module("self_attn", mha());
  multihead_attn = register_module("multihead_attn", mha());
  linear1 = register_module("linear1", std::make_shared<Linear>(d, o.dim_feedforward, true, to));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, d, true, to));
  norm1 = register_module("norm1", layer_norm(d, o));
  norm2 = register_module("norm2", layer_norm(d, o));
  norm3 = register_module("norm3", layer_norm(d, o));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(o.dropout));
}

std::shared_ptr<TransformerDecoderLayer> TransformerDecoderLayer::clone() const {
  return clone_layer(*this);
}

Tensor TransformerDecoderLayer::sa_block(const Tensor& x, const Tensor& mask, const Tensor& kpm,
                                         bool is_causal) {
  AttentionOptions ao{
      .key_padding_mask = kpm, .need_weights = false, .attn_mask = mask, .is_causal = is_causal};
  return dropout1->forward(self_attn->forward(x, x, x, ao).first);
}

Tensor TransformerDecoderLayer::mha_block(const Tensor& x, const Tensor& mem, const Tensor& mask,
                                          const Tensor& kpm) {
  AttentionOptions ao{.key_padding_mask = kpm, .need_weights = false, .attn_mask = mask};
  return dropout2->forward(multihead_attn->forward(x, mem, mem, ao).first);
}

Tensor TransformerDecoderLayer::ff_block(const Tensor& x) {
  return feed_forward(x, options, *linear1, *dropout, *linear2, *dropout3);
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory,
                                        const Tensor& tgt_mask, const Tensor& memory_mask,
                                        const Tensor& tgt_kpm, const Tensor& memory_kpm,
                                        bool tgt_is_causal) {
  const char* op = "TransformerDecoderLayer";
  SL_CHECK(tgt.defined() && memory.defined(), op, ": tgt and memory must be defined");
  const int64_t E = self_attn->embed_dim;
  SL_CHECK_SHAPE((tgt.dim() == 2 || tgt.dim() == 3) && memory.dim() == tgt.dim(), op,
                 ": tgt and memory must both be 3-d (batched) or both 2-d, got tgt ",
                 shape_str(tgt.sizes()), " and memory ", shape_str(memory.sizes()));
  SL_CHECK_SHAPE(tgt.size(-1) == E && memory.size(-1) == E, op,
                 ": the last dim of tgt and memory must be d_model=", E, ", got tgt ",
                 shape_str(tgt.sizes()), " and memory ", shape_str(memory.sizes()));
  if (tgt.dim() == 3) {
    const int64_t bd = options.batch_first ? 0 : 1;
    SL_CHECK_SHAPE(tgt.size(bd) == memory.size(bd), op,
                   ": tgt and memory must have one batch size (dim ", bd, ", ",
                   layout(options.batch_first), "), got tgt ", shape_str(tgt.sizes()),
                   " and memory ", shape_str(memory.sizes()));
  }
  Tensor x = tgt;
  if (options.norm_first) {
    x = x + sa_block(norm1->forward(x), tgt_mask, tgt_kpm, tgt_is_causal);
    x = x + mha_block(norm2->forward(x), memory, memory_mask, memory_kpm);
    x = x + ff_block(norm3->forward(x));
  } else {
    x = norm1->forward(x + sa_block(x, tgt_mask, tgt_kpm, tgt_is_causal));
    x = norm2->forward(x + mha_block(x, memory, memory_mask, memory_kpm));
    x = norm3->forward(x + ff_block(x));
  }
  return x;
}

// ---- TransformerEncoder / TransformerDecoder --------------------------------------------------

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& encoder_layer,
                                       int64_t num_layers_, std::shared_ptr<Module> norm_)
    : Module("TransformerEncoder"), num_layers(num_layers_) {
  SL_CHECK(num_layers_ >= 0, "TransformerEncoder: num_layers must be >= 0, got ", num_layers_);
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers_; ++i) layers->push_back(encoder_layer.clone());
  if (norm_) norm = register_module("norm", std::move(norm_));
}

std::shared_ptr<TransformerEncoderLayer> TransformerEncoder::layer(size_t i) const {
  return layers->at<TransformerEncoderLayer>(i);
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask, const Tensor& kpm,
                                   bool is_causal) {
  SL_CHECK(src.defined(), "TransformerEncoder: the input is undefined");
  Tensor x = src;
  for (size_t i = 0; i < layers->size(); ++i) x = layer(i)->forward(x, mask, kpm, is_causal);
  return norm ? norm->forward(x) : x;
}

TransformerDecoder::TransformerDecoder(const TransformerDecoderLayer& decoder_layer,
                                       int64_t num_layers_, std::shared_ptr<Module> norm_)
    : Module("TransformerDecoder"), num_layers(num_layers_) {
  SL_CHECK(num_layers_ >= 0, "TransformerDecoder: num_layers must be >= 0, got ", num_layers_);
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers_; ++i) layers->push_back(decoder_layer.clone());
  if (norm_) norm = register_module("norm", std::move(norm_));
}

std::shared_ptr<TransformerDecoderLayer> TransformerDecoder::layer(size_t i) const {
  return layers->at<TransformerDecoderLayer>(i);
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                   const Tensor& memory_mask, const Tensor& tgt_kpm,
                                   const Tensor& memory_kpm, bool tgt_is_causal) {
  SL_CHECK(tgt.defined() && memory.defined(), "TransformerDecoder: tgt and memory must be defined");
  Tensor x = tgt;
  for (size_t i = 0; i < layers->size(); ++i)
    x = layer(i)->forward(x, memory, tgt_mask, memory_mask, tgt_kpm, memory_kpm, tgt_is_causal);
  return norm ? norm->forward(x) : x;
}

// ---- Transformer ------------------------------------------------------------------------------

Transformer::Transformer(int64_t d, int64_t h, int64_t num_encoder_layers,
                         int64_t num_decoder_layers, TransformerLayerOptions o)
    : Module("Transformer"), d_model(d), nhead(h), batch_first(o.batch_first) {
  encoder = register_module(
      "encoder", std::make_shared<TransformerEncoder>(TransformerEncoderLayer(d, h, o),
                                                      num_encoder_layers, layer_norm(d, o)));
  decoder = register_module(
      "decoder", std::make_shared<TransformerDecoder>(TransformerDecoderLayer(d, h, o),
                                                      num_decoder_layers, layer_norm(d, o)));
  for (Tensor& p : parameters())
    if (p.dim() > 1) init::xavier_uniform_(p);
}

Tensor Transformer::generate_square_subsequent_mask(int64_t sz, Device device) {
  SL_CHECK(sz >= 0, "Transformer::generate_square_subsequent_mask: sz must be >= 0, got ", sz);
  return zeros({sz, sz}, {.device = device}).masked_fill(causal_mask(sz, sz, device), -INFINITY);
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask,
                            const Tensor& tgt_mask, const Tensor& memory_mask,
                            const Tensor& src_kpm, const Tensor& tgt_kpm,
                            const Tensor& memory_kpm) {
  const char* op = "Transformer";
  SL_CHECK(src.defined() && tgt.defined(), op, ": src and tgt must be defined");
  SL_CHECK_SHAPE((src.dim() == 2 || src.dim() == 3) && tgt.dim() == src.dim(), op,
                 ": src and tgt must both be 3-d (batched) or both 2-d, got src ",
                 shape_str(src.sizes()), " and tgt ", shape_str(tgt.sizes()));
  if (src.dim() == 3) {
    const int64_t bd = batch_first ? 0 : 1;
    SL_CHECK_SHAPE(src.size(bd) == tgt.size(bd), op,
                   ": the batch number of src and tgt must be equal (dim ", bd, ", ",
                   layout(batch_first), "), got src ", shape_str(src.sizes()), " and tgt ",
                   shape_str(tgt.sizes()));
  }
  SL_CHECK_SHAPE(src.size(-1) == d_model && tgt.size(-1) == d_model, op,
                 ": the feature number of src and tgt must be equal to d_model=", d_model,
                 ", got src ", shape_str(src.sizes()), " and tgt ", shape_str(tgt.sizes()));
  Tensor memory = encoder->forward(src, src_mask, src_kpm);
  return decoder->forward(tgt, memory, tgt_mask, memory_mask, tgt_kpm, memory_kpm);
}

}  // namespace sl::nn
