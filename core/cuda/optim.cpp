// CUDA glue of the optim-fused family (Note [Optimizer kernels over flat spans]).
#include "core/ops/optim.h"
#include "core/cuda/kernels_optim.h"
#include "core/cuda/runtime.h"
#include "core/ops/copy.h"

namespace sl::cuda {
namespace {

void* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr() : nullptr;
}

void sgd_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
                   const SgdHyper& h, bool init_momentum) {
  SgdArgs a{h.lr, h.momentum, h.dampening, h.weight_decay, h.nesterov, h.maximize, init_momentum};
  DeviceGuard g(param.device());
  launch_sgd_step(param.dtype(), grad.dtype(), param.data_ptr(), grad.data_ptr(),
                  h.momentum != 0.0 ? ptr_or_null(momentum_buf) : nullptr, param.numel(), a,
                  compute_stream(param.device()));
}

void adam_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                    const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, int64_t step,
                    const AdamHyper& h) {
  const AdamStepScalars sc = adam_step_scalars(h, step);
  AdamArgs a{h.beta1,
             h.beta2,
             h.eps,
             h.weight_decay,
             h.amsgrad,
             h.maximize,
             h.decoupled_weight_decay,
             sc.step_size,
             sc.bias_correction2_sqrt,
             sc.decay};
  DeviceGuard g(param.device());
  launch_adam_step(param.dtype(), grad.dtype(), param.data_ptr(), grad.data_ptr(),
                   exp_avg.data_ptr(), exp_avg_sq.data_ptr(),
                   h.amsgrad ? ptr_or_null(max_exp_avg_sq) : nullptr, param.numel(), a,
                   compute_stream(param.device()));
}

void unscale_check_cuda(const Tensor& grad, const Tensor& found_inf, double inv_scale) {
  DeviceGuard g(grad.device());
  launch_unscale_check(grad.dtype(), grad.data_ptr(), static_cast<float*>(found_inf.data_ptr()),
                       grad.numel(), inv_scale, compute_stream(grad.device()));
}

double norm_partial_cuda(const Tensor& x, double p) {
  DeviceGuard g(x.device());
  cudaStream_t s = compute_stream(x.device());
  Tensor out = ops::empty({1}, DType::f64, x.device());
  launch_norm_partial(x.dtype(), x.data_ptr(), x.numel(), p, static_cast<double*>(out.data_ptr()),
                      s);
  double host = 0;
  CUDA_CHECK(cudaMemcpyAsync(&host, out.data_ptr(), sizeof(double), cudaMemcpyDeviceToHost, s));
  stream_synchronize(x.device().index);
  return host;
}

SL_REGISTER_KERNEL(sgd_step_kernel, DeviceKind::cuda, &sgd_step_cuda);
SL_REGISTER_KERNEL(adam_step_kernel, DeviceKind::cuda, &adam_step_cuda);
SL_REGISTER_KERNEL(unscale_check_kernel, DeviceKind::cuda, &unscale_check_cuda);
SL_REGISTER_KERNEL(norm_partial_kernel, DeviceKind::cuda, &norm_partial_cuda);

}  // namespace
}  // namespace sl::cuda
