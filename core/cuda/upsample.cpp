// CUDA glue of the upsample family: its kernels in upsample.cu and upsample_cubic.cu.
#include "core/ops/upsample.h"
#include "core/cuda/kernels_upsample.h"
#include "core/cuda/runtime.h"

namespace sl::cuda {
namespace {

/// in_planes: [P, H, W], or [P, D, H, W] for trilinear and 5-d nearest.
UpsampleGeom geom(const Tensor& in_planes, const UpsampleGeometry& g) {
  const bool vol = in_planes.dim() == 4;
  const int64_t D = vol ? in_planes.size(1) : 1;
  return UpsampleGeom{in_planes.size(0),
                      D,
                      in_planes.size(-2),
                      in_planes.size(-1),
                      vol ? g.out_d : 1,
                      g.out_h,
                      g.out_w,
                      g.scale_d,
                      g.scale_h,
                      g.scale_w,
                      g.align_corners,
                      g.exact,
                      g.cubic};
}

void forward(const Tensor& out, const Tensor& input, const UpsampleGeometry& g, UpsampleRule rule) {
  DeviceGuard dg(input.device());
  launch_upsample_forward(input.dtype(), rule, out.data_ptr(), input.data_ptr(), geom(input, g),
                          compute_stream(input.device()));
}

void backward(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g,
              UpsampleRule rule) {
  DeviceGuard dg(grad_out.device());
  launch_upsample_backward(grad_out.dtype(), rule, grad_input.data_ptr(), grad_out.data_ptr(),
                           geom(grad_input, g), compute_stream(grad_out.device()));
}

void cubic_forward(const Tensor& out, const Tensor& input, const UpsampleGeometry& g, bool aa) {
  DeviceGuard dg(input.device());
  launch_upsample_cubic_forward(input.dtype(), aa, out.data_ptr(), input.data_ptr(), geom(input, g),
                                compute_stream(input.device()));
}

void cubic_backward(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g,
                    bool aa) {
  DeviceGuard dg(grad_out.device());
  launch_upsample_cubic_backward(grad_out.dtype(), aa, grad_input.data_ptr(), grad_out.data_ptr(),
                                 geom(grad_input, g), compute_stream(grad_out.device()));
}

void nearest_forward_cuda(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  forward(out, input, g, UpsampleRule::nearest);
}
void nearest_backward_cuda(const Tensor& grad_input, const Tensor& grad_out,
                           const UpsampleGeometry& g) {
  backward(grad_input, grad_out, g, UpsampleRule::nearest);
}
void linear_forward_cuda(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  forward(out, input, g, UpsampleRule::linear);
}
void linear_backward_cuda(const Tensor& grad_input, const Tensor& grad_out,
                          const UpsampleGeometry& g) {
  backward(grad_input, grad_out, g, UpsampleRule::linear);
}
void trilinear_forward_cuda(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  forward(out, input, g, UpsampleRule::trilinear);
}
void trilinear_backward_cuda(const Tensor& grad_input, const Tensor& grad_out,
                             const UpsampleGeometry& g) {
  backward(grad_input, grad_out, g, UpsampleRule::trilinear);
}
void cubic_forward_cuda(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  cubic_forward(out, input, g, false);
}
void cubic_backward_cuda(const Tensor& grad_input, const Tensor& grad_out,
                         const UpsampleGeometry& g) {
  cubic_backward(grad_input, grad_out, g, false);
}
void aa_forward_cuda(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  cubic_forward(out, input, g, true);
}
void aa_backward_cuda(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g) {
  cubic_backward(grad_input, grad_out, g, true);
}

SL_REGISTER_KERNEL(upsample_nearest_forward_kernel, DeviceKind::cuda, &nearest_forward_cuda);
SL_REGISTER_KERNEL(upsample_nearest_backward_kernel, DeviceKind::cuda, &nearest_backward_cuda);
SL_REGISTER_KERNEL(upsample_linear_forward_kernel, DeviceKind::cuda, &linear_forward_cuda);
SL_REGISTER_KERNEL(upsample_linear_backward_kernel, DeviceKind::cuda, &linear_backward_cuda);
SL_REGISTER_KERNEL(upsample_trilinear_forward_kernel, DeviceKind::cuda, &trilinear_forward_cuda);
SL_REGISTER_KERNEL(upsample_trilinear_backward_kernel, DeviceKind::cuda, &trilinear_backward_cuda);
SL_REGISTER_KERNEL(upsample_cubic_forward_kernel, DeviceKind::cuda, &cubic_forward_cuda);
SL_REGISTER_KERNEL(upsample_cubic_backward_kernel, DeviceKind::cuda, &cubic_backward_cuda);
SL_REGISTER_KERNEL(upsample_aa_forward_kernel, DeviceKind::cuda, &aa_forward_cuda);
SL_REGISTER_KERNEL(upsample_aa_backward_kernel, DeviceKind::cuda, &aa_backward_cuda);

}  // namespace
}  // namespace sl::cuda
