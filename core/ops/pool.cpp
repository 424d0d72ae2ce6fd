#include "core/ops/pool.h"

#include "core/ops/copy.h"
#include "core/ops/view.h"

namespace sl {

SL_DEFINE_KERNEL(max_pool2d_forward_kernel, void(const Tensor& out, const Tensor& indices,
                                                 const Tensor& input, const Pool2dGeometry& g));
SL_DEFINE_KERNEL(max_pool2d_backward_kernel, void(const Tensor& grad_input, const Tensor& grad_out,
                                                  const Tensor& indices, const Pool2dGeometry& g));
SL_DEFINE_KERNEL(avg_pool2d_forward_kernel,
                 void(const Tensor& out, const Tensor& input, const Pool2dGeometry& g));
SL_DEFINE_KERNEL(avg_pool2d_backward_kernel,
                 void(const Tensor& grad_input, const Tensor& grad_out, const Pool2dGeometry& g));
SL_DEFINE_KERNEL(adaptive_avg_pool2d_forward_kernel, void(const Tensor& out, const Tensor& input));
SL_DEFINE_KERNEL(adaptive_avg_pool2d_backward_kernel,
                 void(const Tensor& grad_input, const Tensor& grad_out));
SL_DEFINE_KERNEL(adaptive_max_pool2d_forward_kernel,
                 void(const Tensor& out, const Tensor& indices, const Tensor& input));
SL_DEFINE_KERNEL(adaptive_max_pool2d_backward_kernel,
                 void(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices));

template <size_t D>
AdaptiveOutputSize<D>::AdaptiveOutputSize(ExpandingArray<D> a) : set(a.set) {
  for (size_t i = 0; i < D; ++i) v[i] = a[i];
}

template <size_t D>
AdaptiveOutputSize<D>::AdaptiveOutputSize(std::initializer_list<std::optional<int64_t>> xs)
    : set(true) {
  SL_CHECK(xs.size() == 1 || xs.size() == D, "output_size: expected 1 or ", D, " values, got ",
           xs.size());
  if (xs.size() == 1) {
    v.fill(*xs.begin());
    scalar = true;  // printed as the one int (C++ cannot tell {3} from 3 at every call)
  } else {
    size_t i = 0;
    for (const auto& x : xs) v[i++] = x;
  }
}

template struct AdaptiveOutputSize<1>;
template struct AdaptiveOutputSize<2>;

namespace ops {

namespace {

void check_pool_input(const char* op, const Tensor& input) {
  check_defined(op, input);
  SL_CHECK_SHAPE(input.dim() == 3 || input.dim() == 4, op,
                 ": expected a 3-d [C, H, W] or 4-d [N, C, H, W] input, got ",
                 shape_str(input.sizes()));
  SL_CHECK_DTYPE(is_floating(input.dtype()), op, ": expected a floating input, got ",
                 dtype_name(input.dtype()));
  for (int64_t d = input.dim() - 2; d < input.dim(); ++d) {
    SL_CHECK_SHAPE(input.size(d) > 0, op, ": expected non-empty spatial dims, got ",
                   shape_str(input.sizes()));
  }
}

/// input as contiguous [P, H, W] planes.
Tensor planes(const Tensor& t) {
  Tensor c = contiguous(t);
  return view(c, {-1, t.size(-2), t.size(-1)});
}

Shape with_spatial(const Shape& s, int64_t h, int64_t w) {
  Shape r = s;
  r[r.size() - 2] = h;
  r[r.size() - 1] = w;
  return r;
}

}  // namespace

int64_t pool_output_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil,
                         bool ceil_mode) {
  // PyTorch's pooling_output_shape
  int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  // floor division (num may be negative)
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

Pool2dGeometry pool2d_geometry(const char* op, const Tensor& input, ExpandingArray<2> kernel_size,
                               ExpandingArray<2> stride, ExpandingArray<2> padding,
                               ExpandingArray<2> dilation, bool ceil_mode) {
  check_pool_input(op, input);
  SL_CHECK(kernel_size.set, op, ": kernel_size must be given");
  if (!stride.set) stride = kernel_size;
  if (!padding.set) padding = ExpandingArray<2>(0);
  if (!dilation.set) dilation = ExpandingArray<2>(1);
  for (size_t i = 0; i < 2; ++i) {
    SL_CHECK(kernel_size[i] > 0, op, ": kernel_size must be positive, got ",
             shape_str({kernel_size[0], kernel_size[1]}));
    SL_CHECK(stride[i] > 0, op, ": stride must be positive, got ",
             shape_str({stride[0], stride[1]}));
    SL_CHECK(dilation[i] > 0, op, ": dilation must be positive, got ",
             shape_str({dilation[0], dilation[1]}));
    SL_CHECK(padding[i] >= 0 && padding[i] <= kernel_size[i] / 2, op,
             ": padding should be non-negative and at most half of the kernel size, got padding ",
             shape_str({padding[0], padding[1]}), " for kernel_size ",
             shape_str({kernel_size[0], kernel_size[1]}));
  }
  Pool2dGeometry g;
  g.kh = kernel_size[0];
  g.kw = kernel_size[1];
  g.stride_h = stride[0];
  g.stride_w = stride[1];
  g.pad_h = padding[0];
  g.pad_w = padding[1];
  g.dilation_h = dilation[0];
  g.dilation_w = dilation[1];
  const int64_t H = input.size(-2), W = input.size(-1);
  g.out_h = pool_output_size(H, g.kh, g.pad_h, g.stride_h, g.dilation_h, ceil_mode);
  g.out_w = pool_output_size(W, g.kw, g.pad_w, g.stride_w, g.dilation_w, ceil_mode);
  SL_CHECK_SHAPE(g.out_h >= 1 && g.out_w >= 1, op, ": input of shape ", shape_str(input.sizes()),
                 " is too small for kernel_size ", shape_str({g.kh, g.kw}), " with padding ",
                 shape_str({g.pad_h, g.pad_w}), " and dilation ",
                 shape_str({g.dilation_h, g.dilation_w}), " (output size ",
                 shape_str({g.out_h, g.out_w}), ")");
  return g;
}

std::pair<Tensor, Tensor> max_pool2d_forward(const Tensor& input, const Pool2dGeometry& g) {
  if (cpu_16bit_via_float32(input)) {
    auto r = max_pool2d_forward(cast(input, DType::f32), g);
    return {cast(r.first, input.dtype()), r.second};
  }
  Shape os = with_spatial(input.sizes(), g.out_h, g.out_w);
  Tensor out = empty(os, input.dtype(), input.device());
  Tensor idx = empty(os, DType::i64, input.device());
  if (out.numel() == 0) return {out, idx};
  max_pool2d_forward_kernel(input.device().kind, view(out, {-1, g.out_h, g.out_w}),
                            view(idx, {-1, g.out_h, g.out_w}), planes(input), g);
  return {out, idx};
}

Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_sizes,
                           const Pool2dGeometry& g) {
  if (cpu_16bit_via_float32(grad_out)) {
    return cast(max_pool2d_backward(cast(grad_out, DType::f32), indices, input_sizes, g),
                grad_out.dtype());
  }
  Tensor gi = empty(input_sizes, grad_out.dtype(), grad_out.device());
  if (gi.numel() == 0) return gi;
  const int64_t H = input_sizes[input_sizes.size() - 2], W = input_sizes.back();
  max_pool2d_backward_kernel(grad_out.device().kind, view(gi, {-1, H, W}), planes(grad_out),
                             planes(indices), g);
  return gi;
}

Tensor avg_pool2d_forward(const Tensor& input, const Pool2dGeometry& g) {
  if (cpu_16bit_via_float32(input)) {
    return cast(avg_pool2d_forward(cast(input, DType::f32), g), input.dtype());
  }
  Tensor out = empty(with_spatial(input.sizes(), g.out_h, g.out_w), input.dtype(), input.device());
  if (out.numel() == 0) return out;
  avg_pool2d_forward_kernel(input.device().kind, view(out, {-1, g.out_h, g.out_w}), planes(input),
                            g);
  return out;
}

Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes,
                           const Pool2dGeometry& g) {
  if (cpu_16bit_via_float32(grad_out)) {
    return cast(avg_pool2d_backward(cast(grad_out, DType::f32), input_sizes, g), grad_out.dtype());
  }
  Tensor gi = empty(input_sizes, grad_out.dtype(), grad_out.device());
  if (gi.numel() == 0) return gi;
  const int64_t H = input_sizes[input_sizes.size() - 2], W = input_sizes.back();
  avg_pool2d_backward_kernel(grad_out.device().kind, view(gi, {-1, H, W}), planes(grad_out), g);
  return gi;
}

Tensor adaptive_avg_pool2d_forward(const Tensor& input, ExpandingArray<2> output_size) {
  check_pool_input("adaptive_avg_pool2d", input);
  SL_CHECK(output_size.set, "adaptive_avg_pool2d: output_size must be given");
  // Note [Empty adaptive output]: an output size of 0 gives an empty output, as PyTorch's
  // forward does (its backward then refuses the empty gradient; ours gives the exact one, zeros).
  SL_CHECK_SHAPE(output_size[0] >= 0 && output_size[1] >= 0,
                 "adaptive_avg_pool2d: output_size must be non-negative, got ",
                 shape_str({output_size[0], output_size[1]}));
  if (cpu_16bit_via_float32(input)) {
    return cast(adaptive_avg_pool2d_forward(cast(input, DType::f32), output_size), input.dtype());
  }
  Tensor out = empty(with_spatial(input.sizes(), output_size[0], output_size[1]), input.dtype(),
                     input.device());
  if (out.numel() == 0) return out;
  adaptive_avg_pool2d_forward_kernel(
      input.device().kind, view(out, {-1, output_size[0], output_size[1]}), planes(input));
  return out;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes) {
  if (cpu_16bit_via_float32(grad_out)) {
    return cast(adaptive_avg_pool2d_backward(cast(grad_out, DType::f32), input_sizes),
                grad_out.dtype());
  }
  Tensor gi = empty(input_sizes, grad_out.dtype(), grad_out.device());
  if (gi.numel() == 0) return gi;
  // an empty output (Note [Empty adaptive output]) reads no input: the gradient is zero
  if (grad_out.numel() == 0) {
    fill_(gi, 0);
    return gi;
  }
  const int64_t H = input_sizes[input_sizes.size() - 2], W = input_sizes.back();
  adaptive_avg_pool2d_backward_kernel(grad_out.device().kind, view(gi, {-1, H, W}),
                                      planes(grad_out));
  return gi;
}

std::array<int64_t, 2> adaptive_output_size(const char* op, const Tensor& input,
                                            const AdaptiveOutputSize<2>& output_size) {
  SL_CHECK(output_size.set, op, ": output_size must be given");
  std::array<int64_t, 2> r{};
  for (size_t i = 0; i < 2; ++i) {
    // None keeps the input's size along that dim, as PyTorch's _list_with_default
    r[i] = output_size[i].value_or(input.size(input.dim() - 2 + static_cast<int64_t>(i)));
  }
  SL_CHECK_SHAPE(r[0] >= 0 && r[1] >= 0, op, ": output_size must be non-negative, got ",
                 shape_str({r[0], r[1]}));
  return r;
}

std::pair<Tensor, Tensor> adaptive_max_pool2d_forward(const Tensor& input,
                                                      const AdaptiveOutputSize<2>& output_size) {
  const char* op = "adaptive_max_pool2d";
  check_defined(op, input);
  SL_CHECK_SHAPE(input.dim() == 3 || input.dim() == 4, op,
                 ": expected a 3-d [C, H, W] or 4-d [N, C, H, W] input, got ",
                 shape_str(input.sizes()));
  SL_CHECK_DTYPE(is_floating(input.dtype()), op, ": expected a floating input, got ",
                 dtype_name(input.dtype()));
  // PyTorch's rule: every dim but a 4-d input's batch dim must be non-empty
  for (int64_t d = input.dim() - 3; d < input.dim(); ++d) {
    SL_CHECK_SHAPE(input.size(d) > 0, op, ": expected non-empty non-batch dims, got ",
                   shape_str(input.sizes()), " with dim ", d, " empty");
  }
  const auto [Ho, Wo] = adaptive_output_size(op, input, output_size);
  if (cpu_16bit_via_float32(input)) {
    auto r = adaptive_max_pool2d_forward(cast(input, DType::f32), output_size);
    return {cast(r.first, input.dtype()), r.second};
  }
  Shape os = with_spatial(input.sizes(), Ho, Wo);
  Tensor out = empty(os, input.dtype(), input.device());
  Tensor idx = empty(os, DType::i64, input.device());
  if (out.numel() == 0) return {out, idx};
  adaptive_max_pool2d_forward_kernel(input.device().kind, view(out, {-1, Ho, Wo}),
                                     view(idx, {-1, Ho, Wo}), planes(input));
  return {out, idx};
}

Tensor adaptive_max_pool2d_backward(const Tensor& grad_out, const Tensor& indices,
                                    const Shape& input_sizes) {
  if (cpu_16bit_via_float32(grad_out)) {
    return cast(adaptive_max_pool2d_backward(cast(grad_out, DType::f32), indices, input_sizes),
                grad_out.dtype());
  }
  Tensor gi = empty(input_sizes, grad_out.dtype(), grad_out.device());
  if (gi.numel() == 0) return gi;
  // an empty output (Note [Empty adaptive output]) reads no input: the gradient is zero
  if (grad_out.numel() == 0) {
    fill_(gi, 0);
    return gi;
  }
  const int64_t H = input_sizes[input_sizes.size() - 2], W = input_sizes.back();
  adaptive_max_pool2d_backward_kernel(grad_out.device().kind, view(gi, {-1, H, W}),
                                      planes(grad_out), planes(indices));
  return gi;
}

}  // namespace ops
}  // namespace sl
