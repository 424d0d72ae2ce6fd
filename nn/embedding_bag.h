// EmbeddingBag, as torch.nn.EmbeddingBag (PyTorch 1.13; sparse gradients excepted).
#pragma once

#include <optional>
#include <string>

#include "autograd/ops/embedding_bag.h"
#include "nn/module.h"

namespace sl::nn {

/// Options of EmbeddingBag after (num_embeddings, embedding_dim), as torch.nn.EmbeddingBag's.
struct EmbeddingBagModuleOptions {
  /// forward renormalises the looked-up rows of weight in place first (embedding_renorm_).
  std::optional<double> max_norm = std::nullopt;
  double norm_type = 2.0;
  /// Divides each entry's gradient by its index's count in the batch (not with mode max).
  bool scale_grad_by_freq = false;
  /// "sum", "mean" or "max".
  std::string mode = "mean";
  /// Must be false: there are no sparse tensors (ValueError otherwise).
  bool sparse = false;
  /// offsets has one entry more than there are bags, the last the end of the last bag.
  bool include_last_offset = false;
  /// Row zeroed at init, left out of every bag and without gradient; negative counts from the end.
  std::optional<int64_t> padding_idx = std::nullopt;
  /// dtype/device of the weight.
  TensorOptions tensor_options = {};
};

/// A table `weight` [num_embeddings, embedding_dim] (N(0, 1), row padding_idx zeroed) reduced per
/// bag: forward(input, offsets, per_sample_weights) is sl::embedding_bag (contract and errors in
/// autograd/ops/embedding_bag.h) -> [B, embedding_dim]. Throws ValueError for non-positive sizes,
/// padding_idx out of range, an unknown mode, sparse=true, or scale_grad_by_freq with max.
class EmbeddingBag : public Module {
 public:
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim,
               EmbeddingBagModuleOptions options = {});
  /// torch.nn.EmbeddingBag.from_pretrained: weight (2-d floating; storage shared, as PyTorch's)
  /// becomes the table, frozen unless !freeze; the padding row is not zeroed. options'
  /// tensor_options is ignored. Throws ShapeError unless weight is 2-d, DTypeError unless
  /// floating.
  static std::shared_ptr<EmbeddingBag> from_pretrained(const Tensor& weight, bool freeze = true,
                                                       EmbeddingBagModuleOptions options = {});
  /// input 2-d [B, n] (offsets undefined) or 1-d [L] with 1-d offsets; per_sample_weights of
  /// input's shape (mode sum only) or undefined.
  Tensor forward(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights = {});
  /// forward(input, {}): a 2-d input of fixed-length bags.
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  std::string extra_repr() const override;

  const int64_t num_embeddings, embedding_dim;
  /// Normalised to [0, num_embeddings).
  const std::optional<int64_t> padding_idx;
  const std::optional<double> max_norm;
  const double norm_type;
  const bool scale_grad_by_freq;
  const EmbeddingBagMode mode;
  const bool include_last_offset;
  Tensor weight;

 private:
  EmbeddingBag(int64_t n, int64_t d, const EmbeddingBagModuleOptions& options,
               const Tensor& pretrained);
};

}  // namespace sl::nn
