// The "pool" family: 2-d max pooling (with indices), average pooling, adaptive average and
// adaptive max pooling (with indices) over contiguous [P, H, W] planes (P = N * C), forward and
// backward. Not differentiable (see autograd/ops/pool.h).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>

#include "core/dispatch.h"
#include "core/ops/conv.h"
#include "core/tensor.h"

namespace sl {

/// An adaptive pool's output_size as PyTorch takes it: one int for every dim, or D entries each an
/// int or None (std::nullopt: that dim keeps the input's size), e.g. `{std::nullopt, 7}` for
/// output_size=(None, 7). `scalar` records that one int was given (PyTorch's repr prints it so).
template <size_t D>
struct AdaptiveOutputSize {
  std::array<std::optional<int64_t>, D> v{};
  bool set = false;
  bool scalar = false;

  AdaptiveOutputSize() = default;
  AdaptiveOutputSize(int64_t x) : set(true), scalar(true) { v.fill(x); }  // NOLINT: as PyTorch's
  AdaptiveOutputSize(ExpandingArray<D> a);                                // NOLINT
  /// Exactly 1 or D entries (ValueError otherwise).
  AdaptiveOutputSize(std::initializer_list<std::optional<int64_t>> xs);
  const std::optional<int64_t>& operator[](size_t i) const { return v[i]; }
};

/// Geometry of a 2-d pooling window. Window (oh, ow) covers input rows
/// oh * stride_h - pad_h + i * dilation_h for i < kh (columns likewise); padded positions never
/// win a max and count for an average only with count_include_pad.
struct Pool2dGeometry {
  int64_t kh = 1, kw = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t out_h = 0, out_w = 0;
  bool count_include_pad = true;
  int64_t divisor_override = 0;  ///< avg: divide by this instead (0: unset)
};

/// out/indices [P, Ho, Wo]: max over each window of input [P, H, W]; indices (i64) are flat
/// positions h * W + w in the input plane, the first maximum on ties; NaN wins.
SL_DECLARE_KERNEL(max_pool2d_forward_kernel, void(const Tensor& out, const Tensor& indices,
                                                  const Tensor& input, const Pool2dGeometry& g));
/// grad_input [P, H, W] = scatter-add of grad_out [P, Ho, Wo] at indices (grad_input is
/// overwritten); indices are those of max_pool2d_forward_kernel with g.
///
/// Note [Max-pool backward order]
/// Where windows overlap (kernel 3, stride 2: ResNet's stem), an input element that is the
/// maximum of several windows receives several gradients. The CPU scatters plane by plane in
/// ascending output order (oh, ow), adding in the gradient's dtype from zero; the CUDA kernel
/// (core/cuda/pool.cu) gathers instead, one thread per input element over the windows with a tap
/// there (core/cuda/pool_windows.h), adding those whose index is that element in the same
/// ascending order and precision. So f32 and f64 gradients agree bit for bit and are the same on
/// every run, and 16-bit ones (summed in float, rounded once) are the float32 result's rounding.
/// The gather needs g, and finds only indices inside their own windows, as the forward's are.
SL_DECLARE_KERNEL(max_pool2d_backward_kernel, void(const Tensor& grad_input, const Tensor& grad_out,
                                                   const Tensor& indices, const Pool2dGeometry& g));
/// out [P, Ho, Wo] = window averages of input [P, H, W].
SL_DECLARE_KERNEL(avg_pool2d_forward_kernel,
                  void(const Tensor& out, const Tensor& input, const Pool2dGeometry& g));
/// grad_input [P, H, W] (overwritten) from grad_out [P, Ho, Wo].
SL_DECLARE_KERNEL(avg_pool2d_backward_kernel,
                  void(const Tensor& grad_input, const Tensor& grad_out, const Pool2dGeometry& g));
/// Adaptive average: out [P, Ho, Wo]; output row oh averages input rows
/// [floor(oh * H / Ho), ceil((oh + 1) * H / Ho)) (columns likewise).
SL_DECLARE_KERNEL(adaptive_avg_pool2d_forward_kernel, void(const Tensor& out, const Tensor& input));
/// grad_input [P, H, W] (overwritten) from grad_out [P, Ho, Wo].
SL_DECLARE_KERNEL(adaptive_avg_pool2d_backward_kernel,
                  void(const Tensor& grad_input, const Tensor& grad_out));
/// Adaptive max: out/indices [P, Ho, Wo] (Ho, Wo >= 1); output (oh, ow) is the max over the
/// adaptive window of adaptive_avg_pool2d_forward_kernel, indices (i64) flat h * W + w in the
/// input plane, PyTorch's rule as max_pool2d_forward_kernel: the first maximum on ties, a NaN
/// takes over (so of several NaNs the last wins).
SL_DECLARE_KERNEL(adaptive_max_pool2d_forward_kernel,
                  void(const Tensor& out, const Tensor& indices, const Tensor& input));
/// grad_input [P, H, W] (overwritten) = the sum of grad_out [P, Ho, Wo] at the indices of
/// adaptive_max_pool2d_forward_kernel, added in ascending output order from zero on CPU (a
/// scatter) and CUDA (a gather over the windows that hold each element), as Note [Max-pool
/// backward order] says for max_pool2d: the same bits on both, run after run.
SL_DECLARE_KERNEL(adaptive_max_pool2d_backward_kernel,
                  void(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices));

namespace ops {

/// Validates a pooling call on a 3-d [C, H, W] or 4-d [N, C, H, W] input and computes the
/// geometry (PyTorch's output-size rule, ceil_mode included: a last window that would start in
/// the right/bottom padding is dropped). stride unset = kernel_size. Throws ShapeError (rank,
/// output size < 1), ValueError (non-positive kernel/stride/dilation, padding > kernel / 2),
/// DTypeError. `op` names the caller.
Pool2dGeometry pool2d_geometry(const char* op, const Tensor& input, ExpandingArray<2> kernel_size,
                               ExpandingArray<2> stride, ExpandingArray<2> padding,
                               ExpandingArray<2> dilation, bool ceil_mode);
/// PyTorch's pooling output size along one dim (may be < 1: callers check), ceil_mode's rule
/// included (a last window that would start in the padding is dropped). stride > 0.
int64_t pool_output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                         bool ceil_mode);
/// (out, indices) of shape [..., Ho, Wo] for a 3-d or 4-d input.
std::pair<Tensor, Tensor> max_pool2d_forward(const Tensor& input, const Pool2dGeometry& g);
/// Gradient w.r.t. the input (input_sizes) from grad_out and the indices saved by
/// max_pool2d_forward with the same geometry g.
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_sizes,
                           const Pool2dGeometry& g);
Tensor avg_pool2d_forward(const Tensor& input, const Pool2dGeometry& g);
Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes,
                           const Pool2dGeometry& g);
/// output_size {Ho, Wo} (>= 0; a 0 gives an empty output, as PyTorch). Throws ShapeError for bad
/// ranks or sizes (a negative output size, an empty spatial input dim).
Tensor adaptive_avg_pool2d_forward(const Tensor& input, ExpandingArray<2> output_size);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes);
/// The output size {Ho, Wo} of an adaptive pool of input (its last two dims): None entries take
/// the input's size. Throws ValueError (unset output_size), ShapeError (a negative entry).
std::array<int64_t, 2> adaptive_output_size(const char* op, const Tensor& input,
                                            const AdaptiveOutputSize<2>& output_size);
/// (out, indices) [..., Ho, Wo] of a 3-d [C, H, W] or 4-d [N, C, H, W] input, as PyTorch's
/// adaptive_max_pool2d: N may be 0, the other dims must not; an output size of 0 gives empty
/// outputs (Note [Empty adaptive output]). Throws ShapeError (rank, an empty non-batch dim, a
/// negative output size), DTypeError (non-floating), ValueError (unset output_size).
std::pair<Tensor, Tensor> adaptive_max_pool2d_forward(const Tensor& input,
                                                      const AdaptiveOutputSize<2>& output_size);
/// Gradient w.r.t. the input (input_sizes) from grad_out and the indices of
/// adaptive_max_pool2d_forward (an empty grad_out gives zeros).
Tensor adaptive_max_pool2d_backward(const Tensor& grad_out, const Tensor& indices,
                                    const Shape& input_sizes);

}  // namespace ops
}  // namespace sl
