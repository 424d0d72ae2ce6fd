// The "upsample" family: nearest (legacy and exact) and linear (1-d linear, 2-d bilinear)
// resampling of contiguous [P, H, W] planes (P = N * C; a 1-d input is a plane of height 1),
// forward and backward, with PyTorch 1.13's index rules (core/ops/upsample_index.h, Note [Upsample
// source index]). Not differentiable (see autograd/ops/upsample.h).
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// Output size of a resampling and what its index rule needs. For a 1-d input, in_h = out_h = 1
/// (every rule copies along a dimension whose sizes agree).
struct UpsampleGeometry {
  int64_t out_h = 1, out_w = 1;
  double scale_h = 0, scale_w = 0;  ///< the scale_factor given per dim (0: none, in / out ratio)
  bool align_corners = false;       ///< linear modes only
  bool exact = false;               ///< nearest only: "nearest-exact"'s index rule
};

/// out [P, Ho, Wo]: out[p, oh, ow] = input[p, nearest_source(oh), nearest_source(ow)] (g.exact
/// selects nearest-exact's rule).
SL_DECLARE_KERNEL(upsample_nearest_forward_kernel,
                  void(const Tensor& out, const Tensor& input, const UpsampleGeometry& g));
/// grad_input [P, H, W] (overwritten) = for each input element, the sum of grad_out over the
/// outputs that read it.
///
/// Note [Upsample backward order]
/// The CPU scatters plane by plane in ascending output order (oh, ow; for linear, the taps
/// (i0, i0), (i0, i1), (i1, i0), (i1, i1) of each output in that order), adding from zero in the
/// gradient's dtype. The CUDA kernels gather instead: one thread per input element sums, in that
/// same order, the outputs whose taps include it (a range per dimension, found by binary search
/// since source indices are monotone), so they need no atomics and give the same result on every
/// run; 16-bit gradients are summed in float and rounded once.
SL_DECLARE_KERNEL(upsample_nearest_backward_kernel,
                  void(const Tensor& grad_input, const Tensor& grad_out,
                       const UpsampleGeometry& g));
/// out [P, Ho, Wo]: linear interpolation (bilinear over both dims) of input [P, H, W].
SL_DECLARE_KERNEL(upsample_linear_forward_kernel,
                  void(const Tensor& out, const Tensor& input, const UpsampleGeometry& g));
/// grad_input [P, H, W] (overwritten) from grad_out [P, Ho, Wo] (Note [Upsample backward order]).
SL_DECLARE_KERNEL(upsample_linear_backward_kernel,
                  void(const Tensor& grad_input, const Tensor& grad_out,
                       const UpsampleGeometry& g));

namespace ops {

/// Resamples a 3-d [N, C, W] (g.out_h 1) or 4-d [N, C, H, W] input to [.., out_h, out_w];
/// linear selects the linear rule, else nearest. Validation is the caller's
/// (sl::interpolate); an empty batch gives an empty output.
Tensor upsample_forward(const Tensor& input, const UpsampleGeometry& g, bool linear);
/// Gradient w.r.t. an input of input_sizes from grad_out of upsample_forward with the same g.
Tensor upsample_backward(const Tensor& grad_out, const Shape& input_sizes,
                         const UpsampleGeometry& g, bool linear);

}  // namespace ops
}  // namespace sl
