#include "models/bert.h"

#include <limits>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/ops/attention.h"
#include "autograd/ops/matmul.h"
#include "core/creation.h"
#include "models/registry.h"
#include "nn/checkpoint.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace sl::models {

namespace F = sl::nn::functional;

// ---- configuration -----------------------------------------------------------------------------

namespace {

/// The fused linear + activation of config.hidden_act (HF's ACT2FN names).
Activation activation_of(const std::string& act) {
  if (act == "gelu") return Activation::gelu;
  if (act == "gelu_new" || act == "gelu_pytorch_tanh") return Activation::gelu_tanh;
  if (act == "relu") return Activation::relu;
  detail::throw_error<ValueError>("BertConfig: hidden_act must be one of gelu, gelu_new, ",
                                  "gelu_pytorch_tanh, relu; got '", act, "'");
}

void check_positive(const char* field, int64_t v) {
  SL_CHECK(v >= 1, "BertConfig: ", field, " must be >= 1, got ", v);
}

void check_probability(const char* field, double p) {
  SL_CHECK(p >= 0.0 && p < 1.0, "BertConfig: ", field, " must be in [0, 1), got ", p);
}

}  // namespace

void BertConfig::validate() const {
  check_positive("vocab_size", vocab_size);
  check_positive("hidden_size", hidden_size);
  check_positive("num_hidden_layers", num_hidden_layers);
  check_positive("num_attention_heads", num_attention_heads);
  check_positive("intermediate_size", intermediate_size);
  check_positive("max_position_embeddings", max_position_embeddings);
  check_positive("type_vocab_size", type_vocab_size);
  check_positive("num_labels", num_labels);
  SL_CHECK(hidden_size % num_attention_heads == 0, "BertConfig: hidden_size (", hidden_size,
           ") must be a multiple of num_attention_heads (", num_attention_heads, ")");
  (void)activation_of(hidden_act);
  check_probability("hidden_dropout_prob", hidden_dropout_prob);
  check_probability("attention_probs_dropout_prob", attention_probs_dropout_prob);
  if (classifier_dropout) check_probability("classifier_dropout", *classifier_dropout);
  SL_CHECK(pad_token_id >= 0 && pad_token_id < vocab_size, "BertConfig: pad_token_id (",
           pad_token_id, ") must be in [0, vocab_size = ", vocab_size, ")");
  SL_CHECK(initializer_range >= 0.0, "BertConfig: initializer_range must be >= 0, got ",
           initializer_range);
  SL_CHECK(layer_norm_eps > 0.0, "BertConfig: layer_norm_eps must be > 0, got ", layer_norm_eps);
}

BertConfig bert_base_config() {
  return BertConfig{};
}

BertConfig bert_mini_config() {
  BertConfig c;
  c.num_hidden_layers = 4;
  c.hidden_size = 256;
  c.num_attention_heads = 4;
  c.intermediate_size = 1024;
  return c;
}

// ---- embeddings --------------------------------------------------------------------------------

namespace {

/// IndexError naming the first entry of ids outside [0, n) (one reduction when all are inside).
void check_ids_in_range(const Tensor& ids, int64_t n, const char* what, const char* bound) {
  if (!ids.lt(0).logical_or(ids.ge(n)).any().item<bool>()) return;
  std::vector<int64_t> v = ids.cpu().contiguous().to_vector<int64_t>();
  const int64_t L = ids.size(1);
  for (size_t i = 0; i < v.size(); ++i) {
    SL_CHECK_INDEX(v[i] >= 0 && v[i] < n, "BertEmbeddings: ", what, "[", i / L, ", ", i % L,
                   "] = ", v[i], " is outside [0, ", bound, " = ", n, ")");
  }
}

}  // namespace

BertEmbeddings::BertEmbeddings(const BertConfig& c) : Module("BertEmbeddings"), config(c) {
  config.validate();
  const int64_t H = c.hidden_size;
  word_embeddings = register_module(
      "word_embeddings", std::make_shared<nn::Embedding>(c.vocab_size, H, c.pad_token_id));
  position_embeddings = register_module(
      "position_embeddings", std::make_shared<nn::Embedding>(c.max_position_embeddings, H));
  token_type_embeddings = register_module("token_type_embeddings",
                                          std::make_shared<nn::Embedding>(c.type_vocab_size, H));
  LayerNorm =
      register_module("LayerNorm", std::make_shared<nn::LayerNorm>(Shape{H}, c.layer_norm_eps));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.hidden_dropout_prob));
  const int64_t P = c.max_position_embeddings;
  position_ids =
      register_buffer("position_ids", arange(0, P, 1, {.dtype = DType::i64}).view({1, P}));
  token_type_ids =
      register_buffer("token_type_ids", zeros({1, P}, {.dtype = DType::i64}), /*persistent=*/false);
}

Tensor BertEmbeddings::forward(const Tensor& input_ids, const Tensor& types) {
  SL_CHECK(input_ids.defined(), "BertEmbeddings: input_ids is undefined");
  SL_CHECK_DTYPE(input_ids.dtype() == DType::i64, "BertEmbeddings: input_ids must be int64, got ",
                 dtype_name(input_ids.dtype()));
  SL_CHECK_SHAPE(input_ids.dim() == 2 && input_ids.size(1) >= 1,
                 "BertEmbeddings: expected input_ids [batch, length >= 1], got ",
                 shape_str(input_ids.sizes()));
  const int64_t B = input_ids.size(0), L = input_ids.size(1);
  SL_CHECK(L <= config.max_position_embeddings, "BertEmbeddings: sequence length ", L,
           " exceeds max_position_embeddings = ", config.max_position_embeddings);
  check_ids_in_range(input_ids, config.vocab_size, "input_ids", "vocab_size");
  Tensor type_ids;
  if (types.defined()) {
    SL_CHECK_DTYPE(types.dtype() == DType::i64,
                   "BertEmbeddings: token_type_ids must be int64, got ", dtype_name(types.dtype()));
    SL_CHECK_SHAPE(types.sizes() == input_ids.sizes(), "BertEmbeddings: token_type_ids of shape ",
                   shape_str(types.sizes()), " does not match input_ids of shape ",
                   shape_str(input_ids.sizes()));
    check_ids_in_range(types, config.type_vocab_size, "token_type_ids", "type_vocab_size");
    type_ids = types;
  } else {
    type_ids = token_type_ids.slice(1, 0, L).expand({B, L});  // HF's buffered zeros
  }
  // HF's order: (words + token types) + positions, positions [1, L, H] broadcast over the batch.
  Tensor e = word_embeddings->forward(input_ids) + token_type_embeddings->forward(type_ids);
  e = e + position_embeddings->forward(position_ids.slice(1, 0, L));
  return dropout->forward(LayerNorm->forward(e));
}

Tensor BertEmbeddings::forward(const Tensor& input_ids) {
  return forward(input_ids, Tensor());
}

// ---- encoder -----------------------------------------------------------------------------------

BertSelfAttention::BertSelfAttention(const BertConfig& c)
    : Module("BertSelfAttention"),
      num_attention_heads(c.num_attention_heads),
      attention_head_size(c.hidden_size / c.num_attention_heads) {
  const int64_t H = c.hidden_size;
  query = register_module("query", std::make_shared<nn::Linear>(H, H));
  key = register_module("key", std::make_shared<nn::Linear>(H, H));
  value = register_module("value", std::make_shared<nn::Linear>(H, H));
  dropout =
      register_module("dropout", std::make_shared<nn::Dropout>(c.attention_probs_dropout_prob));
}

Tensor BertSelfAttention::forward(const Tensor& hidden, const Tensor& additive_mask) {
  const int64_t B = hidden.size(0), L = hidden.size(1);
  const int64_t H = num_attention_heads * attention_head_size;
  // HF's transpose_for_scores: [B, L, H] -> [B, heads, L, head_size]
  auto heads = [&](const Tensor& x) {
    return x.view({B, L, num_attention_heads, attention_head_size}).transpose(1, 2);
  };
  Tensor q = heads(query->forward(hidden)), k = heads(key->forward(hidden)),
         v = heads(value->forward(hidden));
  // softmax(q k^T / sqrt(head_size) + mask), dropout on the probabilities in training, @ v
  // (sl::scaled_dot_product_attention, torch.nn.functional's; nn/functional.h does not re-export
  // it)
  Tensor context =
      scaled_dot_product_attention(q, k, v, additive_mask, is_training() ? dropout->p : 0.0);
  return context.transpose(1, 2).reshape({B, L, H});
}

BertResidualOutput::BertResidualOutput(const char* type_name, int64_t in_features,
                                       const BertConfig& c)
    : Module(type_name) {
  dense = register_module("dense", std::make_shared<nn::Linear>(in_features, c.hidden_size));
  LayerNorm = register_module(
      "LayerNorm", std::make_shared<nn::LayerNorm>(Shape{c.hidden_size}, c.layer_norm_eps));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.hidden_dropout_prob));
}

Tensor BertResidualOutput::forward(const Tensor& x, const Tensor& residual) {
  return LayerNorm->forward(dropout->forward(dense->forward(x)) + residual);
}

BertAttention::BertAttention(const BertConfig& c) : Module("BertAttention") {
  self = register_module("self", std::make_shared<BertSelfAttention>(c));
  output = register_module(
      "output", std::make_shared<BertResidualOutput>("BertSelfOutput", c.hidden_size, c));
}

Tensor BertAttention::forward(const Tensor& hidden, const Tensor& additive_mask) {
  return output->forward(self->forward(hidden, additive_mask), hidden);
}

BertIntermediate::BertIntermediate(const BertConfig& c)
    : Module("BertIntermediate"), hidden_act(c.hidden_act) {
  dense =
      register_module("dense", std::make_shared<nn::Linear>(c.hidden_size, c.intermediate_size));
}

Tensor BertIntermediate::forward(const Tensor& x) {
  // linear then the activation as one op (on the CPU the same ops and bits as dense then act)
  return linear_act(x, dense->weight, dense->bias, activation_of(hidden_act));
}

BertLayer::BertLayer(const BertConfig& c) : Module("BertLayer") {
  attention = register_module("attention", std::make_shared<BertAttention>(c));
  intermediate = register_module("intermediate", std::make_shared<BertIntermediate>(c));
  output = register_module(
      "output", std::make_shared<BertResidualOutput>("BertOutput", c.intermediate_size, c));
}

Tensor BertLayer::forward(const Tensor& hidden, const Tensor& additive_mask) {
  Tensor a = attention->forward(hidden, additive_mask);
  return output->forward(intermediate->forward(a), a);
}

BertEncoder::BertEncoder(const BertConfig& c) : Module("BertEncoder") {
  layer = register_module("layer", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    layer->push_back(std::make_shared<BertLayer>(c));
}

Tensor BertEncoder::forward(const Tensor& hidden, const Tensor& additive_mask) {
  Tensor h = hidden;
  const bool recompute = gradient_checkpointing && is_training() && GradMode::is_enabled();
  for (size_t i = 0; i < layer->size(); ++i) {
    std::shared_ptr<BertLayer> l = layer->at<BertLayer>(i);
    if (!recompute) {
      h = l->forward(h, additive_mask);
      continue;
    }
    // The mask (a constant, possibly undefined) rides in the closure; the hidden state is the
    // checkpoint's input and the layer's parameters get their gradients through it.
    h = nn::checkpoint(
        [l, additive_mask](const TensorList& in) { return l->forward(in[0], additive_mask); }, {h},
        l->parameters());
  }
  return h;
}

BertPooler::BertPooler(const BertConfig& c) : Module("BertPooler") {
  dense = register_module("dense", std::make_shared<nn::Linear>(c.hidden_size, c.hidden_size));
}

Tensor BertPooler::forward(const Tensor& hidden) {
  return F::tanh(dense->forward(hidden.select(1, 0)));
}

// ---- BertModel ---------------------------------------------------------------------------------

Tensor bert_extended_attention_mask(const Tensor& mask, int64_t batch, int64_t length,
                                    DType dtype) {
  SL_CHECK(mask.defined(), "BertModel: attention_mask is undefined");
  SL_CHECK_SHAPE(mask.dim() == 2 && mask.size(0) == batch && mask.size(1) == length,
                 "BertModel: attention_mask of shape ", shape_str(mask.sizes()),
                 " does not match input_ids [", batch, ", ", length, "]");
  SL_CHECK_DTYPE(is_floating(dtype), "BertModel: the attention mask's dtype must be floating, got ",
                 dtype_name(dtype));
  // torch.finfo(dtype).min, as HF's get_extended_attention_mask
  double lowest = std::numeric_limits<float>::lowest();
  if (dtype == DType::f64) lowest = std::numeric_limits<double>::lowest();
  if (dtype == DType::f16) lowest = -65504.0;
  if (dtype == DType::bf16) lowest = -3.3895313892515355e38;
  return mask.to(dtype).neg().add(1.0).mul(lowest).view({batch, 1, 1, length});
}

void init_bert_weights(nn::Module& root, double range) {
  NoGradGuard no_grad;
  std::unordered_set<const TensorImpl*> seen;
  auto first = [&](const Tensor& t) { return t.defined() && seen.insert(t.impl()).second; };
  root.apply([&](nn::Module& m) {
    if (auto* l = dynamic_cast<nn::Linear*>(&m)) {
      if (first(l->weight)) nn::init::normal_(l->weight, 0.0, range);
      if (first(l->bias)) nn::init::zeros_(l->bias);
    } else if (auto* e = dynamic_cast<nn::Embedding*>(&m)) {
      if (first(e->weight)) {
        nn::init::normal_(e->weight, 0.0, range);
        if (e->padding_idx) e->weight.detach().select(0, *e->padding_idx).zero_();
      }
    } else if (auto* n = dynamic_cast<nn::LayerNorm*>(&m)) {
      if (first(n->weight)) nn::init::ones_(n->weight);
      if (first(n->bias)) nn::init::zeros_(n->bias);
    }
  });
}

BertModel::BertModel(const BertConfig& c, bool add_pooling_layer, bool init_weights)
    : Module("BertModel"), config(c) {
  config.validate();
  embeddings = register_module("embeddings", std::make_shared<BertEmbeddings>(c));
  encoder = register_module("encoder", std::make_shared<BertEncoder>(c));
  if (add_pooling_layer) pooler = register_module("pooler", std::make_shared<BertPooler>(c));
  if (init_weights) init_bert_weights(*this, c.initializer_range);
}

BertModelOutput BertModel::forward(const Tensor& input_ids, const Tensor& token_type_ids,
                                   const Tensor& attention_mask) {
  Tensor h = embeddings->forward(input_ids, token_type_ids);
  Tensor mask;
  if (attention_mask.defined()) {
    mask = bert_extended_attention_mask(attention_mask, input_ids.size(0), input_ids.size(1),
                                        h.dtype());
  }
  BertModelOutput out;
  out.sequence_output = encoder->forward(h, mask);
  if (pooler) out.pooled_output = pooler->forward(out.sequence_output);
  return out;
}

Tensor BertModel::forward(const Tensor& input_ids) {
  return forward(input_ids, Tensor(), Tensor()).sequence_output;
}

// ---- heads -------------------------------------------------------------------------------------

BertPredictionHeadTransform::BertPredictionHeadTransform(const BertConfig& c)
    : Module("BertPredictionHeadTransform"), hidden_act(c.hidden_act) {
  dense = register_module("dense", std::make_shared<nn::Linear>(c.hidden_size, c.hidden_size));
  LayerNorm = register_module(
      "LayerNorm", std::make_shared<nn::LayerNorm>(Shape{c.hidden_size}, c.layer_norm_eps));
}

Tensor BertPredictionHeadTransform::forward(const Tensor& x) {
  return LayerNorm->forward(linear_act(x, dense->weight, dense->bias, activation_of(hidden_act)));
}

BertLMPredictionHead::BertLMPredictionHead(const BertConfig& c) : Module("BertLMPredictionHead") {
  transform = register_module("transform", std::make_shared<BertPredictionHeadTransform>(c));
  decoder = register_module("decoder", std::make_shared<nn::Linear>(c.hidden_size, c.vocab_size,
                                                                    /*bias=*/false));
  bias = register_parameter("bias", zeros({c.vocab_size}));
  // HF: self.decoder.bias = self.bias (one Parameter under both names)
  decoder->bias = bias;
  decoder->parameter_slot("bias") = bias;
}

Tensor BertLMPredictionHead::forward(const Tensor& x) {
  return decoder->forward(transform->forward(x));
}

BertOnlyMLMHead::BertOnlyMLMHead(const BertConfig& c) : Module("BertOnlyMLMHead") {
  predictions = register_module("predictions", std::make_shared<BertLMPredictionHead>(c));
}

Tensor BertOnlyMLMHead::forward(const Tensor& x) {
  return predictions->forward(x);
}

BertForMaskedLM::BertForMaskedLM(const BertConfig& c, bool init_weights)
    : Module("BertForMaskedLM"), config(c) {
  config.validate();
  bert = register_module("bert", std::make_shared<BertModel>(c, /*add_pooling_layer=*/false,
                                                             /*init_weights=*/false));
  cls = register_module("cls", std::make_shared<BertOnlyMLMHead>(c));
  tie_weights();  // before the init, so that the tied tensor is drawn once, as an embedding
  if (init_weights) init_bert_weights(*this, c.initializer_range);
}

void BertForMaskedLM::tie_weights() {
  nn::Linear& decoder = *cls->predictions->decoder;
  decoder.weight = bert->embeddings->word_embeddings->weight;
  decoder.parameter_slot("weight") = decoder.weight;
  decoder.bias = cls->predictions->bias;
  decoder.parameter_slot("bias") = decoder.bias;
}

Tensor BertForMaskedLM::forward(const Tensor& input_ids, const Tensor& token_type_ids,
                                const Tensor& attention_mask) {
  return cls->forward(bert->forward(input_ids, token_type_ids, attention_mask).sequence_output);
}

Tensor BertForMaskedLM::forward(const Tensor& input_ids) {
  return forward(input_ids, Tensor(), Tensor());
}

Tensor BertForMaskedLM::logits_at(const Tensor& input_ids, const Tensor& positions) {
  Tensor hidden = bert->forward(input_ids, Tensor(), Tensor()).sequence_output;
  return cls->forward(
      hidden.reshape({-1, hidden.size(-1)}).index_select(0, positions.to(hidden.device())));
}

BertForSequenceClassification::BertForSequenceClassification(const BertConfig& c, bool init_weights)
    : Module("BertForSequenceClassification"), config(c) {
  config.validate();
  bert = register_module("bert", std::make_shared<BertModel>(c, /*add_pooling_layer=*/true,
                                                             /*init_weights=*/false));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(
                                           c.classifier_dropout.value_or(c.hidden_dropout_prob)));
  classifier =
      register_module("classifier", std::make_shared<nn::Linear>(c.hidden_size, c.num_labels));
  if (init_weights) init_bert_weights(*this, c.initializer_range);
}

Tensor BertForSequenceClassification::forward(const Tensor& input_ids, const Tensor& token_type_ids,
                                              const Tensor& attention_mask) {
  Tensor pooled = bert->forward(input_ids, token_type_ids, attention_mask).pooled_output;
  return classifier->forward(dropout->forward(pooled));
}

Tensor BertForSequenceClassification::forward(const Tensor& input_ids) {
  return forward(input_ids, Tensor(), Tensor());
}

SL_REGISTER_MODEL("bert_base",
                  [] { return std::make_shared<BertForMaskedLM>(bert_base_config()); });
SL_REGISTER_MODEL("bert_mini_mlm",
                  [] { return std::make_shared<BertForMaskedLM>(bert_mini_config()); });
SL_REGISTER_MODEL("bert_mini_cls", [] {
  return std::make_shared<BertForSequenceClassification>(bert_mini_config());
});

}  // namespace sl::models
