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

void rmsprop_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                       const Tensor& grad_avg, const Tensor& momentum_buf, const RmspropHyper& h) {
  RmspropArgs a{h.lr, h.alpha, h.eps, h.weight_decay, h.momentum, h.centered, h.maximize};
  DeviceGuard g(param.device());
  launch_rmsprop_step(param.dtype(), grad.dtype(), param.data_ptr(), grad.data_ptr(),
                      square_avg.data_ptr(), h.centered ? ptr_or_null(grad_avg) : nullptr,
                      h.momentum > 0.0 ? ptr_or_null(momentum_buf) : nullptr, param.numel(), a,
                      compute_stream(param.device()));
}

void adagrad_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& sum, int64_t step,
                       const AdagradHyper& h) {
  AdagradArgs a{adagrad_clr(h, step), h.eps, h.weight_decay, h.maximize};
  DeviceGuard g(param.device());
  launch_adagrad_step(param.dtype(), grad.dtype(), param.data_ptr(), grad.data_ptr(),
                      sum.data_ptr(), param.numel(), a, compute_stream(param.device()));
}

void adamax_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                      const Tensor& exp_inf, int64_t step, const AdamaxHyper& h) {
  AdamaxArgs a{h.beta1, h.beta2, h.eps, h.weight_decay, adamax_clr(h, step), h.maximize};
  DeviceGuard g(param.device());
  launch_adamax_step(param.dtype(), grad.dtype(), param.data_ptr(), grad.data_ptr(),
                     exp_avg.data_ptr(), exp_inf.data_ptr(), param.numel(), a,
                     compute_stream(param.device()));
}

void nadam_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                     const Tensor& exp_avg_sq, int64_t step, double mu_product,
                     const NadamHyper& h) {
  const NadamStepScalars sc = nadam_step_scalars(h, step, mu_product);
  NadamArgs a{h.beta1,      h.beta2,        h.eps, h.weight_decay, sc.bias_correction2,
              sc.grad_coef, sc.exp_avg_coef};
  DeviceGuard g(param.device());
  launch_nadam_step(param.dtype(), grad.dtype(), param.data_ptr(), grad.data_ptr(),
                    exp_avg.data_ptr(), exp_avg_sq.data_ptr(), param.numel(), a,
                    compute_stream(param.device()));
}

void radam_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                     const Tensor& exp_avg_sq, int64_t step, const RadamHyper& h) {
  const RadamStepScalars sc = radam_step_scalars(h, step);
  RadamArgs a{h.beta1,
              h.beta2,
              h.eps,
              h.weight_decay,
              h.lr,
              sc.bias_correction1,
              sc.bias_correction2_sqrt,
              sc.rect,
              sc.rectified};
  DeviceGuard g(param.device());
  launch_radam_step(param.dtype(), grad.dtype(), param.data_ptr(), grad.data_ptr(),
                    exp_avg.data_ptr(), exp_avg_sq.data_ptr(), param.numel(), a,
                    compute_stream(param.device()));
}

/// The address of element `offset` of a flat tensor's data.
void* at(const Tensor& t, int64_t offset) {
  return static_cast<char*>(t.data_ptr()) + static_cast<size_t>(offset) * t.element_size();
}

void lamb_moments_cuda(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                       const Tensor& exp_avg_sq, const Tensor& update,
                       const std::vector<int64_t>& bounds, const std::vector<int64_t>& rows,
                       const Tensor& sums, int64_t step, const LambHyper& h) {
  const LambStepScalars sc = lamb_step_scalars(h, step);
  LambArgs a{h.beta1, h.beta2, h.eps, h.weight_decay, sc.bias_correction1, sc.bias_correction2};
  DeviceGuard g(param.device());
  cudaStream_t s = compute_stream(param.device());
  launch_lamb_moments(param.dtype(), grad.dtype(), param.data_ptr(), grad.data_ptr(),
                      exp_avg.data_ptr(), exp_avg_sq.data_ptr(), update.data_ptr(), param.numel(),
                      a, s);
  // the segments' sums of squares, each by the deterministic reduction of norm_partial
  double* out = static_cast<double*>(sums.data_ptr());
  for (size_t j = 0; j < rows.size(); ++j) {
    const int64_t b = bounds[j], n = bounds[j + 1] - bounds[j];
    double* row = out + 2 * rows[j];
    if (n == 0) {
      CUDA_CHECK(cudaMemsetAsync(row, 0, 2 * sizeof(double), s));
      continue;
    }
    launch_norm_partial(param.dtype(), at(param, b), n, 2.0, row, s);
    launch_norm_partial(update.dtype(), at(update, b), n, 2.0, row + 1, s);
  }
}

void lamb_apply_cuda(const Tensor& param, const Tensor& update, const std::vector<int64_t>& bounds,
                     const std::vector<int64_t>& rows, const Tensor& sums, double lr) {
  DeviceGuard g(param.device());
  cudaStream_t s = compute_stream(param.device());
  const double* in = static_cast<const double*>(sums.data_ptr());
  for (size_t j = 0; j < rows.size(); ++j) {
    const int64_t b = bounds[j];
    launch_lamb_apply(param.dtype(), at(param, b), at(update, b), bounds[j + 1] - b,
                      in + 2 * rows[j], lr, s);
  }
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
SL_REGISTER_KERNEL(rmsprop_step_kernel, DeviceKind::cuda, &rmsprop_step_cuda);
SL_REGISTER_KERNEL(adagrad_step_kernel, DeviceKind::cuda, &adagrad_step_cuda);
SL_REGISTER_KERNEL(adamax_step_kernel, DeviceKind::cuda, &adamax_step_cuda);
SL_REGISTER_KERNEL(nadam_step_kernel, DeviceKind::cuda, &nadam_step_cuda);
SL_REGISTER_KERNEL(radam_step_kernel, DeviceKind::cuda, &radam_step_cuda);
SL_REGISTER_KERNEL(lamb_moments_kernel, DeviceKind::cuda, &lamb_moments_cuda);
SL_REGISTER_KERNEL(lamb_apply_kernel, DeviceKind::cuda, &lamb_apply_cuda);
SL_REGISTER_KERNEL(unscale_check_kernel, DeviceKind::cuda, &unscale_check_cuda);
SL_REGISTER_KERNEL(norm_partial_kernel, DeviceKind::cuda, &norm_partial_cuda);

}  // namespace
}  // namespace sl::cuda
