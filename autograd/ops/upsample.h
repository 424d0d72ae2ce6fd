// Differentiable resampling, F.interpolate's nearest / nearest-exact / area / linear / bilinear /
// bicubic / trilinear modes (bilinear and bicubic also antialiased) with PyTorch 1.13's semantics;
// backward beside the forward in autograd/ops/upsample.cpp (kernels: core/ops/upsample.h).
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
  /// "nearest", "nearest-exact", "area" (3-d to 5-d), "linear" (3-d), "bilinear" (4-d), "bicubic"
  /// (4-d), "trilinear" (5-d)
  std::string mode = "nearest";
  /// Interpolating modes only (linear, bilinear, bicubic, trilinear; false when unset); PyTorch
  /// refuses it, even false, for nearest and area.
  std::optional<bool> align_corners;
  /// true: the index rule uses the in / out size ratio instead of the given scale_factor
  /// (Note [Upsample source index]); refused with size. Unset and false behave alike.
  std::optional<bool> recompute_scale_factor;
  /// bilinear / bicubic only: PyTorch's antialiased resampling (_upsample_bilinear2d_aa /
  /// _upsample_bicubic2d_aa; Note [Upsample source index]): when downsampling, each output
  /// averages a window widened by the scale (Pillow's filters), so no input is skipped.
  bool antialias = false;
};

/// The checks of options.mode that need no input: a known mode, align_corners only with the
/// interpolating modes, antialias only with bilinear / bicubic. Throws ValueError whose message
/// starts with `op`.
void check_interpolate_mode(const InterpolateOptions& options, const char* op);

/// F.interpolate: resamples the spatial dims of a 3-d [N, C, W], 4-d [N, C, H, W] or (trilinear,
/// nearest, nearest-exact, area) 5-d [N, C, D, H, W] floating input to [N, C, W'] / [N, C, H', W']
/// / [N, C, D', H', W'] (an empty batch gives an empty output). nearest reads input[floor(o * s)]
/// with PyTorch's legacy rule (s = 1 / scale_factor when one is given, else in / out; exact copy
/// and halving shortcuts); linear / bilinear / trilinear interpolate between the two nearest taps
/// per dim, pixel centres aligned (align_corners false) or corners aligned; bicubic uses 4 taps per
/// dim (Keys, A = -0.75) read clamped to the input, so it may overshoot the input's range;
/// antialias (bilinear / bicubic) widens the filter by the downscale factor. nearest-exact reads
/// input[floor((o + 0.5) * s)] (pixel centres, as Pillow and scipy); area is adaptive_avg_pool1d /
/// 2d / 3d to the output size, as PyTorch computes it (3d: composed of two 2d passes, equal to
/// PyTorch's up to the last bits). Index rules: Note [Upsample source index]. Throws ValueError
/// (both or neither of size / scale_factor, a list of the wrong length, non-positive or non-finite
/// size / scale, align_corners with nearest / nearest-exact / area, antialias with a mode other
/// than bilinear / bicubic, recompute_scale_factor with size, unknown mode), ShapeError (rank for
/// the mode, an empty spatial input dim, an output size below 1), DTypeError (a non-floating
/// input).
Tensor interpolate(const Tensor& input, const InterpolateOptions& options);

}  // namespace sl
