// Differentiable layer norm and batch norm: fused kernels with the backward beside the forward.
#include "autograd/ops/norm.h"

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/amp.h"

namespace sl {

// Both norms opt in to autocast's `fp32` policy (Note [Autocast] in core/amp.h).
Tensor layer_norm(const Tensor& input_in, const Shape& normalized_shape, const Tensor& weight_in,
                  const Tensor& bias_in, double eps) {
  const Tensor input = autocast(input_in, AmpPolicy::fp32);
  const Tensor weight = autocast(weight_in, AmpPolicy::fp32);
  const Tensor bias = autocast(bias_in, AmpPolicy::fp32);
  ops::NormForward f = ops::layer_norm_forward(input, normalized_shape, weight, bias, eps);
  Tensor out = f.out;
  if (needs_grad(input, weight, bias)) {
    record("NativeLayerNormBackward", {input, weight, bias}, {&out},
           [sx = SavedTensor(input), sw = SavedTensor(weight), mean = f.mean, rstd = f.rstd,
            bdt = bias.defined() ? bias.dtype()
                                 : input.dtype()](const BackwardCtx& c) -> variable_list {
             const char* name = "NativeLayerNormBackward";
             auto r = ops::layer_norm_backward(c.grad(), sx.unpack(name), {Tensor(), mean, rstd},
                                               sw.unpack(name), bdt,
                                               {c.needs(0), c.needs(1), c.needs(2)});
             return {r[0], r[1], r[2]};
           });
  }
  return out;
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const char* op = "group_norm";
  SL_CHECK(input.defined(), op, ": the input is undefined");
  SL_CHECK_SHAPE(input.dim() >= 2, op, ": input must be [N, C, *], got shape ",
                 shape_str(input.sizes()));
  SL_CHECK(num_groups >= 1, op, ": num_groups must be >= 1, got ", num_groups);
  const int64_t N = input.size(0), C = input.size(1);
  SL_CHECK_SHAPE(C % num_groups == 0, op, ": the ", C, " channels of input ",
                 shape_str(input.sizes()), " are not divisible by num_groups=", num_groups);
  for (const Tensor* p : {&weight, &bias}) {
    SL_CHECK_SHAPE(!p->defined() || p->sizes() == Shape{C}, op, ": ",
                   p == &weight ? "weight" : "bias", " must be [", C, "] (one per channel), got ",
                   shape_str(p->sizes()));
  }
  SL_CHECK(eps >= 0, op, ": eps must be >= 0, got ", eps);
  // every channel's affine factor broadcast over the spatial dims: [C, 1, ..., 1]
  Shape per_channel(static_cast<size_t>(input.dim() - 1), 1);
  per_channel[0] = C;
  Tensor out;
  if (input.numel() == 0) {
    out = autocast(input, AmpPolicy::fp32) * 0.0;  // empty, and a zero gradient for the affine
  } else {
    const int64_t per_group = input.numel() / (N * num_groups);
    out =
        layer_norm(input.reshape({N, num_groups, per_group}), {per_group}, Tensor(), Tensor(), eps)
            .reshape(input.sizes());
  }
  if (weight.defined()) out = out * autocast(weight, AmpPolicy::fp32).reshape(per_channel);
  if (bias.defined()) out = out + autocast(bias, AmpPolicy::fp32).reshape(per_channel);
  return out;
}

Tensor instance_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool use_input_stats,
                     double momentum, double eps) {
  const char* op = "instance_norm";
  SL_CHECK(input.defined(), op, ": the input is undefined");
  SL_CHECK_SHAPE(input.dim() >= 2, op, ": input must be [N, C, *], got shape ",
                 shape_str(input.sizes()));
  const int64_t N = input.size(0), C = input.size(1);
  for (auto [p, name] :
       {std::pair{&running_mean, "running_mean"}, std::pair{&running_var, "running_var"}}) {
    SL_CHECK_SHAPE(!p->defined() || p->sizes() == Shape{C}, op, ": ", name, " must be [", C,
                   "] (one per channel), got ", shape_str(p->sizes()));
  }
  SL_CHECK(running_mean.defined() == running_var.defined(), op,
           ": running_mean and running_var must both be defined or both undefined");
  if (!use_input_stats) {
    SL_CHECK(running_mean.defined(), op,
             ": use_input_stats=false needs running_mean and running_var");
    // Every slice normalised with its channel's running statistics: batch norm in eval.
    return batch_norm(input, running_mean, running_var, weight, bias, false, momentum, eps);
  }
  int64_t spatial = 1;
  for (int64_t d = 2; d < input.dim(); ++d) spatial *= input.size(d);
  SL_CHECK(spatial != 1, op, ": expected more than 1 spatial element when training, got input ",
           shape_str(input.sizes()));
  Tensor out = group_norm(input, C, weight, bias, eps);  // checks weight / bias and eps
  if (running_mean.defined() && input.numel() > 0) {
    NoGradGuard ng;
    // PyTorch runs batch norm on a [1, N * C, *] view with the running statistics repeated N
    // times, then averages the N updated copies: the same as averaging the statistics first.
    const Tensor slices = input.detach().reshape({N, C, spatial});
    const Tensor mean = slices.mean({2}).mean({0});
    const Tensor var = slices.var({2}, 1).mean({0});
    Tensor rm = running_mean, rv = running_var;  // handles to the caller's buffers
    rm.mul_(1.0 - momentum).add_(mean.to(rm.dtype()), momentum);
    rv.mul_(1.0 - momentum).add_(var.to(rv.dtype()), momentum);
  }
  return out;
}

Tensor batch_norm(const Tensor& input_in, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight_in, const Tensor& bias_in, bool training, double momentum,
                  double eps) {
  const Tensor input = autocast(input_in, AmpPolicy::fp32);
  const Tensor weight = autocast(weight_in, AmpPolicy::fp32);
  const Tensor bias = autocast(bias_in, AmpPolicy::fp32);
  ops::NormForward f = ops::batch_norm_forward(input, running_mean, running_var, weight, bias,
                                               training, momentum, eps);
  Tensor out = f.out;
  if (needs_grad(input, weight, bias)) {
    record("NativeBatchNormBackward", {input, weight, bias}, {&out},
           [sx = SavedTensor(input), sw = SavedTensor(weight), mean = f.mean, rstd = f.rstd,
            bdt = bias.defined() ? bias.dtype() : input.dtype(), training,
            eps](const BackwardCtx& c) -> variable_list {
             const char* name = "NativeBatchNormBackward";
             auto r = ops::batch_norm_backward(c.grad(), sx.unpack(name), {Tensor(), mean, rstd},
                                               sw.unpack(name), bdt, training, eps,
                                               {c.needs(0), c.needs(1), c.needs(2)});
             return {r[0], r[1], r[2]};
           });
  }
  return out;
}

}  // namespace sl
