// Linear and Identity, as torch.nn.Linear / torch.nn.Identity.
#pragma once

#include "nn/module.h"

namespace sl::nn {

/// y = x W^T + b. x: [..., in_features] -> [..., out_features]. Parameters `weight`
/// [out_features, in_features] and `bias` [out_features] (absent when bias=false), initialised as
/// PyTorch does: weight kaiming_uniform(a=sqrt(5)), bias U(-1/sqrt(in), 1/sqrt(in)).
/// `opts` gives the parameters' dtype and device (requires_grad is ignored). Throws ValueError
/// for non-positive sizes; forward throws ShapeError when x's last dim is not in_features.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, TensorOptions opts = {});
  Tensor forward(const Tensor& x) override;
  /// Re-draws the parameters with PyTorch's default init.
  void reset_parameters();
  std::string extra_repr() const override;

  const int64_t in_features, out_features;
  Tensor weight, bias;
};

/// Returns its input unchanged.
class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};

}  // namespace sl::nn
