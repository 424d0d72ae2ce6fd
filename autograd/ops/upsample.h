// Differentiable resampling, F.interpolate's nearest / nearest-exact / area / linear / bilinear
// modes with PyTorch 1.13's semantics; backward beside the forward in autograd/ops/upsample.cpp
// (kernels: core/ops/upsample.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace sl {

/// The arguments of F.interpolate / nn.Upsample. Give exactly one of size and scale_factor; each
/// holds one value (for every spatial dim) or one per spatial dim. Empty means "not given".
struct InterpolateOptions {
  std::vector<int64_t> size;         ///< output spatial size(s), each > 0
  std::vector<double> scale_factor;  ///< output = floor(input * scale), each scale > 0, finite
  /// "nearest", "nearest-exact", "area" (3-d/4-d), "linear" (3-d), "bilinear" (4-d)
  std::string mode = "nearest";
  /// Linear modes only (false when unset); PyTorch refuses it, even false, for nearest.
  std::optional<bool> align_corners;
  /// true: the index rule uses the in / out size ratio instead of the given scale_factor
  /// (Note [Upsample source index]); refused with size. Unset and false behave alike.
  std::optional<bool> recompute_scale_factor;
};

/// The checks of options.mode that need no input: a known mode, align_corners only with linear /
/// bilinear. Throws ValueError whose message starts with `op`.
void check_interpolate_mode(const InterpolateOptions& options, const char* op);

/// F.interpolate: resamples the spatial dims of a 3-d [N, C, W] or 4-d [N, C, H, W] floating
/// input to [N, C, W'] / [N, C, H', W'] (an empty batch gives an empty output).
/// nearest reads input[floor(o * s)] with PyTorch's legacy rule (s = 1 / scale_factor when one is
/// given, else in / out; exact copy and halving shortcuts); linear / bilinear interpolate between
/// the two nearest taps, pixel centres aligned (align_corners false) or corners aligned.
/// nearest-exact reads input[floor((o + 0.5) * s)] (pixel centres, as Pillow and scipy); area is
/// adaptive_avg_pool1d / 2d to the output size, as PyTorch computes it.
/// Throws ValueError (both or neither of size / scale_factor, a list of the wrong length,
/// non-positive or non-finite size / scale, align_corners with a mode other than linear /
/// bilinear, recompute_scale_factor
/// with size, unknown or unsupported mode), ShapeError (rank for the mode, an empty spatial
/// input dim, an output size below 1), DTypeError (a non-floating input).
Tensor interpolate(const Tensor& input, const InterpolateOptions& options);

}  // namespace sl
