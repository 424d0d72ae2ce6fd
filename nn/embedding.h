// Embedding, as torch.nn.Embedding.
#pragma once

#include <optional>

#include "nn/module.h"

namespace sl::nn {

/// A lookup table `weight` [num_embeddings, embedding_dim], initialised N(0, 1) with row
/// padding_idx zeroed (negative padding_idx counts from the end). forward(indices) (int64/int32,
/// any shape) returns indices.sizes() + [embedding_dim]; row padding_idx receives no gradient.
/// Throws ValueError for non-positive sizes or padding_idx out of range; forward throws
/// IndexError for an index outside [0, num_embeddings), DTypeError for non-integer indices.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt, TensorOptions opts = {});
  Tensor forward(const Tensor& indices) override;
  void reset_parameters();
  std::string extra_repr() const override;

  const int64_t num_embeddings, embedding_dim;
  /// Normalised to [0, num_embeddings).
  const std::optional<int64_t> padding_idx;
  Tensor weight;
};

}  // namespace sl::nn
