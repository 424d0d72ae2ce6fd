// Differentiable pooling: forward kernels of the pool family with their backward beside them.
#include "autograd/ops/pool.h"

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/index.h"
#include "autograd/ops/linear_pair.h"
#include "core/creation.h"
#include "core/ops/copy.h"

namespace sl {

// Note [Pool double backward]: every pool is linear in its input, and so is its gradient in
// grad_out. Under create_graph (Note [Double backward] in autograd/engine.cpp) a max pool's
// gradient is a recorded scatter_add of grad_out at the saved indices (its own gradient a
// gather), and an average pool's is its recorded adjoint, whose gradient is the average pool
// again (detail::record_linear_pair): each pair is closed under differentiation, so any order
// works. With grad mode off the kernels run as before.
namespace {

/// grad_out [..., Ho, Wo] scatter-added at the flat h * W + w indices of each [H, W] plane of
/// in_sizes: a max pool's gradient as recorded ops.
Tensor scatter_into_planes(const Tensor& g, const Tensor& indices, const Shape& in_sizes) {
  const int64_t plane = in_sizes[in_sizes.size() - 2] * in_sizes.back();
  const int64_t planes = plane == 0 ? 0 : shape_numel(in_sizes) / plane;
  Tensor z = zeros({planes, plane}, {.dtype = g.dtype(), .device = g.device()});
  if (planes == 0) return z.reshape(in_sizes);
  const int64_t per_plane = g.numel() / planes;
  return scatter_add(z, 1, indices.reshape({planes, per_plane}), g.reshape({planes, per_plane}))
      .reshape(in_sizes);
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input,
                                                  ExpandingArray<2> kernel_size,
                                                  ExpandingArray<2> stride,
                                                  ExpandingArray<2> padding,
                                                  ExpandingArray<2> dilation, bool ceil_mode) {
  Pool2dGeometry g =
      ops::pool2d_geometry("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode);
  auto [out, indices] = ops::max_pool2d_forward(input, g);
  if (needs_grad(input)) {
    Shape in_sizes = input.sizes();
    record(
        "MaxPool2DBackward", {input}, {&out},
        [in_sizes, g, si = SavedTensor(indices)](const BackwardCtx& c) -> variable_list {
          Tensor idx = si.unpack("MaxPool2DBackward");
          return {GradMode::is_enabled() ? scatter_into_planes(c.grad(), idx, in_sizes)
                                         : ops::max_pool2d_backward(c.grad(), idx, in_sizes, g)};
        },
        DoubleBackward::supported);
  }
  return {out, indices};
}

Tensor max_pool2d(const Tensor& input, ExpandingArray<2> kernel_size, ExpandingArray<2> stride,
                  ExpandingArray<2> padding, ExpandingArray<2> dilation, bool ceil_mode) {
  return max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool2d(const Tensor& input, ExpandingArray<2> kernel_size, ExpandingArray<2> stride,
                  ExpandingArray<2> padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  Pool2dGeometry g = ops::pool2d_geometry("avg_pool2d", input, kernel_size, stride, padding,
                                          ExpandingArray<2>(1), ceil_mode);
  SL_CHECK(!divisor_override || *divisor_override > 0,
           "avg_pool2d: divisor_override must be positive, got ", divisor_override.value_or(0));
  g.count_include_pad = count_include_pad;
  g.divisor_override = divisor_override.value_or(0);
  const Shape in_sizes = input.sizes();
  return detail::record_linear_pair(
      "AvgPool2DBackward", "AvgPool2DBackwardBackward", input,
      [g](const Tensor& t) { return ops::avg_pool2d_forward(t, g); },
      [in_sizes, g](const Tensor& t) { return ops::avg_pool2d_backward(t, in_sizes, g); });
}

Tensor adaptive_avg_pool2d(const Tensor& input, ExpandingArray<2> output_size) {
  const Shape in_sizes = input.sizes();
  return detail::record_linear_pair(
      "AdaptiveAvgPool2DBackward", "AdaptiveAvgPool2DBackwardBackward", input,
      [output_size](const Tensor& t) { return ops::adaptive_avg_pool2d_forward(t, output_size); },
      [in_sizes](const Tensor& t) { return ops::adaptive_avg_pool2d_backward(t, in_sizes); });
}

std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& input,
                                                           AdaptiveOutputSize<2> output_size) {
  auto [out, indices] = ops::adaptive_max_pool2d_forward(input, output_size);
  if (needs_grad(input)) {
    Shape in_sizes = input.sizes();
    record(
        "AdaptiveMaxPool2DBackward", {input}, {&out},
        [in_sizes, si = SavedTensor(indices)](const BackwardCtx& c) -> variable_list {
          Tensor idx = si.unpack("AdaptiveMaxPool2DBackward");
          return {GradMode::is_enabled()
                      ? scatter_into_planes(c.grad(), idx, in_sizes)
                      : ops::adaptive_max_pool2d_backward(c.grad(), idx, in_sizes)};
        },
        DoubleBackward::supported);
  }
  return {out, indices};
}

Tensor adaptive_max_pool2d(const Tensor& input, AdaptiveOutputSize<2> output_size) {
  return adaptive_max_pool2d_with_indices(input, output_size).first;
}

namespace {

/// Checks a 1-d pooling input: defined, [C, L] or [N, C, L], floating, non-empty L.
void check_pool1d_input(const char* op, const Tensor& input) {
  ops::check_defined(op, input);
  SL_CHECK_SHAPE(input.dim() == 2 || input.dim() == 3, op,
                 ": expected a 2-d [C, L] or 3-d [N, C, L] input, got ", shape_str(input.sizes()));
  SL_CHECK_DTYPE(is_floating(input.dtype()), op, ": expected a floating input, got ",
                 dtype_name(input.dtype()));
  SL_CHECK_SHAPE(input.size(-1) > 0, op, ": expected a non-empty length dim, got ",
                 shape_str(input.sizes()));
}

/// The 1-d arguments checked in 1-d terms, then widened to the 2-d op's over a height of 1:
/// kernel {1, k}, stride {1, s} (unset: k), padding {0, p}, dilation {1, d}.
struct Pool1dAsPool2d {
  ExpandingArray<2> kernel_size, stride, padding, dilation;
};

/// The 1-d arguments with unset ones filled in, checked, and the output length (maybe < 1).
struct Pool1dArgs {
  int64_t k, s, p, d, out;
};

Pool1dArgs check_pool1d_args(const char* op, const Tensor& input, ExpandingArray<1> kernel_size,
                             ExpandingArray<1> stride, ExpandingArray<1> padding,
                             ExpandingArray<1> dilation, bool ceil_mode) {
  check_pool1d_input(op, input);
  SL_CHECK(kernel_size.set, op, ": kernel_size must be given");
  const int64_t k = kernel_size[0];
  const int64_t s = stride.set ? stride[0] : k;
  const int64_t p = padding.set ? padding[0] : 0;
  const int64_t d = dilation.set ? dilation[0] : 1;
  SL_CHECK(k > 0, op, ": kernel_size must be positive, got ", k);
  SL_CHECK(s > 0, op, ": stride must be positive, got ", s);
  SL_CHECK(d > 0, op, ": dilation must be positive, got ", d);
  SL_CHECK(p >= 0 && p <= k / 2, op,
           ": padding should be non-negative and at most half of the kernel size, got padding ", p,
           " for kernel_size ", k);
  return {k, s, p, d, ops::pool_output_size(input.size(-1), k, p, s, d, ceil_mode)};
}

/// ShapeError naming op unless the output length is at least `min_out`.
void check_pool1d_output(const char* op, const Tensor& input, const Pool1dArgs& a,
                         int64_t min_out) {
  SL_CHECK_SHAPE(a.out >= min_out, op, ": input of shape ", shape_str(input.sizes()),
                 " is too small for kernel_size ", a.k, " with padding ", a.p, " and dilation ",
                 a.d, " (output size ", a.out, ")");
}

Pool1dAsPool2d pool1d_as_pool2d(const char* op, const Tensor& input, ExpandingArray<1> kernel_size,
                                ExpandingArray<1> stride, ExpandingArray<1> padding,
                                ExpandingArray<1> dilation, bool ceil_mode) {
  const Pool1dArgs a =
      check_pool1d_args(op, input, kernel_size, stride, padding, dilation, ceil_mode);
  check_pool1d_output(op, input, a, 1);
  return {ExpandingArray<2>({1, a.k}), ExpandingArray<2>({1, a.s}), ExpandingArray<2>({0, a.p}),
          ExpandingArray<2>({1, a.d})};
}

}  // namespace

std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& input,
                                                  ExpandingArray<1> kernel_size,
                                                  ExpandingArray<1> stride,
                                                  ExpandingArray<1> padding,
                                                  ExpandingArray<1> dilation, bool ceil_mode) {
  const Pool1dAsPool2d a =
      pool1d_as_pool2d("max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode);
  // [N, C, 1, L] (or [C, 1, L]); the flat index h * L + w of the 2-d op is w with h = 0
  auto [out, indices] = max_pool2d_with_indices(input.unsqueeze(-2), a.kernel_size, a.stride,
                                                a.padding, a.dilation, ceil_mode);
  return {out.squeeze(-2), indices.squeeze(-2)};
}

// Note [Empty max_pool1d]: PyTorch 1.13's max_pool1d without indices and without a gradient to
// record (its CPU fast path) accepts an output length of 0 and returns an empty [N, C, 0]; with
// indices, with an input that requires grad under grad mode, and in max_pool2d and the average
// pools, it throws "Output size is too small". A negative length throws everywhere ("Invalid
// computed output size"). Followed here on every device (PyTorch's CUDA path throws at 0).
Tensor max_pool1d(const Tensor& input, ExpandingArray<1> kernel_size, ExpandingArray<1> stride,
                  ExpandingArray<1> padding, ExpandingArray<1> dilation, bool ceil_mode) {
  if (!needs_grad(input)) {
    const Pool1dArgs a =
        check_pool1d_args("max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode);
    check_pool1d_output("max_pool1d", input, a, 0);
    if (a.out == 0) {
      Shape shape = input.sizes();
      shape.back() = 0;
      return empty(shape, {.dtype = input.dtype(), .device = input.device()});
    }
  }
  return max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool1d(const Tensor& input, ExpandingArray<1> kernel_size, ExpandingArray<1> stride,
                  ExpandingArray<1> padding, bool ceil_mode, bool count_include_pad) {
  const Pool1dAsPool2d a =
      pool1d_as_pool2d("avg_pool1d", input, kernel_size, stride, padding, 1, ceil_mode);
  return avg_pool2d(input.unsqueeze(-2), a.kernel_size, a.stride, a.padding, ceil_mode,
                    count_include_pad)
      .squeeze(-2);
}

Tensor adaptive_avg_pool1d(const Tensor& input, ExpandingArray<1> output_size) {
  check_pool1d_input("adaptive_avg_pool1d", input);
  SL_CHECK(output_size.set, "adaptive_avg_pool1d: output_size must be given");
  SL_CHECK_SHAPE(output_size[0] >= 0, "adaptive_avg_pool1d: output_size must be non-negative, got ",
                 output_size[0]);
  return adaptive_avg_pool2d(input.unsqueeze(-2), ExpandingArray<2>({1, output_size[0]}))
      .squeeze(-2);
}

std::pair<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& input,
                                                           ExpandingArray<1> output_size) {
  const char* op = "adaptive_max_pool1d";
  ops::check_defined(op, input);
  SL_CHECK_SHAPE(input.dim() == 2 || input.dim() == 3, op,
                 ": expected a 2-d [C, L] or 3-d [N, C, L] input, got ", shape_str(input.sizes()));
  SL_CHECK_DTYPE(is_floating(input.dtype()), op, ": expected a floating input, got ",
                 dtype_name(input.dtype()));
  // as PyTorch: every dim but a 3-d input's batch dim must be non-empty
  for (int64_t d = input.dim() - 2; d < input.dim(); ++d) {
    SL_CHECK_SHAPE(input.size(d) > 0, op, ": expected non-empty non-batch dims, got ",
                   shape_str(input.sizes()), " with dim ", d, " empty");
  }
  SL_CHECK(output_size.set, op, ": output_size must be given");
  SL_CHECK_SHAPE(output_size[0] >= 0, op, ": output_size must be non-negative, got ",
                 output_size[0]);
  // [N, C, 1, L] (or [C, 1, L]); the flat index h * L + w of the 2-d op is w with h = 0
  auto [out, indices] =
      adaptive_max_pool2d_with_indices(input.unsqueeze(-2), {int64_t{1}, output_size[0]});
  return {out.squeeze(-2), indices.squeeze(-2)};
}

Tensor adaptive_max_pool1d(const Tensor& input, ExpandingArray<1> output_size) {
  return adaptive_max_pool1d_with_indices(input, output_size).first;
}

}  // namespace sl
