// Differentiable convolutions: the forward calls the conv family's kernels and records the
// backward (grad input, weight, bias in one kernel call) beside it.
#include "autograd/ops/conv.h"

#include "autograd/function.h"
#include "core/amp.h"
#include "core/ops/copy.h"

namespace sl {

namespace {

/// conv2d over 4-d tensors with a checked geometry.
Tensor conv2d_4d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dGeometry& g) {
  Tensor out = ops::conv2d_forward(x, w, bias, g);
  if (needs_grad(x, w, bias)) {
    // grad input needs the weight, grad weight needs the input
    SavedTensor sx = w.requires_grad() ? SavedTensor(x) : SavedTensor();
    SavedTensor sw(w);
    Shape xs = x.sizes();
    record("Conv2dBackward", {x, w, bias}, {&out}, [sx, sw, xs, g](const BackwardCtx& c) {
      Tensor xv = sx.unpack("Conv2dBackward"), wv = sw.unpack("Conv2dBackward");
      if (!xv.defined()) xv = ops::empty(xs, wv.dtype(), wv.device());  // shape only
      auto r = ops::conv2d_backward(c.grad(), xv, wv, g, {c.needs(0), c.needs(1), c.needs(2)});
      return variable_list{r[0], r[1], r[2]};
    });
  }
  return out;
}

}  // namespace

Tensor conv2d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in,
              ExpandingArray<2> stride, const ConvPadding<2>& padding, ExpandingArray<2> dilation,
              int64_t groups) {
  ops::check_defined("conv2d", input_in);
  // autocast `lower` policy (Note [Autocast] in core/amp.h)
  const Tensor input = autocast(input_in, AmpPolicy::lower);
  const Tensor weight = autocast(weight_in, AmpPolicy::lower);
  const Tensor bias = autocast(bias_in, AmpPolicy::lower);
  SL_CHECK_SHAPE(input.dim() == 3 || input.dim() == 4,
                 "conv2d: expected a 3-d (unbatched) or 4-d input, got ", shape_str(input.sizes()));
  const bool batched = input.dim() == 4;
  Tensor x = batched ? input : input.unsqueeze(0);
  Conv2dGeometry g =
      ops::conv2d_geometry("conv2d", x, weight, bias, stride, padding, dilation, groups);
  Tensor out = conv2d_4d(x, weight, bias, g);
  return batched ? out : out.squeeze(0);
}

Tensor conv1d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in,
              ExpandingArray<1> stride, const ConvPadding<1>& padding, ExpandingArray<1> dilation,
              int64_t groups) {
  ops::check_defined("conv1d", input_in);
  ops::check_defined("conv1d", weight_in, "weight");
  // autocast `lower` policy (Note [Autocast] in core/amp.h)
  const Tensor input = autocast(input_in, AmpPolicy::lower);
  const Tensor weight = autocast(weight_in, AmpPolicy::lower);
  const Tensor bias = autocast(bias_in, AmpPolicy::lower);
  SL_CHECK_SHAPE(input.dim() == 2 || input.dim() == 3,
                 "conv1d: expected a 2-d (unbatched) or 3-d input, got ", shape_str(input.sizes()));
  SL_CHECK_SHAPE(weight.dim() == 3, "conv1d: expected a 3-d weight [out, in / groups, k], got ",
                 shape_str(weight.sizes()));
  SL_CHECK_SHAPE(weight.size(2) > 0, "conv1d: kernel size must be positive, got weight of shape ",
                 shape_str(weight.sizes()));
  SL_CHECK_SHAPE(groups < 1 || weight.size(1) * groups == input.size(-2), "conv1d: input has ",
                 input.size(-2), " channels but weight of shape ", shape_str(weight.sizes()),
                 " with groups=", groups, " expects ", weight.size(1) * groups);
  const bool batched = input.dim() == 3;
  Tensor x = (batched ? input : input.unsqueeze(0)).unsqueeze(2);  // [N, C, 1, L]
  ConvPadding<2> pad2;
  pad2.mode = static_cast<ConvPadding<2>::Mode>(padding.mode);
  pad2.amount = ExpandingArray<2>({0, padding.amount[0]});
  ExpandingArray<2> s2 = stride.set ? ExpandingArray<2>({1, stride[0]}) : ExpandingArray<2>();
  ExpandingArray<2> d2 = dilation.set ? ExpandingArray<2>({1, dilation[0]}) : ExpandingArray<2>();
  Tensor w = weight.unsqueeze(2);
  Conv2dGeometry g = ops::conv2d_geometry("conv1d", x, w, bias, s2, pad2, d2, groups);
  Tensor out = conv2d_4d(x, w, bias, g).squeeze(2);
  return batched ? out : out.squeeze(0);
}

}  // namespace sl
