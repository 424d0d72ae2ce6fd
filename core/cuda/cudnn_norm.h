// Batch norm through cuDNN (internal header of the CUDA norm glue, core/cuda/norm.cpp; its
// definitions exist only in builds with cuDNN). The routing rules and why the results mean what
// the own kernels' do: Note [cuDNN routing].
#pragma once

#include "core/tensor.h"

namespace sl::cuda {

/// batch_norm_forward_kernel's contract (core/ops/norm.h) on one GPU, for calls
/// batch_norm_uses_cudnn accepts: contiguous input [N, C, S]; weight, bias, running_mean,
/// running_var [C] or undefined (running statistics both or neither; in evaluation both), in
/// float32 (float64 beside a float64 input); save_mean / save_invstd [C] in that dtype too.
/// Training: cudnnBatchNormalizationForwardTraining (running statistics updated in place when
/// given). Evaluation: cudnnBatchNormalizationForwardInference, and save_mean / save_invstd set
/// to the running mean and 1 / sqrt(running_var + eps). Throws CudaError when cuDNN fails.
void cudnn_batch_norm_forward(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                              const Tensor& input, const Tensor& weight, const Tensor& bias,
                              const Tensor& running_mean, const Tensor& running_var, bool training,
                              double momentum, double eps);
/// batch_norm_backward_kernel's contract in training (gradients through the batch statistics
/// save_mean / save_invstd), with cudnnBatchNormalizationBackward; undefined outputs are
/// skipped (computed into scratch buffers), an undefined weight counts as ones. eps: the
/// forward's epsilon, handed to cuDNN as it asks. Same dtype rules as the forward. Throws
/// CudaError when cuDNN fails.
void cudnn_batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight,
                               const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                               const Tensor& weight, const Tensor& save_mean,
                               const Tensor& save_invstd, double eps);

}  // namespace sl::cuda
