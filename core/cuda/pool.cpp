// CUDA glue of the pool family.
#include "core/ops/pool.h"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/runtime.h"

namespace sl::cuda {
namespace {

PoolGeom geom(const Pool2dGeometry& g) {
  return PoolGeom{g.kh,    g.kw,    g.stride_h,          g.stride_w,
                  g.pad_h, g.pad_w, g.dilation_h,        g.dilation_w,
                  g.out_h, g.out_w, g.count_include_pad, g.divisor_override};
}

void max_pool2d_forward_cuda(const Tensor& out, const Tensor& indices, const Tensor& input,
                             const Pool2dGeometry& g) {
  DeviceGuard dg(input.device());
  launch_max_pool2d_forward(
      input.dtype(), out.data_ptr(), static_cast<int64_t*>(indices.data_ptr()), input.data_ptr(),
      input.size(0), input.size(1), input.size(2), geom(g), compute_stream(input.device()));
}

void max_pool2d_backward_cuda(const Tensor& grad_input, const Tensor& grad_out,
                              const Tensor& indices) {
  DeviceGuard dg(grad_out.device());
  launch_max_pool2d_backward(grad_out.dtype(), grad_input.data_ptr(), grad_out.data_ptr(),
                             static_cast<const int64_t*>(indices.data_ptr()), grad_input.size(0),
                             grad_input.size(1) * grad_input.size(2),
                             grad_out.size(1) * grad_out.size(2),
                             compute_stream(grad_out.device()));
}

void avg_pool2d_forward_cuda(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
  DeviceGuard dg(input.device());
  launch_avg_pool2d_forward(input.dtype(), out.data_ptr(), input.data_ptr(), input.size(0),
                            input.size(1), input.size(2), geom(g), compute_stream(input.device()));
}

void avg_pool2d_backward_cuda(const Tensor& grad_input, const Tensor& grad_out,
                              const Pool2dGeometry& g) {
  DeviceGuard dg(grad_out.device());
  launch_avg_pool2d_backward(grad_out.dtype(), grad_input.data_ptr(), grad_out.data_ptr(),
                             grad_input.size(0), grad_input.size(1), grad_input.size(2), geom(g),
                             compute_stream(grad_out.device()));
}

void adaptive_avg_pool2d_forward_cuda(const Tensor& out, const Tensor& input) {
  DeviceGuard dg(input.device());
  launch_adaptive_avg_pool2d_forward(input.dtype(), out.data_ptr(), input.data_ptr(), input.size(0),
                                     input.size(1), input.size(2), out.size(1), out.size(2),
                                     compute_stream(input.device()));
}

void adaptive_avg_pool2d_backward_cuda(const Tensor& grad_input, const Tensor& grad_out) {
  DeviceGuard dg(grad_out.device());
  launch_adaptive_avg_pool2d_backward(grad_out.dtype(), grad_input.data_ptr(), grad_out.data_ptr(),
                                      grad_input.size(0), grad_input.size(1), grad_input.size(2),
                                      grad_out.size(1), grad_out.size(2),
                                      compute_stream(grad_out.device()));
}

SL_REGISTER_KERNEL(max_pool2d_forward_kernel, DeviceKind::cuda, &max_pool2d_forward_cuda);
SL_REGISTER_KERNEL(max_pool2d_backward_kernel, DeviceKind::cuda, &max_pool2d_backward_cuda);
SL_REGISTER_KERNEL(avg_pool2d_forward_kernel, DeviceKind::cuda, &avg_pool2d_forward_cuda);
SL_REGISTER_KERNEL(avg_pool2d_backward_kernel, DeviceKind::cuda, &avg_pool2d_backward_cuda);
SL_REGISTER_KERNEL(adaptive_avg_pool2d_forward_kernel, DeviceKind::cuda,
                   &adaptive_avg_pool2d_forward_cuda);
SL_REGISTER_KERNEL(adaptive_avg_pool2d_backward_kernel, DeviceKind::cuda,
                   &adaptive_avg_pool2d_backward_cuda);

}  // namespace
}  // namespace sl::cuda
