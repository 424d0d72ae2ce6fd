#include "core/ops/conv.h"

#include <cassert>

#include "core/ops/copy.h"

namespace sl {

SL_DEFINE_KERNEL(conv2d_forward_kernel,
                 void(const Tensor& out, const Tensor& input, const Tensor& weight,
                      const Tensor& bias, const Conv2dGeometry& g));
SL_DEFINE_KERNEL(conv2d_backward_kernel,
                 void(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                      const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                      const Conv2dGeometry& g));

template <size_t D>
ExpandingArray<D>::ExpandingArray(std::initializer_list<int64_t> xs) : set(true) {
  SL_CHECK(xs.size() == 1 || xs.size() == D, "expected 1 or ", D, " values, got ", xs.size());
  if (xs.size() == 1) {
    v.fill(*xs.begin());
  } else {
    size_t i = 0;
    for (int64_t x : xs) v[i++] = x;
  }
}

template <size_t D>
ConvPadding<D>::ConvPadding(const std::string& s) {
  if (s == "same") {
    mode = Mode::same;
  } else if (s == "valid") {
    mode = Mode::valid;
  } else {
    detail::throw_error<ValueError>(
        "conv: padding must be an int, a tuple of ints, 'same' or "
        "'valid', got '",
        s, "'");
  }
}

template struct ExpandingArray<1>;
template struct ExpandingArray<2>;
template struct ConvPadding<1>;
template struct ConvPadding<2>;

namespace ops {

namespace {
bool is_reduced_float(DType t) {
  return t == DType::f16 || t == DType::bf16;
}

/// Definedness, device and dtype checks shared by conv2d and conv_transpose2d.
void check_conv_operands(const char* op, const Tensor& input, const Tensor& weight,
                         const Tensor& bias) {
  check_defined(op, input);
  check_defined(op, weight, "weight");
  check_same_device(op, {&input, &weight, &bias});
  SL_CHECK_DTYPE(is_floating(input.dtype()), op, ": expected a floating input, got ",
                 dtype_name(input.dtype()));
  SL_CHECK_DTYPE(
      weight.dtype() == input.dtype() && (!bias.defined() || bias.dtype() == input.dtype()), op,
      ": input, weight and bias must have the same dtype, got ", dtype_name(input.dtype()), ", ",
      dtype_name(weight.dtype()), bias.defined() ? ", " : "",
      bias.defined() ? dtype_name(bias.dtype()) : "");
}
}  // namespace

Conv2dGeometry conv2d_geometry(const char* op, const Tensor& input, const Tensor& weight,
                               const Tensor& bias, ExpandingArray<2> stride,
                               const ConvPadding<2>& padding, ExpandingArray<2> dilation,
                               int64_t groups) {
  check_conv_operands(op, input, weight, bias);
  SL_CHECK_SHAPE(input.dim() == 4, op, ": expected a 4-d input [N, C, H, W], got ",
                 shape_str(input.sizes()));
  SL_CHECK_SHAPE(weight.dim() == 4, op, ": expected a 4-d weight [out, in / groups, kh, kw], got ",
                 shape_str(weight.sizes()));
  SL_CHECK(groups >= 1, op, ": groups must be positive, got ", groups);
  if (!stride.set) stride = ExpandingArray<2>(1);
  if (!dilation.set) dilation = ExpandingArray<2>(1);
  for (size_t i = 0; i < 2; ++i) {
    SL_CHECK(stride[i] >= 1, op, ": stride must be positive, got ", stride[i]);
    SL_CHECK(dilation[i] >= 1, op, ": dilation must be positive, got ", dilation[i]);
    SL_CHECK(padding.mode != ConvPadding<2>::Mode::explicit_ || padding.amount[i] >= 0, op,
             ": padding must be non-negative, got ", padding.amount[i]);
  }
  // A zero-size kernel (PyTorch refuses it) would make every output the bias, over an output
  // larger than the input.
  SL_CHECK_SHAPE(weight.size(2) > 0 && weight.size(3) > 0, op,
                 ": kernel size must be positive, got weight of shape ", shape_str(weight.sizes()));
  const int64_t C = input.size(1), O = weight.size(0);
  SL_CHECK_SHAPE(O % groups == 0, op, ": out_channels (", O, ") must be divisible by groups (",
                 groups, ")");
  SL_CHECK_SHAPE(weight.size(1) * groups == C, op, ": input has ", C,
                 " channels but weight of shape ", shape_str(weight.sizes()),
                 " with groups=", groups, " expects ", weight.size(1) * groups);
  if (bias.defined()) {
    SL_CHECK_SHAPE(bias.dim() == 1 && bias.size(0) == O, op, ": bias of shape ",
                   shape_str(bias.sizes()), " does not match ", O, " output channels");
  }
  Conv2dGeometry g;
  g.kh = weight.size(2);
  g.kw = weight.size(3);
  g.stride_h = stride[0];
  g.stride_w = stride[1];
  g.dilation_h = dilation[0];
  g.dilation_w = dilation[1];
  g.groups = groups;
  using Mode = ConvPadding<2>::Mode;
  if (padding.mode == Mode::same) {
    SL_CHECK(stride[0] == 1 && stride[1] == 1, op,
             ": padding='same' is not supported for strided convolutions (stride ",
             shape_str({stride[0], stride[1]}), ")");
    // total = dilation * (k - 1); PyTorch puts the odd extra element at the end
    int64_t th = g.dilation_h * (g.kh - 1), tw = g.dilation_w * (g.kw - 1);
    g.pad_h_begin = th / 2;
    g.pad_h_end = th - th / 2;
    g.pad_w_begin = tw / 2;
    g.pad_w_end = tw - tw / 2;
  } else if (padding.mode == Mode::explicit_) {
    g.pad_h_begin = g.pad_h_end = padding.amount[0];
    g.pad_w_begin = g.pad_w_end = padding.amount[1];
  }
  const int64_t H = input.size(2), W = input.size(3);
  int64_t eff_h = g.dilation_h * (g.kh - 1) + 1, eff_w = g.dilation_w * (g.kw - 1) + 1;
  int64_t ph = H + g.pad_h_begin + g.pad_h_end, pw = W + g.pad_w_begin + g.pad_w_end;
  SL_CHECK_SHAPE(eff_h <= ph && eff_w <= pw, op, ": kernel size ", shape_str({g.kh, g.kw}),
                 " (dilated: ", shape_str({eff_h, eff_w}), ") is larger than the padded input ",
                 shape_str({ph, pw}));
  g.out_h = (ph - eff_h) / g.stride_h + 1;
  g.out_w = (pw - eff_w) / g.stride_w + 1;
  return g;
}

ConvTranspose2dGeometry conv_transpose2d_geometry(const char* op, const Tensor& input,
                                                  const Tensor& weight, const Tensor& bias,
                                                  ExpandingArray<2> stride,
                                                  ExpandingArray<2> padding,
                                                  ExpandingArray<2> output_padding,
                                                  ExpandingArray<2> dilation, int64_t groups) {
  check_conv_operands(op, input, weight, bias);
  SL_CHECK_SHAPE(input.dim() == 4, op, ": expected a 4-d input [N, C_in, H, W], got ",
                 shape_str(input.sizes()));
  SL_CHECK_SHAPE(weight.dim() == 4, op, ": expected a 4-d weight [in, out / groups, kh, kw], got ",
                 shape_str(weight.sizes()));
  SL_CHECK(groups >= 1, op, ": groups must be positive, got ", groups);
  if (!stride.set) stride = ExpandingArray<2>(1);
  if (!padding.set) padding = ExpandingArray<2>(0);
  if (!output_padding.set) output_padding = ExpandingArray<2>(0);
  if (!dilation.set) dilation = ExpandingArray<2>(1);
  for (size_t i = 0; i < 2; ++i) {
    SL_CHECK(stride[i] >= 1, op, ": stride must be positive, got ", stride[i]);
    SL_CHECK(dilation[i] >= 1, op, ": dilation must be positive, got ", dilation[i]);
    SL_CHECK(padding[i] >= 0, op, ": padding must be non-negative, got ", padding[i]);
    SL_CHECK(output_padding[i] >= 0, op, ": output_padding must be non-negative, got ",
             output_padding[i]);
  }
  // PyTorch's condition, per dim: the extra rows must fall within one stride step, or within
  // the gap a dilated kernel leaves
  for (size_t i = 0; i < 2; ++i) {
    SL_CHECK(output_padding[i] < stride[i] || output_padding[i] < dilation[i], op,
             ": output_padding must be smaller than either stride or dilation, got "
             "output_padding ",
             shape_str({output_padding[0], output_padding[1]}), ", stride ",
             shape_str({stride[0], stride[1]}), ", dilation ",
             shape_str({dilation[0], dilation[1]}));
  }
  SL_CHECK_SHAPE(weight.size(2) > 0 && weight.size(3) > 0, op,
                 ": kernel size must be positive, got weight of shape ", shape_str(weight.sizes()));
  const int64_t C = input.size(1), Cw = weight.size(0), O = weight.size(1) * groups;
  SL_CHECK_SHAPE(Cw >= groups && Cw % groups == 0, op, ": weight of shape ",
                 shape_str(weight.sizes()), " has ", Cw,
                 " input channels (dim 0), which must be a positive multiple of groups (", groups,
                 ")");
  SL_CHECK_SHAPE(C == Cw, op, ": input has ", C, " channels but weight of shape ",
                 shape_str(weight.sizes()), " ([in, out / groups, kh, kw]) expects ", Cw);
  if (bias.defined()) {
    SL_CHECK_SHAPE(bias.dim() == 1 && bias.size(0) == O, op, ": bias of shape ",
                   shape_str(bias.sizes()), " does not match ", O,
                   " output channels (weight.size(1) * groups)");
  }
  const int64_t H = input.size(2), W = input.size(3);
  SL_CHECK_SHAPE(H > 0 && W > 0, op, ": expected non-empty spatial dims, got input of shape ",
                 shape_str(input.sizes()));
  ConvTranspose2dGeometry t;
  Conv2dGeometry& g = t.conv;
  g.kh = weight.size(2);
  g.kw = weight.size(3);
  g.stride_h = stride[0];
  g.stride_w = stride[1];
  g.dilation_h = dilation[0];
  g.dilation_w = dilation[1];
  g.groups = groups;
  g.pad_h_begin = g.pad_h_end = padding[0];
  g.pad_w_begin = g.pad_w_end = padding[1];
  t.out_h =
      (H - 1) * g.stride_h - 2 * padding[0] + g.dilation_h * (g.kh - 1) + output_padding[0] + 1;
  t.out_w =
      (W - 1) * g.stride_w - 2 * padding[1] + g.dilation_w * (g.kw - 1) + output_padding[1] + 1;
  SL_CHECK_SHAPE(t.out_h >= 1 && t.out_w >= 1, op, ": the output size ",
                 shape_str({t.out_h, t.out_w}), " computed for an input of spatial size ",
                 shape_str({H, W}), " is too small (must be positive)");
  // Note [Transposed convolution]: the ordinary convolution's output size over the transposed
  // output is H + floor(output_padding / stride)
  t.extra_h = output_padding[0] / g.stride_h;
  t.extra_w = output_padding[1] / g.stride_w;
  g.out_h = H + t.extra_h;
  g.out_w = W + t.extra_w;
  assert((t.out_h + 2 * padding[0] - g.dilation_h * (g.kh - 1) - 1) / g.stride_h + 1 == g.out_h);
  assert((t.out_w + 2 * padding[1] - g.dilation_w * (g.kw - 1) - 1) / g.stride_w + 1 == g.out_w);
  return t;
}

Tensor conv2d_forward(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const Conv2dGeometry& g) {
  if (is_reduced_float(input.dtype())) {
    Tensor out = conv2d_forward(cast(input, DType::f32), cast(weight, DType::f32),
                                bias.defined() ? cast(bias, DType::f32) : bias, g);
    return cast(out, input.dtype());
  }
  Tensor out =
      empty({input.size(0), weight.size(0), g.out_h, g.out_w}, input.dtype(), input.device());
  if (out.numel() == 0) return out;
  conv2d_forward_kernel(input.device().kind, out, contiguous(input), contiguous(weight),
                        bias.defined() ? contiguous(bias) : bias, g);
  return out;
}

std::array<Tensor, 3> conv2d_backward(const Tensor& grad_out, const Tensor& input,
                                      const Tensor& weight, const Conv2dGeometry& g,
                                      std::array<bool, 3> needs) {
  if (is_reduced_float(input.dtype())) {
    auto r = conv2d_backward(cast(grad_out, DType::f32), cast(input, DType::f32),
                             cast(weight, DType::f32), g, needs);
    for (auto& t : r) {
      if (t.defined()) t = cast(t, input.dtype());
    }
    return r;
  }
  std::array<Tensor, 3> r;
  if (needs[0]) r[0] = empty_like(input);
  if (needs[1]) r[1] = empty_like(weight);
  if (needs[2]) r[2] = empty({weight.size(0)}, weight.dtype(), weight.device());
  if (input.numel() == 0 || grad_out.numel() == 0) {
    for (auto& t : r) {
      if (t.defined()) fill_(t, 0);
    }
    return r;
  }
  conv2d_backward_kernel(input.device().kind, r[0], r[1], r[2], contiguous(grad_out),
                         contiguous(input), contiguous(weight), g);
  return r;
}

}  // namespace ops
}  // namespace sl
