// Differentiable convolutions: the forward calls the conv family's kernels and records the
// backward (grad input, weight, bias in one kernel call) beside it.
//
// Note [Conv double backward]
// A convolution y = conv(x, w) with geometry g is bilinear, and so are its two gradient maps:
//   gx = input_grad(gy, w)   (the backward-data pass, = conv_transpose at the kernel level)
//   gw = weight_grad(x, gy)  (the backward-filter pass)
// and the three are adjoint to each other: <conv(x, w), gy> = <x, input_grad(gy, w)> =
// <w, weight_grad(x, gy)>. So the gradient of each w.r.t. each argument is one of the others:
//   conv(x, w):           d/dx = input_grad(G, w),   d/dw = weight_grad(x, G)
//   input_grad(gy, w):    d/dgy = conv(G, w),        d/dw = weight_grad(G, gy)
//   weight_grad(x, gy):   d/dx = input_grad(gy, G),  d/dgy = conv(x, G)
// (G the gradient arriving at the map's output). conv2d_4d, conv_input_grad and
// conv_weight_grad record these three maps (DoubleBackward::supported); their backwards call
// the kernels in a plain backward (the first-order nodes exactly as before) and the recorded
// maps while a backward records a graph (create_graph), which makes every order differentiable.
// conv_transpose2d is input_grad plus bias (and output_padding's zero rows, Note [Transposed
// convolution]); its backward is conv and weight_grad with the roles above.
#include "autograd/ops/conv.h"

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/shape.h"
#include "core/amp.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/ops/view.h"

namespace sl {

namespace {

bool is_16bit(DType t) {
  return t == DType::f16 || t == DType::bf16;
}

/// The backward-data pass of g (kernels only): the gradient w.r.t. an input of sizes xs for
/// grad_out gy. 16-bit floats are computed in float32 here, as the conv family does, so that the
/// shape-only input is never cast (read) in conv2d_backward.
Tensor input_grad_kernel(const Tensor& gy, const Tensor& w, const Shape& xs,
                         const Conv2dGeometry& g) {
  if (is_16bit(gy.dtype())) {
    return ops::cast(input_grad_kernel(ops::cast(gy, DType::f32), ops::cast(w, DType::f32), xs, g),
                     gy.dtype());
  }
  const Tensor x_shape = ops::empty(xs, gy.dtype(), gy.device());  // shape only: never read
  return ops::conv2d_backward(gy, x_shape, w, g, {true, false, false})[0];
}

/// The backward-filter pass of g (kernels only): the gradient w.r.t. a weight of sizes ws for
/// input x and grad_out gy; 16-bit floats in float32, the shape-only weight never read.
Tensor weight_grad_kernel(const Tensor& x, const Tensor& gy, const Shape& ws,
                          const Conv2dGeometry& g) {
  if (is_16bit(x.dtype())) {
    return ops::cast(weight_grad_kernel(ops::cast(x, DType::f32), ops::cast(gy, DType::f32), ws, g),
                     x.dtype());
  }
  const Tensor w_shape = ops::empty(ws, x.dtype(), x.device());  // shape only: never read
  return ops::conv2d_backward(gy, x, w_shape, g, {false, true, false})[1];
}

Tensor conv2d_4d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dGeometry& g);
Tensor conv_input_grad(const Tensor& gy, const Tensor& w, const Shape& xs, const Conv2dGeometry& g);
Tensor conv_weight_grad(const Tensor& x, const Tensor& gy, const Shape& ws,
                        const Conv2dGeometry& g);

/// conv (no bias) of the differentiable ops while a backward records a graph, else the kernel.
Tensor conv_of(const Tensor& x, const Tensor& w, const Conv2dGeometry& g) {
  return GradMode::is_enabled() ? conv2d_4d(x, w, Tensor(), g)
                                : ops::conv2d_forward(x, w, Tensor(), g);
}
Tensor input_grad_of(const Tensor& gy, const Tensor& w, const Shape& xs, const Conv2dGeometry& g) {
  return GradMode::is_enabled() ? conv_input_grad(gy, w, xs, g) : input_grad_kernel(gy, w, xs, g);
}
Tensor weight_grad_of(const Tensor& x, const Tensor& gy, const Shape& ws, const Conv2dGeometry& g) {
  return GradMode::is_enabled() ? conv_weight_grad(x, gy, ws, g) : weight_grad_kernel(x, gy, ws, g);
}

/// input_grad(gy, w) over an input of sizes xs, recorded (Note [Conv double backward]).
Tensor conv_input_grad(const Tensor& gy, const Tensor& w, const Shape& xs,
                       const Conv2dGeometry& g) {
  Tensor out = input_grad_kernel(gy, w, xs, g);
  if (needs_grad(gy, w)) {
    SavedTensor sgy = w.requires_grad() ? SavedTensor(gy) : SavedTensor();
    SavedTensor sw = gy.requires_grad() ? SavedTensor(w) : SavedTensor();
    const Shape ws = w.sizes();
    record(
        "ConvInputGradBackward", {gy, w}, {&out},
        [sgy, sw, ws, g](const BackwardCtx& c) {
          Tensor ggy, gw;
          if (c.needs(0)) ggy = conv_of(c.grad(), sw.unpack("ConvInputGradBackward"), g);
          if (c.needs(1)) {
            gw = weight_grad_of(c.grad(), sgy.unpack("ConvInputGradBackward"), ws, g);
          }
          return variable_list{ggy, gw};
        },
        DoubleBackward::supported);
  }
  return out;
}

/// weight_grad(x, gy) for a weight of sizes ws, recorded (Note [Conv double backward]).
Tensor conv_weight_grad(const Tensor& x, const Tensor& gy, const Shape& ws,
                        const Conv2dGeometry& g) {
  Tensor out = weight_grad_kernel(x, gy, ws, g);
  if (needs_grad(x, gy)) {
    SavedTensor sx = gy.requires_grad() ? SavedTensor(x) : SavedTensor();
    SavedTensor sgy = x.requires_grad() ? SavedTensor(gy) : SavedTensor();
    const Shape xs = x.sizes();
    record(
        "ConvWeightGradBackward", {x, gy}, {&out},
        [sx, sgy, xs, g](const BackwardCtx& c) {
          Tensor gx, ggy;
          if (c.needs(0)) {
            gx = input_grad_of(sgy.unpack("ConvWeightGradBackward"), c.grad(), xs, g);
          }
          if (c.needs(1)) ggy = conv_of(sx.unpack("ConvWeightGradBackward"), c.grad(), g);
          return variable_list{gx, ggy};
        },
        DoubleBackward::supported);
  }
  return out;
}

/// conv2d over 4-d tensors with a checked geometry.
Tensor conv2d_4d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dGeometry& g) {
  Tensor out = ops::conv2d_forward(x, w, bias, g);
  if (needs_grad(x, w, bias)) {
    // grad input needs the weight, grad weight needs the input
    SavedTensor sx = w.requires_grad() ? SavedTensor(x) : SavedTensor();
    SavedTensor sw(w);
    Shape xs = x.sizes();
    record(
        "Conv2dBackward", {x, w, bias}, {&out},
        [sx, sw, xs, g](const BackwardCtx& c) {
          Tensor xv = sx.unpack("Conv2dBackward"), wv = sw.unpack("Conv2dBackward");
          if (GradMode::is_enabled()) {
            // create_graph: the recorded maps (Note [Conv double backward]), the same values
            Tensor gx, gw, gb;
            if (c.needs(0)) gx = conv_input_grad(c.grad(), wv, xs, g);
            if (c.needs(1)) gw = conv_weight_grad(xv, c.grad(), wv.sizes(), g);
            if (c.needs(2)) gb = sum(c.grad(), {0, 2, 3});
            return variable_list{gx, gw, gb};
          }
          if (!xv.defined()) xv = ops::empty(xs, wv.dtype(), wv.device());  // shape only
          auto r = ops::conv2d_backward(c.grad(), xv, wv, g, {c.needs(0), c.needs(1), c.needs(2)});
          return variable_list{r[0], r[1], r[2]};
        },
        DoubleBackward::supported);
  }
  return out;
}

/// x zero-padded at the end of H and W by t.extra_h / t.extra_w (Note [Transposed convolution]):
/// with the kernel, or with differentiable ops (zero blocks joined by cat) when `graph`.
Tensor pad_extra(const Tensor& x, const ConvTranspose2dGeometry& t, bool graph) {
  if (t.extra_h == 0 && t.extra_w == 0) return x;
  if (!graph) {
    return ops::pad(x, {0, t.extra_w, 0, t.extra_h}, "constant", Scalar(0.0));
  }
  const TensorOptions like{.dtype = x.dtype(), .device = x.device()};
  Tensor r = x;
  if (t.extra_h != 0) {
    r = cat({r, zeros({r.size(0), r.size(1), t.extra_h, r.size(3)}, like)}, 2);
  }
  if (t.extra_w != 0) {
    r = cat({r, zeros({r.size(0), r.size(1), r.size(2), t.extra_w}, like)}, 3);
  }
  return r;
}

/// conv_transpose2d over 4-d tensors with a checked geometry (Note [Transposed convolution]):
/// the forward is the backward-data pass of the convolution t.conv, whose input has y's shape.
Tensor conv_transpose2d_4d(const Tensor& x, const Tensor& w, const Tensor& bias,
                           const ConvTranspose2dGeometry& t) {
  const Conv2dGeometry& g = t.conv;
  const Shape ys{x.size(0), w.size(1) * g.groups, t.out_h, t.out_w};
  Tensor out = input_grad_kernel(pad_extra(x, t, false), w, ys, g);
  if (bias.defined()) {
    ops::binary_(BinaryOp::add, out, ops::view(bias, {1, bias.size(0), 1, 1}));
  }
  if (needs_grad(x, w, bias)) {
    // grad input needs the weight, grad weight needs the input (padded again in the backward)
    SavedTensor sx = w.requires_grad() ? SavedTensor(x) : SavedTensor();
    SavedTensor sw(w);
    const int64_t H = x.size(2), W = x.size(3);
    record(
        "ConvTranspose2dBackward", {x, w, bias}, {&out},
        [sx, sw, t, H, W](const BackwardCtx& c) {
          const Conv2dGeometry& g = t.conv;
          Tensor wv = sw.unpack("ConvTranspose2dBackward");
          const Tensor& gy = c.grad();
          Tensor gx, gw, gb;
          if (c.needs(0)) {
            // the ordinary convolution of grad_y; its extra rows/columns belong to the padding
            gx = conv_of(gy, wv, g);
            if (t.extra_h != 0 || t.extra_w != 0) {
              gx = GradMode::is_enabled()
                       ? gx.narrow(2, 0, H).narrow(3, 0, W)
                       : ops::contiguous(ops::narrow(ops::narrow(gx, 2, 0, H), 3, 0, W));
            }
          }
          if (c.needs(1)) {
            const bool graph = GradMode::is_enabled();
            Tensor xp = pad_extra(sx.unpack("ConvTranspose2dBackward"), t, graph);
            // backward-filter of that convolution: grad_y is its input, x its grad_out
            if (graph) {
              gw = conv_weight_grad(gy, xp, wv.sizes(), g);
            } else {
              gw = ops::conv2d_backward(xp, gy, wv, g, {false, true, false})[1];
            }
          }
          if (c.needs(2)) gb = grad_sum(gy, {0, 2, 3}, false);
          return variable_list{gx, gw, gb};
        },
        DoubleBackward::supported);
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
