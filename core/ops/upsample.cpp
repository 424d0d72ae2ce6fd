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

SL_DEFINE_KERNEL(upsample_trilinear_forward_kernel,
                 void(const Tensor& out, const Tensor& input, const UpsampleGeometry& g));
SL_DEFINE_KERNEL(upsample_trilinear_backward_kernel,
                 void(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g));
SL_DEFINE_KERNEL(upsample_cubic_forward_kernel,
                 void(const Tensor& out, const Tensor& input, const UpsampleGeometry& g));
SL_DEFINE_KERNEL(upsample_cubic_backward_kernel,
                 void(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g));
SL_DEFINE_KERNEL(upsample_aa_forward_kernel,
                 void(const Tensor& out, const Tensor& input, const UpsampleGeometry& g));
SL_DEFINE_KERNEL(upsample_aa_backward_kernel,
                 void(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g));

namespace ops {

namespace {

/// t as contiguous planes: [P, H, W] (H = 1 for a 3-d tensor) or, for 5-d, [P, D, H, W].
Tensor planes(const Tensor& t) {
  const Shape& s = t.sizes();
  if (s.size() == 5) return view(contiguous(t), {-1, s[2], s[3], s[4]});
  return view(contiguous(t), {-1, s.size() == 3 ? 1 : s[2], s.back()});
}

Shape out_shape(const Shape& in, const UpsampleGeometry& g) {
  Shape r = in;
  r.back() = g.out_w;
  if (r.size() >= 4) r[r.size() - 2] = g.out_h;
  if (r.size() == 5) r[2] = g.out_d;
  return r;
}

}  // namespace

Tensor upsample_forward(const Tensor& input, const UpsampleGeometry& g, UpsampleMode mode) {
  if (cpu_16bit_via_float32(input)) {
    return cast(upsample_forward(cast(input, DType::f32), g, mode), input.dtype());
  }
  Tensor out = empty(out_shape(input.sizes(), g), input.dtype(), input.device());
  if (out.numel() == 0) return out;
  const DeviceKind dk = input.device().kind;
  switch (mode) {
    case UpsampleMode::nearest:
      upsample_nearest_forward_kernel(dk, planes(out), planes(input), g);
      break;
    case UpsampleMode::linear:
      if (input.dim() == 5) {
        upsample_trilinear_forward_kernel(dk, planes(out), planes(input), g);
      } else {
        upsample_linear_forward_kernel(dk, planes(out), planes(input), g);
      }
      break;
    case UpsampleMode::cubic:
      upsample_cubic_forward_kernel(dk, planes(out), planes(input), g);
      break;
    case UpsampleMode::antialias:
      upsample_aa_forward_kernel(dk, planes(out), planes(input), g);
      break;
  }
  return out;
}

Tensor upsample_backward(const Tensor& grad_out, const Shape& input_sizes,
                         const UpsampleGeometry& g, UpsampleMode mode) {
  if (cpu_16bit_via_float32(grad_out)) {
    return cast(upsample_backward(cast(grad_out, DType::f32), input_sizes, g, mode),
                grad_out.dtype());
  }
  Tensor gi = empty(input_sizes, grad_out.dtype(), grad_out.device());
  if (gi.numel() == 0) return gi;
  const DeviceKind dk = grad_out.device().kind;
  const Tensor gp = planes(gi), go = planes(grad_out);
  switch (mode) {
    case UpsampleMode::nearest:
      upsample_nearest_backward_kernel(dk, gp, go, g);
      break;
    case UpsampleMode::linear:
      if (gi.dim() == 5) {
        upsample_trilinear_backward_kernel(dk, gp, go, g);
      } else {
        upsample_linear_backward_kernel(dk, gp, go, g);
      }
      break;
    case UpsampleMode::cubic:
      upsample_cubic_backward_kernel(dk, gp, go, g);
      break;
    case UpsampleMode::antialias:
      upsample_aa_backward_kernel(dk, gp, go, g);
      break;
  }
  return gi;
}

}  // namespace ops
}  // namespace sl
