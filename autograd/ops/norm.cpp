// Differentiable layer norm and batch norm: fused kernels with the backward beside the forward.
#include "autograd/ops/norm.h"

#include "autograd/function.h"
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
