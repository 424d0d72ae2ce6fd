// LayerNorm, GroupNorm, BatchNorm1d, BatchNorm2d, InstanceNorm1d/2d/3d, as torch.nn's,
// with PyTorch's parameter and buffer names (weight, bias, running_mean, running_var,
// num_batches_tracked).
#pragma once

#include <optional>

#include "nn/module.h"

namespace sl::nn {

class StatsSync;

/// Normalises over the trailing `normalized_shape` dims; weight (ones) and bias (zeros) of that
/// shape when elementwise_affine. Errors as sl::layer_norm (ShapeError when the input does not
/// end with normalized_shape).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     TensorOptions opts = {});
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const Shape normalized_shape;
  const double eps;
  const bool elementwise_affine;
  Tensor weight, bias;
};

/// torch.nn.GroupNorm: sl::group_norm over num_groups groups of num_channels / num_groups
/// channels; weight (ones) and bias (zeros) [num_channels] when affine. Throws ValueError at
/// construction for num_groups < 1, num_channels < 1 or num_channels not divisible by
/// num_groups; forward's errors are group_norm's (ShapeError for an input without num_channels
/// channels).
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
            TensorOptions opts = {});
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const int64_t num_groups, num_channels;
  const double eps;
  const bool affine;
  Tensor weight, bias;
};

struct BatchNormOptions {
  double eps = 1e-5;
  /// Running-statistics factor; nullopt uses the cumulative average (1 / num_batches_tracked),
  /// as PyTorch's momentum=None.
  std::optional<double> momentum = 0.1;
  bool affine = true;
  bool track_running_stats = true;
  TensorOptions tensor_options = {};
};

/// Per-channel normalisation of [N, C, *] over N and *. Training: batch statistics, and the
/// running ones updated (num_batches_tracked += 1); eval: the running statistics (batch ones when
/// track_running_stats is false). Subclasses fix the accepted ranks.
class BatchNormBase : public Module {
 public:
  BatchNormBase(const char* name, int64_t num_features, BatchNormOptions opts);
  std::string extra_repr() const override;
  const int64_t num_features;
  const BatchNormOptions options;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  /// When set (and its world size > 1), training uses the statistics of every rank's batch
  /// (Note [SyncBatchNorm] in nn/sync_batch_norm.h; set by convert_sync_batchnorm).
  std::shared_ptr<StatsSync> stats_sync;

 protected:
  Tensor run(const Tensor& x);
};

/// Input [N, C] or [N, C, L] (ShapeError otherwise, and for C != num_features).
class BatchNorm1d : public BatchNormBase {
 public:
  explicit BatchNorm1d(int64_t num_features, BatchNormOptions opts = {})
      : BatchNormBase("BatchNorm1d", num_features, opts) {}
  Tensor forward(const Tensor& x) override;
};

/// Input [N, C, H, W] (ShapeError otherwise, and for C != num_features).
class BatchNorm2d : public BatchNormBase {
 public:
  explicit BatchNorm2d(int64_t num_features, BatchNormOptions opts = {})
      : BatchNormBase("BatchNorm2d", num_features, opts) {}
  Tensor forward(const Tensor& x) override;
};

/// torch.nn.InstanceNorm{1,2,3}d (PyTorch 1.13): sl::instance_norm of each (sample, channel) slice
/// over its spatial dims. weight (ones) and bias (zeros) [num_features] when affine;
/// running_mean (zeros), running_var (ones) and num_batches_tracked (0, never incremented, as
/// PyTorch's InstanceNorm) when track_running_stats. Training, or eval without running
/// statistics: the slice's own statistics (running ones updated when tracked, unbiased variance,
/// averaged over the batch); eval with them: the running statistics. Throws ValueError at
/// construction for num_features < 1. forward throws ShapeError for a rank the subclass does not
/// accept, and, when affine or track_running_stats, for a channel count != num_features (without
/// either, any channel count is accepted, as PyTorch 1.13); ValueError for one spatial element
/// when using the input's statistics.
class InstanceNormBase : public Module {
 public:
  InstanceNormBase(const char* name, int64_t num_features, double eps, double momentum, bool affine,
                   bool track_running_stats, TensorOptions opts);
  std::string extra_repr() const override;
  const int64_t num_features;
  const double eps, momentum;
  const bool affine, track_running_stats;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  /// Normalises x, of rank batched_dim (or batched_dim - 1: unbatched, [C, *]).
  Tensor run(const Tensor& x, int64_t batched_dim);
};

/// Input [N, C, L], or unbatched [C, L] (ShapeError otherwise).
class InstanceNorm1d : public InstanceNormBase {
 public:
  explicit InstanceNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                          bool affine = false, bool track_running_stats = false,
                          TensorOptions opts = {})
      : InstanceNormBase("InstanceNorm1d", num_features, eps, momentum, affine, track_running_stats,
                         opts) {}
  Tensor forward(const Tensor& x) override { return run(x, 3); }
};

/// Input [N, C, H, W], or unbatched [C, H, W] (ShapeError otherwise).
class InstanceNorm2d : public InstanceNormBase {
 public:
  explicit InstanceNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                          bool affine = false, bool track_running_stats = false,
                          TensorOptions opts = {})
      : InstanceNormBase("InstanceNorm2d", num_features, eps, momentum, affine, track_running_stats,
                         opts) {}
  Tensor forward(const Tensor& x) override { return run(x, 4); }
};

/// Input [N, C, D, H, W], or unbatched [C, D, H, W] (ShapeError otherwise).
class InstanceNorm3d : public InstanceNormBase {
 public:
  explicit InstanceNorm3d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                          bool affine = false, bool track_running_stats = false,
                          TensorOptions opts = {})
      : InstanceNormBase("InstanceNorm3d", num_features, eps, momentum, affine, track_running_stats,
                         opts) {}
  Tensor forward(const Tensor& x) override { return run(x, 5); }
};

}  // namespace sl::nn
