// Differentiable layer norm and batch norm: fused kernels with the backward beside the forward.
#include "autograd/ops/norm.h"

#include <numeric>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "core/amp.h"

namespace sl {

namespace {

/// What norm_backward_graph needs to know about one normalisation.
struct NormLayout {
  std::vector<int64_t> stat_dims;   ///< the dims each statistic is taken over
  std::vector<int64_t> param_dims;  ///< the dims weight / bias are broadcast over
  Shape param_view;                 ///< weight / bias / statistics viewed to broadcast over x
  bool batch_stats;                 ///< statistics of x itself (else the constants saved)
};

/// The backward of out = (x - mean) * rstd * w + b as differentiable ops, for a backward that
/// records a graph (create_graph, Note [Double backward] in autograd/engine.cpp); the fused
/// kernels give the same values otherwise. With batch statistics they are recomputed from x
/// (attached to its history), so the result is differentiable through them too:
///   gx = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)),  gxhat = g * w
/// and with constant ones (batch norm in eval) gx = gxhat * rstd; gw = sum(g * xhat), gb = sum(g)
/// over param_dims, in the parameters' dtypes.
variable_list norm_backward_graph(const BackwardCtx& c, const Tensor& x, const Tensor& w,
                                  const ops::NormForward& saved, const NormLayout& l, double eps,
                                  DType bias_dtype) {
  const Tensor& g = c.grad();
  auto over_params = [&l](const Tensor& t) {
    return l.param_dims.empty() ? t : t.sum(l.param_dims);
  };
  Tensor mean, rstd;
  if (l.batch_stats) {
    mean = x.mean(l.stat_dims, true);
    rstd = rsqrt((x - mean).square().mean(l.stat_dims, true) + eps);
  } else {
    mean = saved.mean.view(l.param_view).to(x.dtype());
    rstd = saved.rstd.view(l.param_view).to(x.dtype());
  }
  Tensor xhat = (x - mean) * rstd;
  Tensor gx, gw, gb;
  if (c.needs(0)) {
    Tensor gxhat = w.defined() ? g * w.view(l.param_view).to(g.dtype()) : g;
    gx = l.batch_stats ? rstd * (gxhat - gxhat.mean(l.stat_dims, true) -
                                 xhat * (gxhat * xhat).mean(l.stat_dims, true))
                       : gxhat * rstd;
  }
  if (c.needs(1)) gw = over_params(g * xhat).to(w.dtype());
  if (c.needs(2)) gb = over_params(g).to(bias_dtype);
  return {gx, gw, gb};
}

std::vector<int64_t> dims_range(int64_t from, int64_t to) {
  std::vector<int64_t> d(static_cast<size_t>(std::max<int64_t>(to - from, 0)));
  std::iota(d.begin(), d.end(), from);
  return d;
}

}  // namespace

// Both norms opt in to autocast's `fp32` policy (Note [Autocast] in core/amp.h).
Tensor layer_norm(const Tensor& input_in, const Shape& normalized_shape, const Tensor& weight_in,
                  const Tensor& bias_in, double eps) {
  const Tensor input = autocast(input_in, AmpPolicy::fp32);
  const Tensor weight = autocast(weight_in, AmpPolicy::fp32);
  const Tensor bias = autocast(bias_in, AmpPolicy::fp32);
  ops::NormForward f = ops::layer_norm_forward(input, normalized_shape, weight, bias, eps);
  Tensor out = f.out;
  if (needs_grad(input, weight, bias)) {
    const int64_t lead = input.dim() - static_cast<int64_t>(normalized_shape.size());
    NormLayout layout{dims_range(lead, input.dim()), dims_range(0, lead), normalized_shape, true};
    record(
        "NativeLayerNormBackward", {input, weight, bias}, {&out},
        [sx = SavedTensor(input), sw = SavedTensor(weight), mean = f.mean, rstd = f.rstd,
         bdt = bias.defined() ? bias.dtype() : input.dtype(), layout,
         eps](const BackwardCtx& c) -> variable_list {
          const char* name = "NativeLayerNormBackward";
          if (GradMode::is_enabled()) {
            return norm_backward_graph(c, sx.unpack(name), sw.unpack(name), {}, layout, eps, bdt);
          }
          auto r =
              ops::layer_norm_backward(c.grad(), sx.unpack(name), {Tensor(), mean, rstd},
                                       sw.unpack(name), bdt, {c.needs(0), c.needs(1), c.needs(2)});
          return {r[0], r[1], r[2]};
        },
        DoubleBackward::supported);
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
    Shape per_channel(static_cast<size_t>(input.dim()), 1);
    per_channel[1] = input.size(1);
    std::vector<int64_t> others = dims_range(0, input.dim());
    others.erase(others.begin() + 1);
    NormLayout layout{others, others, per_channel, training};
    record(
        "NativeBatchNormBackward", {input, weight, bias}, {&out},
        [sx = SavedTensor(input), sw = SavedTensor(weight), mean = f.mean, rstd = f.rstd,
         bdt = bias.defined() ? bias.dtype() : input.dtype(), training, eps,
         layout](const BackwardCtx& c) -> variable_list {
          const char* name = "NativeBatchNormBackward";
          if (GradMode::is_enabled()) {
            return norm_backward_graph(c, sx.unpack(name), sw.unpack(name), {Tensor(), mean, rstd},
                                       layout, eps, bdt);
          }
          auto r = ops::batch_norm_backward(c.grad(), sx.unpack(name), {Tensor(), mean, rstd},
                                            sw.unpack(name), bdt, training, eps,
                                            {c.needs(0), c.needs(1), c.needs(2)});
          return {r[0], r[1], r[2]};
        },
        DoubleBackward::supported);
  }
  return out;
}

}  // namespace sl
