// Differentiable normalisation layers, named and ordered as torch.nn.functional; fused
// forward and backward kernels from the norm family (core/ops/norm.h). Twice differentiable:
// under create_graph the backward is recorded as differentiable ops (Note [Double backward] in
// autograd/engine.cpp).
#pragma once

#include "core/ops/norm.h"
#include "core/tensor.h"

namespace sl {

/// Normalises over the trailing dims `normalized_shape` of input (mean and biased variance per
/// leading index), then scales by weight and shifts by bias (each of shape normalized_shape, or
/// undefined). Gradients for input, weight and bias. Throws ShapeError when input does not end
/// with normalized_shape or weight / bias differ from it, ValueError for an empty
/// normalized_shape or negative eps, DTypeError, DeviceError.
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);

/// Group normalisation of input [N, C, *] (as torch.nn.functional.group_norm): the C channels
/// split into num_groups groups of C / num_groups consecutive channels, each (sample, group)
/// normalised over its channels and spatial positions (mean and biased variance), then scaled
/// and shifted per channel by weight / bias ([C], or undefined). Runs on layer_norm's fused
/// kernels (a [N, G, C / G * spatial] view) plus one broadcast multiply-add for the affine part;
/// float32 under autocast, as layer_norm. Throws ShapeError for rank < 2, channels not divisible
/// by num_groups or weight / bias not [C]; ValueError for num_groups < 1 or negative eps. An
/// input with no elements gives an empty output (and zero weight / bias gradients).
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

/// Instance normalisation of input [N, C, *] (as torch.nn.functional.instance_norm): each
/// (sample, channel) slice normalised over its spatial dims, then scaled and shifted per channel
/// by weight / bias ([C], or undefined).
/// use_input_stats: normalises with each slice's mean and biased variance (group_norm with C
/// groups; the gradient flows through the statistics) and, when running_mean / running_var ([C])
/// are defined, updates them in place, without gradient, to
///   (1 - momentum) * running + momentum * (the per-slice statistic averaged over N)
/// (unbiased variance for running_var), as PyTorch. Otherwise: normalises every slice with the
/// running statistics, which must be defined. Throws ShapeError for rank < 2 or weight / bias /
/// running statistics not [C]; ValueError for use_input_stats with exactly one spatial element
/// (PyTorch's "Expected more than 1 spatial element when training"), eval without running
/// statistics, or negative eps; DTypeError, DeviceError as batch_norm.
Tensor instance_norm(const Tensor& input, const Tensor& running_mean = Tensor(),
                     const Tensor& running_var = Tensor(), const Tensor& weight = Tensor(),
                     const Tensor& bias = Tensor(), bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);

/// Batch normalisation of input [N, C, *] ([N, C], [N, C, L], [N, C, H, W], ...) per channel.
/// training: normalises with the batch mean and biased variance and, when running_mean /
/// running_var ([C]) are defined, updates them in place to
///   (1 - momentum) * running + momentum * batch_stat (unbiased variance for running_var);
/// the gradient flows through the batch statistics. Not training: normalises with the running
/// statistics, which must be defined. weight / bias [C] or undefined. Throws ShapeError (rank,
/// parameter shapes), ValueError (training with exactly 1 value per channel, eval without
/// running statistics, bad eps / momentum), DTypeError, DeviceError. An empty input gives an
/// empty output, zero weight / bias gradients and unchanged running statistics, as PyTorch.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  bool training = false, double momentum = 0.1, double eps = 1e-5);

}  // namespace sl
