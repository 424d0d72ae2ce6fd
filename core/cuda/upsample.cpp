// CUDA glue of the upsample family: its kernels in upsample.cu.
#include "core/ops/upsample.h"
#include "core/cuda/kernels_upsample.h"
#include "core/cuda/runtime.h"

namespace sl::cuda {
namespace {

UpsampleGeom geom(const Tensor& in_planes, const UpsampleGeometry& g) {
  return UpsampleGeom{in_planes.size(0), in_planes.size(1), in_planes.size(2), g.out_h, g.out_w,
                      g.scale_h,         g.scale_w,         g.align_corners,   g.exact};
}

void forward(const Tensor& out, const Tensor& input, const UpsampleGeometry& g, bool linear) {
  DeviceGuard dg(input.device());
  launch_upsample_forward(input.dtype(), linear, out.data_ptr(), input.data_ptr(), geom(input, g),
                          compute_stream(input.device()));
}

void backward(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g,
              bool linear) {
  DeviceGuard dg(grad_out.device());
  launch_upsample_backward(grad_out.dtype(), linear, grad_input.data_ptr(), grad_out.data_ptr(),
                           geom(grad_input, g), compute_stream(grad_out.device()));
}

void nearest_forward_cuda(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  forward(out, input, g, false);
}
void nearest_backward_cuda(const Tensor& grad_input, const Tensor& grad_out,
                           const UpsampleGeometry& g) {
  backward(grad_input, grad_out, g, false);
}
void linear_forward_cuda(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  forward(out, input, g, true);
}
void linear_backward_cuda(const Tensor& grad_input, const Tensor& grad_out,
                          const UpsampleGeometry& g) {
  backward(grad_input, grad_out, g, true);
}

SL_REGISTER_KERNEL(upsample_nearest_forward_kernel, DeviceKind::cuda, &nearest_forward_cuda);
SL_REGISTER_KERNEL(upsample_nearest_backward_kernel, DeviceKind::cuda, &nearest_backward_cuda);
SL_REGISTER_KERNEL(upsample_linear_forward_kernel, DeviceKind::cuda, &linear_forward_cuda);
SL_REGISTER_KERNEL(upsample_linear_backward_kernel, DeviceKind::cuda, &linear_backward_cuda);

}  // namespace
}  // namespace sl::cuda
