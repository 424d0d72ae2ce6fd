// CUDA glue of the softmax family.
#include "core/ops/softmax.h"
#include "core/cuda/kernels_core.h"
#include "core/cuda/runtime.h"

namespace sl::cuda {
namespace {

void softmax_cuda(const Tensor& out, const Tensor& in, bool log) {
  SL_ASSERT(in.dim() == 3 && in.is_contiguous() && out.is_contiguous());
  DeviceGuard g(in.device());
  launch_softmax_forward(in.dtype(), out.data_ptr(), in.data_ptr(), in.size(0), in.size(1),
                         in.size(2), log, compute_stream(in.device()));
}

void softmax_backward_cuda(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out,
                           bool log) {
  SL_ASSERT(out.dim() == 3 && out.is_contiguous() && grad_out.is_contiguous() &&
            grad_in.is_contiguous());
  DeviceGuard g(out.device());
  launch_softmax_backward(out.dtype(), grad_in.data_ptr(), grad_out.data_ptr(), out.data_ptr(),
                          out.size(0), out.size(1), out.size(2), log, compute_stream(out.device()));
}

SL_REGISTER_KERNEL(softmax_kernel, DeviceKind::cuda, &softmax_cuda);
SL_REGISTER_KERNEL(softmax_backward_kernel, DeviceKind::cuda, &softmax_backward_cuda);

}  // namespace
}  // namespace sl::cuda
