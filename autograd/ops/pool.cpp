// Differentiable pooling: forward kernels of the pool family with their backward beside them.
#include "autograd/ops/pool.h"

#include "autograd/function.h"
#include "core/ops/copy.h"

namespace sl {

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
          return {ops::max_pool2d_backward(c.grad(), si.unpack("MaxPool2DBackward"), in_sizes, g)};
        });
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
  Tensor out = ops::avg_pool2d_forward(input, g);
  if (needs_grad(input)) {
    Shape in_sizes = input.sizes();
    record("AvgPool2DBackward", {input}, {&out},
           [in_sizes, g](const BackwardCtx& c) -> variable_list {
             return {ops::avg_pool2d_backward(c.grad(), in_sizes, g)};
           });
  }
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& input, ExpandingArray<2> output_size) {
  Tensor out = ops::adaptive_avg_pool2d_forward(input, output_size);
  if (needs_grad(input)) {
    Shape in_sizes = input.sizes();
    record("AdaptiveAvgPool2DBackward", {input}, {&out},
           [in_sizes](const BackwardCtx& c) -> variable_list {
             return {ops::adaptive_avg_pool2d_backward(c.grad(), in_sizes)};
           });
  }
  return out;
}

}  // namespace sl
