// CUDA glue of the norm and dropout families. Batch norm goes through cuDNN where Note [cuDNN
// routing] (core/cuda/cudnn_routing.h) says so, else through the own kernels (norm.cu).
#include "core/ops/norm.h"

#include <optional>

#include "core/cuda/cuda_api.h"
#include "core/cuda/cudnn_routing.h"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/runtime.h"
#include "core/ops/dropout.h"
#include "sl_config.h"
#if SL_HAVE_CUDNN
#include "core/cuda/cudnn_norm.h"
#endif

namespace sl::cuda {
namespace {

const void* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr() : nullptr;
}
void* mut_ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr() : nullptr;
}

/// The dtype the defined tensors among `params` share (the kernels take one parameter dtype);
/// the input's dtype when none is defined. Throws DTypeError naming op when two differ.
DType params_dtype(const char* op, const Tensor& input,
                   std::initializer_list<const Tensor*> params) {
  const Tensor* first = nullptr;
  for (const Tensor* p : params) {
    if (!p->defined()) continue;
    if (first == nullptr) first = p;
    SL_CHECK_DTYPE(p->dtype() == first->dtype(), op,
                   ": weight, bias and running statistics must share one dtype, got ",
                   dtype_name(first->dtype()), " and ", dtype_name(p->dtype()));
  }
  return first != nullptr ? first->dtype() : input.dtype();
}

#if SL_HAVE_CUDNN
/// The dtype shared by the defined tensors among `params` (params_dtype checked that they agree);
/// nullopt when none is defined.
std::optional<DType> given_params_dtype(std::initializer_list<const Tensor*> params) {
  for (const Tensor* p : params) {
    if (p->defined()) return p->dtype();
  }
  return std::nullopt;
}

/// Whether this batch-norm call goes through cuDNN (Note [cuDNN routing]).
bool batch_norm_via_cudnn(bool backward, bool training, const Tensor& input,
                          std::initializer_list<const Tensor*> params, double eps) {
  if (!cudnn_enabled()) return false;
  BatchNormCall call;
  call.backward = backward;
  call.training = training;
  call.input = input.dtype();
  call.params = given_params_dtype(params);
  call.N = input.size(0);
  call.C = input.size(1);
  call.S = input.size(2);
  call.eps = eps;
  return batch_norm_uses_cudnn(call);
}
#endif

/// The saved statistics' dtype must be the compute dtype of the input (kernels_nn.h).
void check_stats_dtype(const char* op, const Tensor& input, const Tensor& stat) {
  const DType dt = input.dtype();
  const DType want = dt == DType::f16 || dt == DType::bf16 ? DType::f32 : dt;
  SL_CHECK_DTYPE(stat.dtype() == want, op, ": saved statistics of dtype ", dtype_name(stat.dtype()),
                 " for an input of dtype ", dtype_name(dt), " (expected ", dtype_name(want), ")");
}

void layer_norm_forward_cuda(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                             const Tensor& input, const Tensor& weight, const Tensor& bias,
                             double eps) {
  const char* op = "layer_norm";
  const DType pdt = params_dtype(op, input, {&weight, &bias});
  check_stats_dtype(op, input, mean);
  check_stats_dtype(op, input, rstd);
  DeviceGuard g(input.device());
  launch_layer_norm_forward(input.dtype(), pdt, input.data_ptr(), ptr_or_null(weight),
                            ptr_or_null(bias), out.data_ptr(), mean.data_ptr(), rstd.data_ptr(),
                            input.size(0), input.size(1), eps, compute_stream(input.device()));
}

void layer_norm_backward_cuda(const Tensor& grad_input, const Tensor& grad_weight,
                              const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                              const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  const char* op = "layer_norm_backward";
  const DType pdt = params_dtype(op, input, {&weight, &grad_weight, &grad_bias});
  check_stats_dtype(op, input, mean);
  check_stats_dtype(op, input, rstd);
  DeviceGuard g(input.device());
  launch_layer_norm_backward(input.dtype(), pdt, mut_ptr_or_null(grad_input),
                             mut_ptr_or_null(grad_weight), mut_ptr_or_null(grad_bias),
                             grad_out.data_ptr(), input.data_ptr(), mean.data_ptr(),
                             rstd.data_ptr(), ptr_or_null(weight), input.size(0), input.size(1),
                             compute_stream(input.device()));
}

void batch_norm_forward_cuda(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                             const Tensor& input, const Tensor& weight, const Tensor& bias,
                             const Tensor& running_mean, const Tensor& running_var, bool training,
                             double momentum, double eps) {
  SL_CHECK(training || (running_mean.defined() && running_var.defined()),
           "batch_norm: evaluation needs running_mean and running_var");
  const char* op = "batch_norm";
  const DType pdt = params_dtype(op, input, {&weight, &bias, &running_mean, &running_var});
  check_stats_dtype(op, input, save_mean);
  check_stats_dtype(op, input, save_invstd);
#if SL_HAVE_CUDNN
  if (batch_norm_via_cudnn(false, training, input, {&weight, &bias, &running_mean, &running_var},
                           eps)) {
    cudnn_batch_norm_forward(out, save_mean, save_invstd, input, weight, bias, running_mean,
                             running_var, training, momentum, eps);
    return;
  }
#endif
  DeviceGuard g(input.device());
  launch_batch_norm_forward(input.dtype(), pdt, out.data_ptr(), save_mean.data_ptr(),
                            save_invstd.data_ptr(), input.data_ptr(), ptr_or_null(weight),
                            ptr_or_null(bias), mut_ptr_or_null(running_mean),
                            mut_ptr_or_null(running_var), training, momentum, eps, input.size(0),
                            input.size(1), input.size(2), compute_stream(input.device()));
}

void batch_norm_backward_cuda(const Tensor& grad_input, const Tensor& grad_weight,
                              const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                              const Tensor& weight, const Tensor& save_mean,
                              const Tensor& save_invstd, bool training, double eps) {
  const char* op = "batch_norm_backward";
  const DType pdt = params_dtype(op, input, {&weight, &grad_weight, &grad_bias});
  check_stats_dtype(op, input, save_mean);
  check_stats_dtype(op, input, save_invstd);
#if SL_HAVE_CUDNN
  if (batch_norm_via_cudnn(true, training, input, {&weight, &grad_weight, &grad_bias}, eps)) {
    cudnn_batch_norm_backward(grad_input, grad_weight, grad_bias, grad_out, input, weight,
                              save_mean, save_invstd, eps);
    return;
  }
#endif
  DeviceGuard g(input.device());
  launch_batch_norm_backward(input.dtype(), pdt, mut_ptr_or_null(grad_input),
                             mut_ptr_or_null(grad_weight), mut_ptr_or_null(grad_bias),
                             grad_out.data_ptr(), input.data_ptr(), ptr_or_null(weight),
                             save_mean.data_ptr(), save_invstd.data_ptr(), training, input.size(0),
                             input.size(1), input.size(2), compute_stream(input.device()));
}

void dropout_forward_cuda(const Tensor& out, const Tensor& mask, const Tensor& input, double p,
                          double scale, uint64_t seed, uint64_t offset) {
  DeviceGuard g(input.device());
  launch_dropout_forward(input.dtype(), out.data_ptr(), static_cast<bool*>(mask.data_ptr()),
                         input.data_ptr(), input.numel(), p, scale, seed, offset,
                         compute_stream(input.device()));
}

void dropout_backward_cuda(const Tensor& grad_input, const Tensor& grad_out, const Tensor& mask,
                           double scale) {
  DeviceGuard g(grad_out.device());
  launch_dropout_backward(grad_out.dtype(), grad_input.data_ptr(), grad_out.data_ptr(),
                          static_cast<const bool*>(mask.data_ptr()), grad_out.numel(), scale,
                          compute_stream(grad_out.device()));
}

SL_REGISTER_KERNEL(layer_norm_forward_kernel, DeviceKind::cuda, &layer_norm_forward_cuda);
SL_REGISTER_KERNEL(layer_norm_backward_kernel, DeviceKind::cuda, &layer_norm_backward_cuda);
SL_REGISTER_KERNEL(batch_norm_forward_kernel, DeviceKind::cuda, &batch_norm_forward_cuda);
SL_REGISTER_KERNEL(batch_norm_backward_kernel, DeviceKind::cuda, &batch_norm_backward_cuda);
SL_REGISTER_KERNEL(dropout_forward_kernel, DeviceKind::cuda, &dropout_forward_cuda);
SL_REGISTER_KERNEL(dropout_backward_kernel, DeviceKind::cuda, &dropout_backward_cuda);

}  // namespace
}  // namespace sl::cuda
