// CUDA glue of the pool family. Average pooling goes through cuDNN where Note [cuDNN routing]
// (core/cuda/cudnn_routing.h) says so; max and adaptive (average and max) pooling, and the other
// average cases, run on the own kernels (pool.cu).
#include "core/ops/pool.h"
#include "core/cuda/cuda_api.h"
#include "core/cuda/cudnn_routing.h"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/runtime.h"
#include "sl_config.h"
#if SL_HAVE_CUDNN
#include "core/cuda/cudnn_pool.h"
#endif

namespace sl::cuda {
namespace {

#if SL_HAVE_CUDNN
/// Whether average pooling of `input` [P, H, W] goes through cuDNN (Note [cuDNN routing]).
bool avg_pool_via_cudnn(const Tensor& input, const Pool2dGeometry& g) {
  if (!cudnn_enabled()) return false;
  return avg_pool_uses_cudnn(
      AvgPoolCall{input.dtype(), input.size(0), input.size(1), input.size(2), g});
}
#endif

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
                              const Tensor& indices, const Pool2dGeometry& g) {
  DeviceGuard dg(grad_out.device());
  launch_max_pool2d_backward(grad_out.dtype(), grad_input.data_ptr(), grad_out.data_ptr(),
                             static_cast<const int64_t*>(indices.data_ptr()), grad_input.size(0),
                             grad_input.size(1), grad_input.size(2), geom(g),
                             compute_stream(grad_out.device()));
}

void avg_pool2d_forward_cuda(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
#if SL_HAVE_CUDNN
  if (avg_pool_via_cudnn(input, g)) {
    cudnn_avg_pool2d_forward(out, input, g);
    return;
  }
#endif
  DeviceGuard dg(input.device());
  launch_avg_pool2d_forward(input.dtype(), out.data_ptr(), input.data_ptr(), input.size(0),
                            input.size(1), input.size(2), geom(g), compute_stream(input.device()));
}

void avg_pool2d_backward_cuda(const Tensor& grad_input, const Tensor& grad_out,
                              const Pool2dGeometry& g) {
#if SL_HAVE_CUDNN
  if (avg_pool_via_cudnn(grad_input, g)) {
    cudnn_avg_pool2d_backward(grad_input, grad_out, g);
    return;
  }
#endif
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

void adaptive_max_pool2d_forward_cuda(const Tensor& out, const Tensor& indices,
                                      const Tensor& input) {
  DeviceGuard dg(input.device());
  launch_adaptive_max_pool2d_forward(input.dtype(), out.data_ptr(),
                                     static_cast<int64_t*>(indices.data_ptr()), input.data_ptr(),
                                     input.size(0), input.size(1), input.size(2), out.size(1),
                                     out.size(2), compute_stream(input.device()));
}

void adaptive_max_pool2d_backward_cuda(const Tensor& grad_input, const Tensor& grad_out,
                                       const Tensor& indices) {
  DeviceGuard dg(grad_out.device());
  launch_adaptive_max_pool2d_backward(
      grad_out.dtype(), grad_input.data_ptr(), grad_out.data_ptr(),
      static_cast<const int64_t*>(indices.data_ptr()), grad_input.size(0), grad_input.size(1),
      grad_input.size(2), grad_out.size(1), grad_out.size(2), compute_stream(grad_out.device()));
}

SL_REGISTER_KERNEL(max_pool2d_forward_kernel, DeviceKind::cuda, &max_pool2d_forward_cuda);
SL_REGISTER_KERNEL(max_pool2d_backward_kernel, DeviceKind::cuda, &max_pool2d_backward_cuda);
SL_REGISTER_KERNEL(avg_pool2d_forward_kernel, DeviceKind::cuda, &avg_pool2d_forward_cuda);
SL_REGISTER_KERNEL(avg_pool2d_backward_kernel, DeviceKind::cuda, &avg_pool2d_backward_cuda);
SL_REGISTER_KERNEL(adaptive_avg_pool2d_forward_kernel, DeviceKind::cuda,
                   &adaptive_avg_pool2d_forward_cuda);
SL_REGISTER_KERNEL(adaptive_avg_pool2d_backward_kernel, DeviceKind::cuda,
                   &adaptive_avg_pool2d_backward_cuda);
SL_REGISTER_KERNEL(adaptive_max_pool2d_forward_kernel, DeviceKind::cuda,
                   &adaptive_max_pool2d_forward_cuda);
SL_REGISTER_KERNEL(adaptive_max_pool2d_backward_kernel, DeviceKind::cuda,
                   &adaptive_max_pool2d_backward_cuda);

}  // namespace
}  // namespace sl::cuda
