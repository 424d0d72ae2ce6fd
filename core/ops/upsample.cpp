#include "core/ops/upsample.h"

#include "core/ops/copy.h"
#include "core/ops/view.h"

namespace sl {

SL_DEFINE_KERNEL(upsample_nearest_forward_kernel,
                 void(const Tensor& out, const Tensor& input, const UpsampleGeometry& g));
SL_DEFINE_KERNEL(upsample_nearest_backward_kernel,
                 void(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g));
SL_DEFINE_KERNEL(upsample_linear_forward_kernel,
                 void(const Tensor& out, const Tensor& input, const UpsampleGeometry& g));
SL_DEFINE_KERNEL(upsample_linear_backward_kernel,
                 void(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g));

namespace ops {

namespace {

/// Height of t's planes: 1 for a 3-d [N, C, W] tensor.
int64_t plane_h(const Shape& s) {
  return s.size() == 3 ? 1 : s[s.size() - 2];
}

/// t as contiguous [P, H, W] planes.
Tensor planes(const Tensor& t) {
  return view(contiguous(t), {-1, plane_h(t.sizes()), t.sizes().back()});
}

Shape out_shape(const Shape& in, const UpsampleGeometry& g) {
  Shape r = in;
  r.back() = g.out_w;
  if (r.size() == 4) r[2] = g.out_h;
  return r;
}

}  // namespace

Tensor upsample_forward(const Tensor& input, const UpsampleGeometry& g, bool linear) {
  if (cpu_16bit_via_float32(input)) {
    return cast(upsample_forward(cast(input, DType::f32), g, linear), input.dtype());
  }
  Tensor out = empty(out_shape(input.sizes(), g), input.dtype(), input.device());
  if (out.numel() == 0) return out;
  Tensor o = view(out, {-1, g.out_h, g.out_w});
  if (linear) {
    upsample_linear_forward_kernel(input.device().kind, o, planes(input), g);
  } else {
    upsample_nearest_forward_kernel(input.device().kind, o, planes(input), g);
  }
  return out;
}

Tensor upsample_backward(const Tensor& grad_out, const Shape& input_sizes,
                         const UpsampleGeometry& g, bool linear) {
  if (cpu_16bit_via_float32(grad_out)) {
    return cast(upsample_backward(cast(grad_out, DType::f32), input_sizes, g, linear),
                grad_out.dtype());
  }
  Tensor gi = empty(input_sizes, grad_out.dtype(), grad_out.device());
  if (gi.numel() == 0) return gi;
  Tensor gp = view(gi, {-1, plane_h(input_sizes), input_sizes.back()});
  if (linear) {
    upsample_linear_backward_kernel(grad_out.device().kind, gp, planes(grad_out), g);
  } else {
    upsample_nearest_backward_kernel(grad_out.device().kind, gp, planes(grad_out), g);
  }
  return gi;
}

}  // namespace ops
}  // namespace sl
