#include "nn/distance.h"

#include <cmath>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "core/amp.h"
#include "core/shape.h"

namespace sl::nn {
namespace functional {

namespace {

// Both operands in float32 under autocast, floating, on one device.
std::pair<Tensor, Tensor> checked_pair(const Tensor& x1_in, const Tensor& x2_in, const char* op) {
  SL_CHECK(x1_in.defined() && x2_in.defined(), op, ": an input is undefined");
  Tensor x1 = autocast(x1_in, AmpPolicy::fp32), x2 = autocast(x2_in, AmpPolicy::fp32);
  SL_CHECK_DTYPE(x1.is_floating_point() && x2.is_floating_point(), op,
                 ": inputs must be floating point, got ", dtype_name(x1.dtype()), " and ",
                 dtype_name(x2.dtype()));
  SL_CHECK_DEVICE(x1.device() == x2.device(), op, ": x1 is on ", x1.device(), " but x2 is on ",
                  x2.device());
  return {x1, x2};
}

}  // namespace

Tensor cosine_similarity(const Tensor& x1_in, const Tensor& x2_in, int64_t dim, double eps) {
  const char* op = "cosine_similarity";
  auto [x1, x2] = checked_pair(x1_in, x2_in, op);
  SL_CHECK(eps >= 0, op, ": eps must be >= 0, got ", eps);
  const Shape shape = broadcast_shapes(x1.sizes(), x2.sizes(), op);
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(shape.size()), op);
  x1 = x1.expand(shape);
  x2 = x2.expand(shape);
  // PyTorch 1.13 clamps the squared norms in place under no_grad: the value is max(s, eps^2),
  // the gradient that of s. s - s.detach() is exactly 0 (s is finite and >= 0).
  auto norm = [&](const Tensor& x) {
    Tensor s = (x * x).sum({d}, true);
    return (s - s.detach() + s.detach().clamp(eps * eps)).sqrt();
  };
  return ((x1 / norm(x1)) * (x2 / norm(x2))).sum({d});
}

Tensor pairwise_distance(const Tensor& x1_in, const Tensor& x2_in, double p, double eps,
                         bool keepdim) {
  const char* op = "pairwise_distance";
  auto [x1, x2] = checked_pair(x1_in, x2_in, op);
  SL_CHECK(p > 0, op, ": p must be > 0, got ", p);
  SL_CHECK_SHAPE(x1.dim() > 0 || x2.dim() > 0, op,
                 ": needs inputs with at least one dim (the vectors), got two 0-d tensors");
  const Shape shape = broadcast_shapes(x1.sizes(), x2.sizes(), op);
  return (x1 - x2 + eps).norm(p, {static_cast<int64_t>(shape.size()) - 1}, keepdim);
}

}  // namespace functional

CosineSimilarity::CosineSimilarity(int64_t d, double e)
    : Module("CosineSimilarity"), dim(d), eps(e) {}

Tensor CosineSimilarity::forward(const Tensor& x1, const Tensor& x2) {
  return functional::cosine_similarity(x1, x2, dim, eps);
}

PairwiseDistance::PairwiseDistance(double norm, double e, bool k)
    : Module("PairwiseDistance"), p(norm), eps(e), keepdim(k) {
  SL_CHECK(p > 0, "PairwiseDistance: p must be > 0, got ", p);
}

Tensor PairwiseDistance::forward(const Tensor& x1, const Tensor& x2) {
  return functional::pairwise_distance(x1, x2, p, eps, keepdim);
}

}  // namespace sl::nn
