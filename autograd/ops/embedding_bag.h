// torch.nn.functional.embedding_bag and the max_norm renormalisation shared with embedding
// (torch.embedding_renorm_), as PyTorch 1.13. The sum and mean modes are compositions of
// differentiable index ops (index_select, index_add: CUDA kernels included); max has a kernel of
// its own (core/ops/embedding_bag.h) with its backward beside it here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"

namespace sl {

enum class EmbeddingBagMode { sum, mean, max };

/// "sum" / "mean" / "max" -> the mode; ValueError naming `op` for anything else.
EmbeddingBagMode embedding_bag_mode(const std::string& mode, const char* op = "embedding_bag");
const char* embedding_bag_mode_name(EmbeddingBagMode mode);

/// torch.embedding_renorm_: every distinct row of weight [N, D] that `indices` (int64 / int32,
/// any shape) names and whose norm_type-norm exceeds max_norm is scaled in place by
/// max_norm / (norm + 1e-7) (the norm and the scale in float64, the product in weight's dtype).
/// Runs without recording autograd (as F.embedding's _no_grad_embedding_renorm_) and bumps
/// weight's version. Throws ShapeError unless weight is 2-d, DTypeError for non-integer indices
/// or a non-floating weight, IndexError for an index outside [0, N), ValueError for a negative
/// max_norm.
void embedding_renorm_(const Tensor& weight, const Tensor& indices, double max_norm,
                       double norm_type = 2.0);

/// The options of embedding_bag after (weight, input), as torch.nn.functional.embedding_bag.
struct EmbeddingBagOptions {
  /// 1-d start of each bag in a 1-d input (int64 / int32, input's dtype); must be undefined for a
  /// 2-d input (each row one bag).
  Tensor offsets = {};
  EmbeddingBagMode mode = EmbeddingBagMode::mean;
  /// Renormalises the looked-up rows of weight in place first (embedding_renorm_).
  std::optional<double> max_norm = std::nullopt;
  double norm_type = 2.0;
  /// Divides each entry's weight gradient by its index's count in input (not with max).
  bool scale_grad_by_freq = false;
  /// Must be false: there are no sparse tensors (ValueError otherwise).
  bool sparse = false;
  /// input's shape, weight's dtype; each looked-up row is scaled by it before the sum (mode sum
  /// only). Differentiable.
  Tensor per_sample_weights = {};
  /// offsets has B + 1 entries, the last one the end of the last bag.
  bool include_last_offset = false;
  /// Entries equal to it are left out of their bag (mean divides by the others' count).
  std::optional<int64_t> padding_idx = std::nullopt;
};

/// torch.nn.functional.embedding_bag: the rows of weight [N, D] named by input reduced per bag
/// (sum, mean or max; an empty bag, or one of padding entries only, gives zeros) -> [B, D].
/// input is 2-d [B, n] (B bags of n entries) or 1-d [L] with offsets (B = offsets.numel(), or
/// offsets.numel() - 1 with include_last_offset); bag b holds entries [offsets[b], offsets[b+1])
/// (the last one up to L, or to offsets[B] with include_last_offset). Gradients: weight (sum,
/// mean: through every entry; max: to the row holding each bag's maximum per column, the first
/// entry on ties) and per_sample_weights. Throws ValueError for a 2-d input with offsets, a 1-d
/// input without 1-d offsets, an input of another rank, offsets[0] != 0, decreasing offsets,
/// offsets beyond the input, include_last_offset with empty offsets, per_sample_weights with a
/// mode other than sum, scale_grad_by_freq with max, sparse, a bad padding_idx; ShapeError for
/// per_sample_weights not of input's shape or weight not 2-d; DTypeError for non-integer input or
/// offsets (or of different integer dtypes), a non-floating weight, per_sample_weights not of
/// weight's dtype; IndexError for an index outside [0, N); DeviceError for operands on different
/// devices. Offsets are validated on the host when index_checks_on_host (Note [Index checks]).
Tensor embedding_bag(const Tensor& weight, const Tensor& input,
                     const EmbeddingBagOptions& opts = {});

}  // namespace sl
