// The "upsample" family: nearest (legacy and exact), linear (1-d linear, 2-d bilinear, 3-d
// trilinear), bicubic and antialiased bilinear / bicubic resampling of contiguous [P, H, W] planes
// (P = N * C; a 1-d input is a plane of height 1; trilinear and nearest take [P, D, H, W] volumes
// for 5-d inputs), forward
// and backward, with PyTorch 1.13's index rules (core/ops/upsample_index.h, Note [Upsample source
// index]). Not differentiable (see autograd/ops/upsample.h).
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// Output size of a resampling and what its index rule needs. For a 1-d input, in_h = out_h = 1
/// (every rule copies along a dimension whose sizes agree).
struct UpsampleGeometry {
  int64_t out_d = 1, out_h = 1, out_w = 1;       ///< out_d: trilinear only
  double scale_d = 0, scale_h = 0, scale_w = 0;  ///< scale_factor given per dim (0: none)
  bool align_corners = false;                    ///< linear, cubic and antialias modes
  bool exact = false;                            ///< nearest only: "nearest-exact"'s index rule
  bool cubic = false;  ///< antialias only: the cubic filter (else the triangle)
};

/// Which resampling rule (Note [Upsample source index]).
enum class UpsampleMode {
  nearest,    ///< nearest or nearest-exact (g.exact)
  linear,     ///< linear / bilinear on [P, H, W] planes, trilinear on 5-d inputs
  cubic,      ///< bicubic, 4-d inputs
  antialias,  ///< antialiased bilinear / bicubic (g.cubic), 4-d inputs
};

/// out [P, Ho, Wo]: out[p, oh, ow] = input[p, nearest_source(oh), nearest_source(ow)] (g.exact
/// selects nearest-exact's rule); on [P, D, H, W] volumes likewise per dim to [P, out_d, Ho, Wo].
SL_DECLARE_KERNEL(upsample_nearest_forward_kernel,
                  void(const Tensor& out, const Tensor& input, const UpsampleGeometry& g));
/// grad_input [P, H, W] or [P, D, H, W] (overwritten) = for each input element, the sum of
/// grad_out over the outputs that read it.
///
/// Note [Upsample backward order]
/// The CPU scatters plane by plane in ascending output order (od, oh, ow; for linear, the taps
/// (i0, i0), (i0, i1), (i1, i0), (i1, i1) of each output in that order; trilinear, bicubic and
/// antialias their taps in row-major order too), adding from zero in the gradient's dtype. The CUDA
/// kernels gather instead: one thread per input element sums, in that same order, the outputs whose
/// taps include it (a range per dimension, found by binary search since source indices are
/// monotone), so they need no atomics and give the same result on every run; 16-bit gradients are
/// summed in float and rounded once.
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
/// out [P, Do, Ho, Wo]: trilinear interpolation of input [P, D, H, W].
SL_DECLARE_KERNEL(upsample_trilinear_forward_kernel,
                  void(const Tensor& out, const Tensor& input, const UpsampleGeometry& g));
/// grad_input [P, D, H, W] (overwritten) from grad_out [P, Do, Ho, Wo]: the 8 taps of each output
/// in the order (d0, h0, w0), (d0, h0, w1), ..., (d1, h1, w1) (Note [Upsample backward order]).
SL_DECLARE_KERNEL(upsample_trilinear_backward_kernel,
                  void(const Tensor& grad_input, const Tensor& grad_out,
                       const UpsampleGeometry& g));
/// out [P, Ho, Wo]: bicubic interpolation of input [P, H, W] (4 x 4 clamped taps).
SL_DECLARE_KERNEL(upsample_cubic_forward_kernel,
                  void(const Tensor& out, const Tensor& input, const UpsampleGeometry& g));
/// grad_input [P, H, W] (overwritten): each output's 16 taps in the order (kh, kw) row-major
/// (Note [Upsample backward order]).
SL_DECLARE_KERNEL(upsample_cubic_backward_kernel,
                  void(const Tensor& grad_input, const Tensor& grad_out,
                       const UpsampleGeometry& g));
/// out [P, Ho, Wo]: antialiased bilinear / bicubic (g.cubic) resampling of input [P, H, W]: the
/// window sums along W first, then along H (PyTorch's separable CPU order).
SL_DECLARE_KERNEL(upsample_aa_forward_kernel,
                  void(const Tensor& out, const Tensor& input, const UpsampleGeometry& g));
/// grad_input [P, H, W] (overwritten): each output's window in the order (h, w) row-major
/// (Note [Upsample backward order]).
SL_DECLARE_KERNEL(upsample_aa_backward_kernel,
                  void(const Tensor& grad_input, const Tensor& grad_out,
                       const UpsampleGeometry& g));

namespace ops {

/// Resamples a 3-d [N, C, W] (g.out_h 1), 4-d [N, C, H, W] or (nearest, linear) 5-d [N, C, D, H, W]
/// input to [.., out_d, out_h, out_w] with `mode`'s rule. Validation is the caller's
/// (sl::interpolate); an empty batch gives an empty output.
Tensor upsample_forward(const Tensor& input, const UpsampleGeometry& g, UpsampleMode mode);
/// Gradient w.r.t. an input of input_sizes from grad_out of upsample_forward with the same g.
Tensor upsample_backward(const Tensor& grad_out, const Shape& input_sizes,
                         const UpsampleGeometry& g, UpsampleMode mode);

}  // namespace ops
}  // namespace sl
