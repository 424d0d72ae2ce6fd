// Upsample, as torch.nn.Upsample: F.interpolate (autograd/ops/upsample.h) with fixed arguments.
#pragma once

#include "autograd/ops/upsample.h"
#include "nn/module.h"

namespace sl::nn {

/// Resamples [N, C, W] / [N, C, H, W] inputs with interpolate(x, options). The options are
/// checked when the module is built where they do not depend on the input (one of size /
/// scale_factor, positive values, mode, align_corners with a non-interpolating mode, antialias
/// with a mode other than bilinear / bicubic), with interpolate's errors; the rest (rank, dtype,
/// list lengths) at forward. options.antialias goes beyond PyTorch 1.13's nn.Upsample (which has
/// none) to F.interpolate's.
class Upsample : public Module {
 public:
  explicit Upsample(InterpolateOptions options);
  Tensor forward(const Tensor& x) override;
  /// As PyTorch: "scale_factor=2.0, mode=bilinear" or "size=(3, 4), mode=nearest".
  std::string extra_repr() const override;
  const InterpolateOptions options;
};

}  // namespace sl::nn
