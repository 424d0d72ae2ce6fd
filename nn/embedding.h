// Embedding, as torch.nn.Embedding (PyTorch 1.13's options; sparse gradients excepted).
#pragma once

#include <optional>

#include "nn/module.h"

namespace sl::nn {

/// Options of Embedding after (num_embeddings, embedding_dim), as torch.nn.Embedding's.
struct EmbeddingOptions {
  /// Row that is zeroed at init and receives no gradient; negative counts from the end.
  std::optional<int64_t> padding_idx = std::nullopt;
  /// forward renormalises the looked-up rows of weight in place to at most this norm first
  /// (sl::embedding_renorm_, autograd/ops/embedding_bag.h).
  std::optional<double> max_norm = std::nullopt;
  /// The p of the max_norm norm.
  double norm_type = 2.0;
  /// Divides each entry's gradient by how often its index occurs in the batch.
  bool scale_grad_by_freq = false;
  /// Must be false: there are no sparse tensors (ValueError otherwise).
  bool sparse = false;
  /// dtype/device of the weight.
  TensorOptions tensor_options = {};
};

/// A lookup table `weight` [num_embeddings, embedding_dim], initialised N(0, 1) with row
/// padding_idx zeroed (negative padding_idx counts from the end). forward(indices) (int64/int32,
/// any shape) returns indices.sizes() + [embedding_dim]; row padding_idx receives no gradient.
/// With max_norm, forward first scales (in place, without autograd) each looked-up row whose
/// norm_type-norm exceeds max_norm to max_norm / (norm + 1e-7) times itself, as PyTorch.
/// Throws ValueError for non-positive sizes, padding_idx out of range or sparse=true; forward
/// throws IndexError for an index outside [0, num_embeddings), DTypeError for non-integer
/// indices.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, EmbeddingOptions options);
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt, TensorOptions opts = {});
  /// torch.nn.Embedding.from_pretrained: weight (2-d floating; its storage is shared, as
  /// PyTorch's, so max_norm renormalises it in place) becomes the table, frozen
  /// (requires_grad false) unless !freeze; the padding row is not zeroed (as PyTorch).
  /// options.tensor_options is ignored (the weight's own dtype and device are kept). Throws
  /// ShapeError unless weight is 2-d, DTypeError unless floating.
  static std::shared_ptr<Embedding> from_pretrained(const Tensor& weight, bool freeze = true,
                                                    EmbeddingOptions options = {});
  Tensor forward(const Tensor& indices) override;
  void reset_parameters();
  std::string extra_repr() const override;

  const int64_t num_embeddings, embedding_dim;
  /// Normalised to [0, num_embeddings).
  const std::optional<int64_t> padding_idx;
  const std::optional<double> max_norm;
  const double norm_type;
  const bool scale_grad_by_freq;
  Tensor weight;

 private:
  /// from_pretrained: weight set by the caller, no init.
  Embedding(int64_t n, int64_t d, EmbeddingOptions options, const Tensor& pretrained);
};

namespace detail {
/// Shared by Embedding and EmbeddingBag (`name` starts the messages): checks the sizes (ValueError
/// unless positive) and padding_idx (within [-n, n)), and returns padding_idx in [0, n).
std::optional<int64_t> checked_embedding_padding(const char* name, std::optional<int64_t> p,
                                                 int64_t n, int64_t d);
/// from_pretrained's checks: ShapeError unless weight is 2-d, DTypeError unless floating.
void check_pretrained(const char* name, const Tensor& weight);
/// The options part of the repr, as PyTorch prints it (only what differs from the defaults).
std::string embedding_repr_options(std::optional<int64_t> padding_idx,
                                   std::optional<double> max_norm, double norm_type,
                                   bool scale_grad_by_freq);
}  // namespace detail

}  // namespace sl::nn
