// Distances between batches of vectors: torch.nn.functional's cosine_similarity and
// pairwise_distance, and their modules CosineSimilarity and PairwiseDistance. Compositions of
// differentiable ops (every device, with gradients).
#pragma once

#include "nn/module.h"

namespace sl::nn {
namespace functional {

/// sum over dim of (x1 / n1) (x2 / n2) with n = sqrt(max(sum over dim of x^2, eps^2)), taken after
/// x1 and x2 are broadcast together, as PyTorch 1.13: the clamp is invisible to autograd (a
/// vector whose norm is below eps gets the gradient of the unclamped squared norm at the clamped
/// value). The result has the broadcast shape without dim. Floating inputs (DTypeError; PyTorch
/// also takes integers), ShapeError when they do not broadcast, IndexError for dim out of range,
/// ValueError for eps < 0, DeviceError.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);

/// ||x1 - x2 + eps||_p over the last dim of the broadcast shape (kept as size 1 with keepdim),
/// as PyTorch 1.13. Inputs of at least one dim (ShapeError for two 0-d ones), floating
/// (DTypeError); ValueError unless p > 0 (inf allowed).
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6,
                         bool keepdim = false);

}  // namespace functional

/// forward(x1, x2) = functional::cosine_similarity(x1, x2, dim, eps).
class CosineSimilarity : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes two inputs).
  using Module::forward;
  explicit CosineSimilarity(int64_t dim = 1, double eps = 1e-8);
  Tensor forward(const Tensor& x1, const Tensor& x2);
  const int64_t dim;
  const double eps;
};

/// forward(x1, x2) = functional::pairwise_distance(x1, x2, p, eps, keepdim). ValueError unless
/// p > 0.
class PairwiseDistance : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes two inputs).
  using Module::forward;
  explicit PairwiseDistance(double p = 2.0, double eps = 1e-6, bool keepdim = false);
  Tensor forward(const Tensor& x1, const Tensor& x2);
  const double p, eps;
  const bool keepdim;
};

}  // namespace sl::nn
