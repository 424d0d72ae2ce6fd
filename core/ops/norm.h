// The "norm" family: fused layer normalisation and batch normalisation, forward and backward.
// Not differentiable (see autograd/ops/norm.h).
//
// Note [Norm statistics]
// Means and variances are accumulated in double on the CPU (two passes over the data), and
// normalisation uses rstd = 1 / sqrt(var + eps) with the biased variance, as PyTorch. The saved
// statistics (mean, rstd / invstd) have the compute dtype (float32 for 16-bit inputs, on every
// device) and are what the backward kernels take, so no statistic is recomputed there.
//
// Kernel dtypes: the CPU kernels take one dtype throughout (float32 or float64; the ops layer
// computes 16-bit inputs in float32 and casts back). The CUDA kernels also take 16-bit inputs
// as they are (arithmetic in float), with float32 statistics, and parameters (weight, bias,
// running statistics, their gradients) in the input's dtype or in float32 (mixed precision).
#pragma once

#include <array>
#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// Row-wise layer norm of a contiguous input [M, D]: out = (x - mean) * rstd * weight + bias,
/// writing mean [M] and rstd [M]. weight / bias are [D] or undefined. Dtypes as Note [Norm
/// statistics] says per device.
SL_DECLARE_KERNEL(layer_norm_forward_kernel,
                  void(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                       const Tensor& input, const Tensor& weight, const Tensor& bias, double eps));
/// Gradients of layer_norm; each defined output among grad_input [M, D], grad_weight [D],
/// grad_bias [D] is overwritten, undefined ones are skipped. weight may be undefined (= 1).
SL_DECLARE_KERNEL(layer_norm_backward_kernel,
                  void(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                       const Tensor& grad_out, const Tensor& input, const Tensor& mean,
                       const Tensor& rstd, const Tensor& weight));
/// Batch norm of a contiguous input [N, C, S] per channel c. training: statistics of the batch
/// (biased variance for normalising), and when running_mean / running_var are defined they
/// become (1 - momentum) * running + momentum * batch (unbiased variance, n / (n - 1)). Not
/// training: normalises with the running statistics. Writes save_mean [C] and save_invstd [C]
/// (the statistics used). weight / bias [C] or undefined.
SL_DECLARE_KERNEL(batch_norm_forward_kernel,
                  void(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                       const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, bool training,
                       double momentum, double eps));
/// Gradients of batch_norm (training: through the batch statistics; else they are constants).
/// Each defined output among grad_input [N, C, S], grad_weight [C], grad_bias [C] is
/// overwritten. eps is the forward's epsilon: save_invstd already holds 1 / sqrt(var + eps), so
/// the CPU and the own CUDA kernels ignore it; cuDNN's backward is handed it because its
/// documentation asks for the forward's value (cudnn_ops_v9.h: "Same epsilon as forward pass").
SL_DECLARE_KERNEL(batch_norm_backward_kernel,
                  void(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                       const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                       const Tensor& save_mean, const Tensor& save_invstd, bool training,
                       double eps));

namespace ops {

/// Result of a normalisation forward: the output and the saved statistics.
struct NormForward {
  Tensor out, mean, rstd;
};

/// Validates and runs layer norm over the trailing dims `normalized_shape` of input. Throws
/// ShapeError (trailing dims or weight / bias shapes differ from normalized_shape), ValueError
/// (eps < 0 or empty normalized_shape), DTypeError, DeviceError.
NormForward layer_norm_forward(const Tensor& input, const Shape& normalized_shape,
                               const Tensor& weight, const Tensor& bias, double eps);
/// {grad_input, grad_weight, grad_bias}, each only when its flag is set; grad_bias in
/// bias_dtype (the bias's dtype: float32 beside a 16-bit input in mixed precision).
std::array<Tensor, 3> layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                          const NormForward& saved, const Tensor& weight,
                                          DType bias_dtype, std::array<bool, 3> needs);

/// Validates and runs batch norm on input [N, C, *] (at least 2 dims). Updates running_mean /
/// running_var in place when training and they are defined. Throws ShapeError (parameter
/// shapes), ValueError (training with one value per channel, eval without running stats,
/// negative eps, momentum outside [0, 1]), DTypeError, DeviceError.
NormForward batch_norm_forward(const Tensor& input, const Tensor& running_mean,
                               const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                               bool training, double momentum, double eps);
/// {grad_input, grad_weight, grad_bias} of batch_norm_forward, each only when its flag is set,
/// from its saved statistics; grad_bias in bias_dtype (as layer_norm_backward). training as
/// in the forward; eps is the forward's epsilon (only cuDNN reads it, see
/// batch_norm_backward_kernel).
std::array<Tensor, 3> batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                          const NormForward& saved, const Tensor& weight,
                                          DType bias_dtype, bool training, double eps,
                                          std::array<bool, 3> needs);

}  // namespace ops
}  // namespace sl
