#include "nn/normalization.h"

#include "autograd/grad_mode.h"
#include "autograd/ops/norm.h"
#include "core/creation.h"
#include "nn/sync_batch_norm.h"

namespace sl::nn {

LayerNorm::LayerNorm(Shape shape, double eps_, bool affine, TensorOptions opts)
    : Module("LayerNorm"),
      normalized_shape(std::move(shape)),
      eps(eps_),
      elementwise_affine(affine) {
  SL_CHECK(!normalized_shape.empty(), "LayerNorm: normalized_shape must not be empty");
  for (int64_t d : normalized_shape) {
    SL_CHECK(d > 0, "LayerNorm: normalized_shape must be positive, got ",
             repr::py_tuple(normalized_shape));
  }
  opts.requires_grad = false;
  weight = register_parameter("weight", affine ? ones(normalized_shape, opts) : Tensor());
  bias = register_parameter("bias", affine ? zeros(normalized_shape, opts) : Tensor());
}

Tensor LayerNorm::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "LayerNorm: the input is undefined");
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  return repr::py_tuple(normalized_shape) + ", eps=" + repr::py_float(eps) +
         ", elementwise_affine=" + repr::py_bool(elementwise_affine);
}

GroupNorm::GroupNorm(int64_t groups, int64_t channels, double eps_, bool affine_,
                     TensorOptions opts)
    : Module("GroupNorm"), num_groups(groups), num_channels(channels), eps(eps_), affine(affine_) {
  SL_CHECK(groups >= 1 && channels >= 1,
           "GroupNorm: num_groups and num_channels must be >= 1, got ", groups, " and ", channels);
  SL_CHECK(channels % groups == 0, "GroupNorm: num_channels=", channels,
           " must be divisible by num_groups=", groups);
  opts.requires_grad = false;
  weight = register_parameter("weight", affine ? ones({channels}, opts) : Tensor());
  bias = register_parameter("bias", affine ? zeros({channels}, opts) : Tensor());
}

Tensor GroupNorm::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "GroupNorm: the input is undefined");
  SL_CHECK_SHAPE(x.dim() >= 2 && x.size(1) == num_channels, "GroupNorm: expected an input [N, ",
                 num_channels, ", *], got ", shape_str(x.sizes()));
  return group_norm(x, num_groups, weight, bias, eps);
}

std::string GroupNorm::extra_repr() const {
  return std::to_string(num_groups) + ", " + std::to_string(num_channels) +
         ", eps=" + repr::py_float(eps) + ", affine=" + repr::py_bool(affine);
}

BatchNormBase::BatchNormBase(const char* name, int64_t n, BatchNormOptions opts)
    : Module(name), num_features(n), options(opts) {
  SL_CHECK(n > 0, name, ": num_features must be positive, got ", n);
  TensorOptions to = opts.tensor_options;
  to.requires_grad = false;
  weight = register_parameter("weight", opts.affine ? ones({n}, to) : Tensor());
  bias = register_parameter("bias", opts.affine ? zeros({n}, to) : Tensor());
  if (opts.track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({n}, to));
    running_var = register_buffer("running_var", ones({n}, to));
    num_batches_tracked = register_buffer("num_batches_tracked",
                                          zeros({}, {.dtype = DType::i64, .device = to.device}));
  } else {
    register_buffer("running_mean", Tensor());
    register_buffer("running_var", Tensor());
    register_buffer("num_batches_tracked", Tensor());
  }
}

Tensor BatchNormBase::run(const Tensor& x) {
  SL_CHECK_SHAPE(x.size(1) == num_features, type_name(), ": expected ", num_features,
                 " channels (dim 1), got input of shape ", shape_str(x.sizes()));
  double factor = options.momentum.value_or(0.0);
  if (is_training() && options.track_running_stats) {
    {
      NoGradGuard ng;
      num_batches_tracked.add_(1);
    }
    if (!options.momentum) factor = 1.0 / num_batches_tracked.item<double>();
  }
  if (is_training() && stats_sync && stats_sync->world_size() > 1) {
    return sync_batch_norm(x, running_mean, running_var, weight, bias, factor, options.eps,
                           stats_sync);
  }
  // Batch statistics in training, and in eval when no running statistics are tracked.
  bool use_batch_stats = is_training() || !options.track_running_stats;
  return batch_norm(x, running_mean, running_var, weight, bias, use_batch_stats, factor,
                    options.eps);
}

std::string BatchNormBase::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + repr::py_float(options.eps) + ", momentum=" +
         (options.momentum ? repr::py_float(*options.momentum) : std::string("None")) +
         ", affine=" + repr::py_bool(options.affine) +
         ", track_running_stats=" + repr::py_bool(options.track_running_stats);
}

Tensor BatchNorm1d::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "BatchNorm1d: the input is undefined");
  SL_CHECK_SHAPE(x.dim() == 2 || x.dim() == 3, "BatchNorm1d: expected 2D or 3D input (got ",
                 x.dim(), "D input)");
  return run(x);
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "BatchNorm2d: the input is undefined");
  SL_CHECK_SHAPE(x.dim() == 4, "BatchNorm2d: expected 4D input (got ", x.dim(), "D input)");
  return run(x);
}

InstanceNormBase::InstanceNormBase(const char* name, int64_t n, double eps_, double momentum_,
                                   bool affine_, bool track, TensorOptions opts)
    : Module(name),
      num_features(n),
      eps(eps_),
      momentum(momentum_),
      affine(affine_),
      track_running_stats(track) {
  SL_CHECK(n > 0, name, ": num_features must be positive, got ", n);
  opts.requires_grad = false;
  weight = register_parameter("weight", affine ? ones({n}, opts) : Tensor());
  bias = register_parameter("bias", affine ? zeros({n}, opts) : Tensor());
  running_mean = register_buffer("running_mean", track ? zeros({n}, opts) : Tensor());
  running_var = register_buffer("running_var", track ? ones({n}, opts) : Tensor());
  num_batches_tracked =
      register_buffer("num_batches_tracked",
                      track ? zeros({}, {.dtype = DType::i64, .device = opts.device}) : Tensor());
}

Tensor InstanceNormBase::run(const Tensor& x, int64_t batched_dim) {
  SL_CHECK(x.defined(), type_name(), ": the input is undefined");
  SL_CHECK_SHAPE(x.dim() == batched_dim || x.dim() == batched_dim - 1, type_name(), ": expected ",
                 batched_dim - 1, "D or ", batched_dim, "D input (got ", x.dim(), "D input)");
  const bool unbatched = x.dim() == batched_dim - 1;
  // PyTorch 1.13 checks the channels only through the [N * C] weight / running statistics it
  // builds, so an input with other channel counts passes when there are none.
  SL_CHECK_SHAPE(!(affine || track_running_stats) || x.size(unbatched ? 0 : 1) == num_features,
                 type_name(), ": expected ", num_features, " channels (dim ", unbatched ? 0 : 1,
                 "), got input of shape ", shape_str(x.sizes()));
  const Tensor batched = unbatched ? x.unsqueeze(0) : x;
  Tensor out = instance_norm(batched, running_mean, running_var, weight, bias,
                             is_training() || !track_running_stats, momentum, eps);
  return unbatched ? out.squeeze(0) : out;
}

std::string InstanceNormBase::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + repr::py_float(eps) +
         ", momentum=" + repr::py_float(momentum) + ", affine=" + repr::py_bool(affine) +
         ", track_running_stats=" + repr::py_bool(track_running_stats);
}

}  // namespace sl::nn
