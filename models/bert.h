// BERT (Devlin et al., arXiv 1810.04805) as Hugging Face transformers 4.30 builds it
// (transformers/models/bert/modeling_bert.py): every module, parameter and buffer carries HF's
// name, so an HF checkpoint's state dict loads strictly by name:
//
//   BertModel                     embeddings.{position_ids, word_embeddings, position_embeddings,
//                                 token_type_embeddings, LayerNorm}, encoder.layer.N.{attention.
//                                 self.{query,key,value}, attention.output.{dense,LayerNorm},
//                                 intermediate.dense, output.{dense,LayerNorm}}, pooler.dense
//   BertForMaskedLM               bert.* (no pooler), cls.predictions.{bias, transform.{dense,
//                                 LayerNorm}, decoder} with decoder.weight TIED to
//                                 bert.embeddings.word_embeddings.weight and decoder.bias to
//                                 cls.predictions.bias (Note [BERT tied weights])
//   BertForSequenceClassification bert.* (with pooler), dropout, classifier
//
// Registered factories (models/registry.h): "bert_base" (BertForMaskedLM with bert-base-uncased's
// configuration, 110M parameters), "bert_mini_mlm" (BertForMaskedLM: 4 layers, hidden 256,
// 4 heads, intermediate 1024, bert-base's 30522-token vocabulary and 512 positions; 11.2M
// parameters, small enough to train on a CPU) and "bert_mini_cls" (the same encoder with a
// 2-label BertForSequenceClassification head). Their one-tensor forward(input_ids) runs without
// token types or mask.
//
// Note [BERT tied weights]
// HF ties the MLM decoder to the input embeddings by making both modules hold one Parameter. Here
// the decoder Linear's `weight` member and its registry slot are pointed at the word embeddings'
// TensorImpl (and its `bias` at cls.predictions.bias), so: named_parameters()/parameters() list
// each tied tensor once, under its first name (bert.embeddings.word_embeddings.weight,
// cls.predictions.bias), as PyTorch does; state_dict() holds it under both names, as HF's does;
// load_state_dict writes both names into the one tensor (equal values in an HF dict); gradients
// of both uses accumulate in the one .grad(); Module::to() converts it once (set_data in place).
#pragma once

#include <optional>
#include <string>

#include "nn/containers.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/normalization.h"

namespace sl::models {

/// HF's BertConfig (the fields BERT's modules read). Defaults are bert-base-uncased's.
struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  /// "gelu" (erf), "gelu_new" or "gelu_pytorch_tanh" (the tanh approximation), "relu".
  std::string hidden_act = "gelu";
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;
  /// BertForSequenceClassification's outputs.
  int64_t num_labels = 2;
  /// Dropout before the classifier; hidden_dropout_prob when unset (as HF).
  std::optional<double> classifier_dropout;

  /// Throws ValueError naming the field and its value: sizes < 1, hidden_size not divisible by
  /// num_attention_heads, an unknown hidden_act, probabilities outside [0, 1), pad_token_id
  /// outside [0, vocab_size), initializer_range < 0, layer_norm_eps <= 0.
  void validate() const;
};

/// bert-base-uncased's configuration (= BertConfig{}).
BertConfig bert_base_config();
/// "bert_mini": 4 layers, hidden 256, 4 heads, intermediate 1024, vocabulary 30522.
BertConfig bert_mini_config();

/// Word + position + token-type embeddings, LayerNorm, dropout. Buffers as HF 4.30:
/// position_ids int64 [1, max_position_embeddings] = 0..P-1 (persistent: in the state dict) and
/// token_type_ids int64 zeros [1, P] (non-persistent).
class BertEmbeddings : public nn::Module {
 public:
  explicit BertEmbeddings(const BertConfig& config);
  /// input_ids int64 [B, L]; token_type_ids int64 [B, L] or undefined (all type 0) ->
  /// [B, L, hidden]. Throws DTypeError for non-int64 ids, ShapeError for other ranks or
  /// token_type_ids of another shape, ValueError for L > max_position_embeddings, IndexError
  /// naming the first id (or token type) outside [0, vocab_size) ([0, type_vocab_size)).
  Tensor forward(const Tensor& input_ids, const Tensor& token_type_ids);
  /// forward(input_ids, undefined).
  Tensor forward(const Tensor& input_ids) override;

  const BertConfig config;
  std::shared_ptr<nn::Embedding> word_embeddings, position_embeddings, token_type_embeddings;
  std::shared_ptr<nn::LayerNorm> LayerNorm;  // HF's (TensorFlow's) spelling
  std::shared_ptr<nn::Dropout> dropout;
  Tensor position_ids, token_type_ids;
};

/// query/key/value projections and scaled dot-product attention over num_attention_heads heads
/// (sl::scaled_dot_product_attention; attention dropout in training only).
class BertSelfAttention : public nn::Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using nn::Module::forward;
  explicit BertSelfAttention(const BertConfig& config);
  /// hidden [B, L, H]; additive_mask undefined or floating, broadcastable to [B, heads, L, L]
  /// (BertModel passes [B, 1, 1, L]) -> context [B, L, H].
  Tensor forward(const Tensor& hidden, const Tensor& additive_mask);

  const int64_t num_attention_heads, attention_head_size;
  std::shared_ptr<nn::Linear> query, key, value;
  std::shared_ptr<nn::Dropout> dropout;  // holds the probability; applied inside the attention
};

/// LayerNorm(dropout(dense(x)) + residual): BertSelfOutput (in = H) and BertOutput
/// (in = intermediate_size) share this shape; type_name tells them apart.
class BertResidualOutput : public nn::Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using nn::Module::forward;
  BertResidualOutput(const char* type_name, int64_t in_features, const BertConfig& config);
  /// x [B, L, in_features], residual [B, L, H] -> [B, L, H].
  Tensor forward(const Tensor& x, const Tensor& residual);

  std::shared_ptr<nn::Linear> dense;
  std::shared_ptr<nn::LayerNorm> LayerNorm;
  std::shared_ptr<nn::Dropout> dropout;
};

/// self (BertSelfAttention) then output (BertSelfOutput) with the input as residual.
class BertAttention : public nn::Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using nn::Module::forward;
  explicit BertAttention(const BertConfig& config);
  Tensor forward(const Tensor& hidden, const Tensor& additive_mask);
  std::shared_ptr<BertSelfAttention> self;
  std::shared_ptr<BertResidualOutput> output;
};

/// act(dense(x)): [B, L, H] -> [B, L, intermediate_size].
class BertIntermediate : public nn::Module {
 public:
  explicit BertIntermediate(const BertConfig& config);
  Tensor forward(const Tensor& x) override;
  const std::string hidden_act;
  std::shared_ptr<nn::Linear> dense;
};

/// attention, intermediate, output (post-LayerNorm transformer layer).
class BertLayer : public nn::Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using nn::Module::forward;
  explicit BertLayer(const BertConfig& config);
  Tensor forward(const Tensor& hidden, const Tensor& additive_mask);
  std::shared_ptr<BertAttention> attention;
  std::shared_ptr<BertIntermediate> intermediate;
  std::shared_ptr<BertResidualOutput> output;
};

/// `layer`: a ModuleList of num_hidden_layers BertLayers, run in order.
class BertEncoder : public nn::Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using nn::Module::forward;
  explicit BertEncoder(const BertConfig& config);
  Tensor forward(const Tensor& hidden, const Tensor& additive_mask);
  std::shared_ptr<nn::ModuleList> layer;
  /// In training mode with grad on, run each layer under activation checkpointing
  /// (nn::checkpoint, Note [Checkpoint recompute]): only the layers' inputs are kept for
  /// backward and each layer is recomputed there, dropout masks included, so outputs and
  /// gradients are bit-identical to the plain run. HF's `encoder.gradient_checkpointing`.
  bool gradient_checkpointing = false;
};

/// tanh(dense(hidden[:, 0])): [B, L, H] -> [B, H].
class BertPooler : public nn::Module {
 public:
  explicit BertPooler(const BertConfig& config);
  Tensor forward(const Tensor& hidden) override;
  std::shared_ptr<nn::Linear> dense;
};

/// What BertModel returns: sequence_output [B, L, H] and pooled_output [B, H] (undefined
/// without a pooler).
struct BertModelOutput {
  Tensor sequence_output, pooled_output;
};

/// HF's extended attention mask: attention_mask [B, L] of 1 (attend) / 0 (padding), any
/// integer, bool or floating dtype, -> (1 - mask) * lowest(dtype) as `dtype` [B, 1, 1, L], added
/// to the attention scores (a padded key gets a weight of exactly 0). Throws ShapeError unless
/// attention_mask is [batch, length], DTypeError unless `dtype` is floating.
Tensor bert_extended_attention_mask(const Tensor& attention_mask, int64_t batch, int64_t length,
                                    DType dtype);

/// The BERT encoder. Initialised as HF (init_bert_weights).
class BertModel : public nn::Module {
 public:
  /// Throws ValueError from config.validate(). init_weights: apply init_bert_weights (the heads
  /// pass false and initialise the whole model once).
  explicit BertModel(const BertConfig& config, bool add_pooling_layer = true,
                     bool init_weights = true);
  /// input_ids int64 [B, L]; token_type_ids int64 [B, L] or undefined (type 0); attention_mask
  /// [B, L] of 1/0 or undefined (attend everywhere). Errors: those of BertEmbeddings::forward
  /// and bert_extended_attention_mask.
  BertModelOutput forward(const Tensor& input_ids, const Tensor& token_type_ids,
                          const Tensor& attention_mask);
  /// The sequence output of forward(input_ids, {}, {}).
  Tensor forward(const Tensor& input_ids) override;
  /// Turns activation checkpointing of every encoder layer on or off (see
  /// BertEncoder::gradient_checkpointing), as HF's gradient_checkpointing_enable(): about one
  /// layer's activations kept at a time instead of all of them, for one more forward per layer.
  void gradient_checkpointing_enable(bool on = true) { encoder->gradient_checkpointing = on; }

  const BertConfig config;
  std::shared_ptr<BertEmbeddings> embeddings;
  std::shared_ptr<BertEncoder> encoder;
  std::shared_ptr<BertPooler> pooler;  // null without pooling layer
};

/// HF's _init_weights over every module of `root`: Linear and Embedding weights
/// N(0, initializer_range), Linear biases 0, Embedding padding rows 0, LayerNorm weight 1 and
/// bias 0. A tensor shared by several modules (tied) is drawn once, at its first module in
/// apply() order (so the tied MLM decoder keeps the word embeddings' zero padding row).
void init_bert_weights(nn::Module& root, double initializer_range);

/// dense, activation (config.hidden_act), LayerNorm: [.., H] -> [.., H].
class BertPredictionHeadTransform : public nn::Module {
 public:
  explicit BertPredictionHeadTransform(const BertConfig& config);
  Tensor forward(const Tensor& x) override;
  const std::string hidden_act;
  std::shared_ptr<nn::Linear> dense;
  std::shared_ptr<nn::LayerNorm> LayerNorm;
};

/// transform, then decoder (Linear H -> vocab, whose bias is this module's `bias` parameter).
class BertLMPredictionHead : public nn::Module {
 public:
  explicit BertLMPredictionHead(const BertConfig& config);
  Tensor forward(const Tensor& x) override;
  Tensor bias;
  std::shared_ptr<BertPredictionHeadTransform> transform;
  std::shared_ptr<nn::Linear> decoder;
};

/// HF's BertOnlyMLMHead: `predictions`.
class BertOnlyMLMHead : public nn::Module {
 public:
  explicit BertOnlyMLMHead(const BertConfig& config);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<BertLMPredictionHead> predictions;
};

/// BERT with the masked-language-model head; decoder tied (Note [BERT tied weights]).
class BertForMaskedLM : public nn::Module {
 public:
  /// Throws ValueError from config.validate(). init_weights = false skips init_bert_weights
  /// (the layers keep their PyTorch-default init): for callers that load a checkpoint next, as
  /// HF's from_pretrained skips it; drawing bert-base's 110M normals takes seconds.
  explicit BertForMaskedLM(const BertConfig& config, bool init_weights = true);
  /// Inputs as BertModel::forward -> logits [B, L, vocab_size].
  Tensor forward(const Tensor& input_ids, const Tensor& token_type_ids,
                 const Tensor& attention_mask);
  /// forward(input_ids, {}, {}).
  Tensor forward(const Tensor& input_ids) override;
  /// The logits at some positions only: rows `positions` (int64 [M], flat indices into the
  /// B * L positions of input_ids, row-major) of forward(input_ids), as [M, vocab_size], without
  /// computing the others. Pre-training predicts about 15% of the positions, and the decoder
  /// (hidden x vocab) is most of a small BERT's work, so this is the training path of the MLM
  /// job. Throws as forward, and IndexError for a position outside [0, B * L).
  Tensor logits_at(const Tensor& input_ids, const Tensor& positions);
  /// Points cls.predictions.decoder's weight at the word embeddings and its bias at
  /// cls.predictions.bias (done by the constructor; call again after replacing either tensor's
  /// handle).
  void tie_weights();

  const BertConfig config;
  std::shared_ptr<BertModel> bert;
  std::shared_ptr<BertOnlyMLMHead> cls;
};

/// BERT with a classifier over the pooled output: classifier(dropout(pooled)).
class BertForSequenceClassification : public nn::Module {
 public:
  /// Throws ValueError from config.validate(); init_weights as BertForMaskedLM's.
  explicit BertForSequenceClassification(const BertConfig& config, bool init_weights = true);
  /// Inputs as BertModel::forward -> logits [B, num_labels].
  Tensor forward(const Tensor& input_ids, const Tensor& token_type_ids,
                 const Tensor& attention_mask);
  /// forward(input_ids, {}, {}).
  Tensor forward(const Tensor& input_ids) override;

  const BertConfig config;
  std::shared_ptr<BertModel> bert;
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::Linear> classifier;
};

}  // namespace sl::models
