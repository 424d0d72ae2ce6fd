// The interface between the CUDA glue and the kernels of the optim-fused family (optim.cu):
// pointers, lengths and scalars only (Note [CUDA glue and kernels]).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace sl::cuda {

/// The scalars of one SGD step (SgdHyper, core/ops/optim.h).
struct SgdArgs {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize, init_momentum;
};
/// The scalars of one Adam / AdamW step (AdamHyper and AdamStepScalars).
struct AdamArgs {
  double beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize, decoupled_weight_decay;
  double step_size, bias_correction2_sqrt, decay;
};

/// The scalars of one RMSprop step (RmspropHyper).
struct RmspropArgs {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered, maximize;
};
/// The scalars of one Adagrad step (AdagradHyper; clr = adagrad_clr at the step).
struct AdagradArgs {
  double clr, eps, weight_decay;
  bool maximize;
};

/// The scalars of one Adamax step (AdamaxHyper; clr = adamax_clr at the step).
struct AdamaxArgs {
  double beta1, beta2, eps, weight_decay, clr;
  bool maximize;
};
/// The scalars of one NAdam step (NadamHyper and NadamStepScalars).
struct NadamArgs {
  double beta1, beta2, eps, weight_decay, bias_correction2, grad_coef, exp_avg_coef;
};
/// The scalars of one RAdam step (RadamHyper and RadamStepScalars).
struct RadamArgs {
  double beta1, beta2, eps, weight_decay, lr, bias_correction1, bias_correction2_sqrt, rect;
  bool rectified;
};

/// The scalars of one LAMB step (LambHyper and LambStepScalars).
struct LambArgs {
  double beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2;
};

/// Note [Optimizer kernels over flat spans]: n elements; param / state of dtype pt, grad of gt
/// (gt == pt, or f16 / bf16 with pt f32); momentum / max_exp_avg_sq may be null when unused.
void launch_sgd_step(DType pt, DType gt, void* param, const void* grad, void* momentum, int64_t n,
                     const SgdArgs& a, cudaStream_t s);
void launch_adam_step(DType pt, DType gt, void* param, const void* grad, void* exp_avg,
                      void* exp_avg_sq, void* max_exp_avg_sq, int64_t n, const AdamArgs& a,
                      cudaStream_t s);
/// grad_avg is null unless centered, momentum null unless momentum > 0.
void launch_rmsprop_step(DType pt, DType gt, void* param, const void* grad, void* square_avg,
                         void* grad_avg, void* momentum, int64_t n, const RmspropArgs& a,
                         cudaStream_t s);
void launch_adagrad_step(DType pt, DType gt, void* param, const void* grad, void* sum, int64_t n,
                         const AdagradArgs& a, cudaStream_t s);
void launch_adamax_step(DType pt, DType gt, void* param, const void* grad, void* exp_avg,
                        void* exp_inf, int64_t n, const AdamaxArgs& a, cudaStream_t s);
void launch_nadam_step(DType pt, DType gt, void* param, const void* grad, void* exp_avg,
                       void* exp_avg_sq, int64_t n, const NadamArgs& a, cudaStream_t s);
void launch_radam_step(DType pt, DType gt, void* param, const void* grad, void* exp_avg,
                       void* exp_avg_sq, int64_t n, const RadamArgs& a, cudaStream_t s);
/// LAMB phase 1's element-wise part (Note [LAMB over flat spans]): moments and update u (of
/// param's dtype) over n elements; the sums of squares come from launch_norm_partial.
void launch_lamb_moments(DType pt, DType gt, const void* param, const void* grad, void* exp_avg,
                         void* exp_avg_sq, void* update, int64_t n, const LambArgs& a,
                         cudaStream_t s);
/// LAMB phase 2 over one segment of n elements: param -= lr * r * update with r from the two
/// device doubles sums[0] (||w||^2) and sums[1] (||u||^2), computed on the device.
void launch_lamb_apply(DType pt, void* param, const void* update, int64_t n, const double* sums,
                       double lr, cudaStream_t s);
/// grad *= inv_scale; *found_inf = 1 when grad held an inf or NaN (never cleared).
void launch_unscale_check(DType dt, void* grad, float* found_inf, int64_t n, double inv_scale,
                          cudaStream_t s);
/// Sum of |x|^p (max |x| for p = inf; NaN if any element is NaN) in double, written to *out (a
/// device double).
void launch_norm_partial(DType dt, const void* x, int64_t n, double p, double* out, cudaStream_t s);

}  // namespace sl::cuda
