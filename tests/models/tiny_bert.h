// The tiny float64-friendly BERT the gradient checks of tests/models use, and its inputs.
#pragma once

#include <vector>

#include "core/creation.h"
#include "models/bert.h"

namespace sl::testing {

/// 7 tokens, hidden 4, 2 layers of 2 heads, no dropout; weights large enough that attention is
/// away from uniform, and LayerNorm's eps large enough for well-conditioned finite differences.
inline models::BertConfig tiny_gradcheck_bert() {
  models::BertConfig c;
  c.vocab_size = 7;
  c.hidden_size = 4;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 6;
  c.max_position_embeddings = 5;
  c.hidden_dropout_prob = 0.0;
  c.attention_probs_dropout_prob = 0.0;
  c.initializer_range = 0.5;
  c.layer_norm_eps = 1e-5;
  return c;
}

/// ids, token types and attention mask [2, 3] for tiny_gradcheck_bert. No id 0 (the padding id):
/// the embedding's padding row gets no gradient from a lookup, by design (as torch's
/// padding_idx), which finite differences would see. The mask's 0 exercises the padding.
struct TinyBertBatch {
  Tensor ids = from_vector(std::vector<int64_t>{3, 1, 6, 2, 5, 4}).view({2, 3});
  Tensor types = from_vector(std::vector<int64_t>{0, 1, 1, 0, 0, 1}).view({2, 3});
  Tensor mask = from_vector(std::vector<int64_t>{1, 1, 1, 1, 1, 0}).view({2, 3});
};

}  // namespace sl::testing
