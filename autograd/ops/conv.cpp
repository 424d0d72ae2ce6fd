// Differentiable convolutions: the forward calls the conv family's kernels and records the
// backward (grad input, weight, bias in one kernel call) beside it.
#include "autograd/ops/conv.h"

#include "autograd/function.h"
#include "core/amp.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/ops/view.h"

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

/// x zero-padded at the end of H and W by t.extra_h / t.extra_w (Note [Transposed convolution]).
Tensor pad_extra(const Tensor& x, const ConvTranspose2dGeometry& t) {
  if (t.extra_h == 0 && t.extra_w == 0) return x;
  return ops::pad(x, {0, t.extra_w, 0, t.extra_h}, "constant", Scalar(0.0));
}

/// The forward of conv_transpose2d: the backward-data pass of g over an input of sizes ys
/// (Note [Transposed convolution]). 16-bit floats are computed in float32 here, as the conv
/// family does, so that the shape-only input is never cast (read) in conv2d_backward.
Tensor transposed_forward(const Tensor& xp, const Tensor& w, const Shape& ys,
                          const Conv2dGeometry& g) {
  if (xp.dtype() == DType::f16 || xp.dtype() == DType::bf16) {
    return ops::cast(transposed_forward(ops::cast(xp, DType::f32), ops::cast(w, DType::f32), ys, g),
                     xp.dtype());
  }
  const Tensor y_shape = ops::empty(ys, xp.dtype(), xp.device());  // shape only: never read
  return ops::conv2d_backward(xp, y_shape, w, g, {true, false, false})[0];
}

/// conv_transpose2d over 4-d tensors with a checked geometry (Note [Transposed convolution]):
/// the forward is the backward-data pass of the convolution t.conv, whose input has y's shape.
Tensor conv_transpose2d_4d(const Tensor& x, const Tensor& w, const Tensor& bias,
                           const ConvTranspose2dGeometry& t) {
  const Conv2dGeometry& g = t.conv;
  const Shape ys{x.size(0), w.size(1) * g.groups, t.out_h, t.out_w};
  const Tensor xp = pad_extra(x, t);
  Tensor out = transposed_forward(xp, w, ys, g);
  if (bias.defined()) {
    ops::binary_(BinaryOp::add, out, ops::view(bias, {1, bias.size(0), 1, 1}));
  }
  if (needs_grad(x, w, bias)) {
    // grad input needs the weight, grad weight needs the (padded) input
    SavedTensor sx = w.requires_grad() ? SavedTensor(xp) : SavedTensor();
    SavedTensor sw(w);
    const int64_t H = x.size(2), W = x.size(3);
    record("ConvTranspose2dBackward", {x, w, bias}, {&out},
           [sx, sw, t, H, W](const BackwardCtx& c) {
             const Conv2dGeometry& g = t.conv;
             Tensor wv = sw.unpack("ConvTranspose2dBackward");
             Tensor gy = c.grad();
             Tensor gx, gw, gb;
             if (c.needs(0)) {
               // the ordinary convolution of grad_y; its extra rows/columns belong to the padding
               gx = ops::conv2d_forward(gy, wv, Tensor(), g);
               if (t.extra_h != 0 || t.extra_w != 0) {
                 gx = ops::contiguous(ops::narrow(ops::narrow(gx, 2, 0, H), 3, 0, W));
               }
             }
             if (c.needs(1)) {
               Tensor xv = sx.unpack("ConvTranspose2dBackward");
               // backward-filter of that convolution: grad_y is its input, x its grad_out
               gw = ops::conv2d_backward(xv, gy, wv, g, {false, true, false})[1];
             }
             if (c.needs(2)) gb = ops::reduce(ReduceOp::sum, gy, {0, 2, 3}, false);
             return variable_list{gx, gw, gb};
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

Tensor conv_transpose2d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in,
                        ExpandingArray<2> stride, ExpandingArray<2> padding,
                        ExpandingArray<2> output_padding, int64_t groups,
                        ExpandingArray<2> dilation) {
  ops::check_defined("conv_transpose2d", input_in);
  // autocast `lower` policy, as conv2d (Note [Autocast] in core/amp.h)
  const Tensor input = autocast(input_in, AmpPolicy::lower);
  const Tensor weight = autocast(weight_in, AmpPolicy::lower);
  const Tensor bias = autocast(bias_in, AmpPolicy::lower);
  SL_CHECK_SHAPE(input.dim() == 3 || input.dim() == 4,
                 "conv_transpose2d: expected a 3-d (unbatched) or 4-d input, got ",
                 shape_str(input.sizes()));
  const bool batched = input.dim() == 4;
  Tensor x = batched ? input : input.unsqueeze(0);
  const ConvTranspose2dGeometry t = ops::conv_transpose2d_geometry(
      "conv_transpose2d", x, weight, bias, stride, padding, output_padding, dilation, groups);
  Tensor out = conv_transpose2d_4d(x, weight, bias, t);
  return batched ? out : out.squeeze(0);
}

Tensor conv_transpose1d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in,
                        ExpandingArray<1> stride, ExpandingArray<1> padding,
                        ExpandingArray<1> output_padding, int64_t groups,
                        ExpandingArray<1> dilation) {
  ops::check_defined("conv_transpose1d", input_in);
  ops::check_defined("conv_transpose1d", weight_in, "weight");
  // autocast `lower` policy, as conv1d (Note [Autocast] in core/amp.h)
  const Tensor input = autocast(input_in, AmpPolicy::lower);
  const Tensor weight = autocast(weight_in, AmpPolicy::lower);
  const Tensor bias = autocast(bias_in, AmpPolicy::lower);
  SL_CHECK_SHAPE(input.dim() == 2 || input.dim() == 3,
                 "conv_transpose1d: expected a 2-d (unbatched) or 3-d input, got ",
                 shape_str(input.sizes()));
  SL_CHECK_SHAPE(weight.dim() == 3,
                 "conv_transpose1d: expected a 3-d weight [in, out / groups, k], got ",
                 shape_str(weight.sizes()));
  const bool batched = input.dim() == 3;
  Tensor x = (batched ? input : input.unsqueeze(0)).unsqueeze(2);  // [N, C, 1, L]
  // checked here so that messages show the 3-d weight (conv_transpose2d_geometry checks the rest)
  SL_CHECK_SHAPE(weight.size(2) > 0,
                 "conv_transpose1d: kernel size must be positive, got weight of shape ",
                 shape_str(weight.sizes()));
  SL_CHECK_SHAPE(input.size(-2) == weight.size(0), "conv_transpose1d: input has ", input.size(-2),
                 " channels but weight of shape ", shape_str(weight.sizes()),
                 " ([in, out / groups, k]) expects ", weight.size(0));
  const int64_t s1 = stride.set ? stride[0] : 1, d1 = dilation.set ? dilation[0] : 1;
  const int64_t op1 = output_padding.set ? output_padding[0] : 0;
  SL_CHECK(op1 < s1 || op1 < d1,
           "conv_transpose1d: output_padding must be smaller than either stride or dilation, got "
           "output_padding ",
           op1, ", stride ", s1, ", dilation ", d1);
  // height 1: kernel 1, stride 1, no padding, output_padding 0, dilation 1
  auto two = [](const ExpandingArray<1>& a, int64_t h, int64_t unset) {
    return ExpandingArray<2>({h, a.set ? a[0] : unset});
  };
  const ConvTranspose2dGeometry t = ops::conv_transpose2d_geometry(
      "conv_transpose1d", x, weight.unsqueeze(2), bias, two(stride, 1, 1), two(padding, 0, 0),
      two(output_padding, 0, 0), two(dilation, 1, 1), groups);
  Tensor out = conv_transpose2d_4d(x, weight.unsqueeze(2), bias, t).squeeze(2);
  return batched ? out : out.squeeze(0);
}

}  // namespace sl
