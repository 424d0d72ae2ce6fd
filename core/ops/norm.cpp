#include "core/ops/norm.h"

#include "core/ops/copy.h"
#include "core/ops/view.h"

namespace sl {

SL_DEFINE_KERNEL(layer_norm_forward_kernel,
                 void(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                      const Tensor& input, const Tensor& weight, const Tensor& bias, double eps));
SL_DEFINE_KERNEL(layer_norm_backward_kernel,
                 void(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                      const Tensor& grad_out, const Tensor& input, const Tensor& mean,
                      const Tensor& rstd, const Tensor& weight));
SL_DEFINE_KERNEL(batch_norm_forward_kernel,
                 void(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                      const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const Tensor& running_mean, const Tensor& running_var, bool training,
                      double momentum, double eps));
SL_DEFINE_KERNEL(batch_norm_backward_kernel,
                 void(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                      const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                      const Tensor& save_mean, const Tensor& save_invstd, bool training,
                      double eps));

namespace ops {

namespace {

/// The dtype kernels compute in: f32 / f64 as given, float32 for the 16-bit floats. The saved
/// statistics have it on every device.
DType compute_dtype(DType t) {
  return t == DType::f64 ? DType::f64 : DType::f32;
}

/// The dtypes a norm kernel runs with for `input`: x (input, output and their gradients) and
/// params (weight, bias, running statistics and their gradients; the kernels take one), given
/// the dtypes of the parameters (an absent one counts as the input's dtype: param_dtype).
struct NormDTypes {
  DType x, params;
};
NormDTypes norm_dtypes(const Tensor& input, std::initializer_list<DType> param_dtypes) {
  const DType ct = compute_dtype(input.dtype());
  // 16-bit inputs stay 16-bit where the kernels take them (cpu_16bit_via_float32)
  const bool half = input.dtype() == DType::f16 || input.dtype() == DType::bf16;
  if (!half || cpu_16bit_via_float32(input)) return {ct, ct};
  // 16-bit parameters beside a 16-bit input stay as they are; any other mix runs in float32.
  for (DType p : param_dtypes) {
    if (p != input.dtype()) return {input.dtype(), DType::f32};
  }
  return {input.dtype(), input.dtype()};
}

/// The dtype of parameter p for norm_dtypes: its own, or the input's when p is absent.
DType param_dtype(const Tensor& p, const Tensor& input) {
  return p.defined() ? p.dtype() : input.dtype();
}

/// t contiguous in dtype ct (undefined stays undefined).
Tensor prep(const Tensor& t, DType ct) {
  if (!t.defined()) return t;
  return contiguous(cast(t, ct));
}

void check_param(const char* op, const char* name, const Tensor& p, const Shape& expected) {
  if (!p.defined()) return;
  SL_CHECK_DTYPE(is_floating(p.dtype()), op, ": ", name, " must be floating, got ",
                 dtype_name(p.dtype()));
  SL_CHECK_SHAPE(p.sizes() == expected, op, ": ", name, " of shape ", shape_str(p.sizes()),
                 " does not match the expected ", shape_str(expected));
}

/// Size of the dims of input after `first` (1 for none).
int64_t tail_numel(const Tensor& t, int64_t first) {
  int64_t n = 1;
  for (int64_t d = first; d < t.dim(); ++d) n *= t.size(d);
  return n;
}

}  // namespace

NormForward layer_norm_forward(const Tensor& input, const Shape& normalized_shape,
                               const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "layer_norm";
  check_defined(op, input);
  check_same_device(op, {&input, &weight, &bias});
  SL_CHECK_DTYPE(is_floating(input.dtype()), op, ": expected a floating input, got ",
                 dtype_name(input.dtype()));
  SL_CHECK(!normalized_shape.empty(), op, ": normalized_shape must not be empty");
  SL_CHECK(eps >= 0, op, ": eps must be non-negative, got ", eps);
  const auto k = static_cast<int64_t>(normalized_shape.size());
  bool match = input.dim() >= k;
  for (int64_t i = 0; match && i < k; ++i) {
    match = input.size(input.dim() - k + i) == normalized_shape[static_cast<size_t>(i)];
  }
  SL_CHECK_SHAPE(match, op, ": input of shape ", shape_str(input.sizes()),
                 " does not end with normalized_shape ", shape_str(normalized_shape));
  check_param(op, "weight", weight, normalized_shape);
  check_param(op, "bias", bias, normalized_shape);
  const DType ct = compute_dtype(input.dtype());
  const NormDTypes kt = norm_dtypes(input, {param_dtype(weight, input), param_dtype(bias, input)});
  const int64_t D = shape_numel(normalized_shape);
  const int64_t M = D == 0 ? 0 : input.numel() / D;
  Tensor x = prep(input, kt.x);
  NormForward r;
  r.out = empty(input.sizes(), kt.x, input.device());
  Shape stat_shape(input.sizes().begin(), input.sizes().end() - k);
  r.mean = empty(stat_shape, ct, input.device());
  r.rstd = empty(stat_shape, ct, input.device());
  if (M > 0 && D > 0) {
    layer_norm_forward_kernel(input.device().kind, view(r.out, {M, D}), view(r.mean, {M}),
                              view(r.rstd, {M}), view(x, {M, D}), prep(weight, kt.params),
                              prep(bias, kt.params), eps);
  }
  r.out = cast(r.out, input.dtype());
  return r;
}

std::array<Tensor, 3> layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                          const NormForward& saved, const Tensor& weight,
                                          DType bias_dtype, std::array<bool, 3> needs) {
  const NormDTypes kt = norm_dtypes(input, {param_dtype(weight, input), bias_dtype});
  const int64_t M = saved.mean.numel();
  const int64_t D = M == 0 ? 0 : input.numel() / M;
  std::array<Tensor, 3> r;
  Tensor gi = needs[0] ? empty(input.sizes(), kt.x, input.device()) : Tensor();
  Shape ps(input.sizes().end() - (input.dim() - saved.mean.dim()), input.sizes().end());
  Tensor gw = needs[1] ? empty(ps, kt.params, input.device()) : Tensor();
  Tensor gb = needs[2] ? empty(ps, kt.params, input.device()) : Tensor();
  if (M > 0 && D > 0) {
    layer_norm_backward_kernel(input.device().kind, gi.defined() ? view(gi, {M, D}) : gi,
                               gw.defined() ? view(gw, {D}) : gw, gb.defined() ? view(gb, {D}) : gb,
                               view(prep(grad_out, kt.x), {M, D}), view(prep(input, kt.x), {M, D}),
                               view(saved.mean, {M}), view(saved.rstd, {M}),
                               weight.defined() ? view(prep(weight, kt.params), {D}) : weight);
  } else {
    for (Tensor* t : {&gi, &gw, &gb}) {
      if (t->defined()) fill_(*t, 0);
    }
  }
  if (gi.defined()) r[0] = cast(gi, input.dtype());
  if (gw.defined()) r[1] = cast(gw, weight.dtype());
  if (gb.defined()) r[2] = cast(gb, bias_dtype);
  return r;
}

NormForward batch_norm_forward(const Tensor& input, const Tensor& running_mean,
                               const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                               bool training, double momentum, double eps) {
  const char* op = "batch_norm";
  check_defined(op, input);
  check_same_device(op, {&input, &running_mean, &running_var, &weight, &bias});
  SL_CHECK_DTYPE(is_floating(input.dtype()), op, ": expected a floating input, got ",
                 dtype_name(input.dtype()));
  SL_CHECK_SHAPE(input.dim() >= 2, op, ": expected an input [N, C, *] with at least 2 dims, got ",
                 shape_str(input.sizes()));
  SL_CHECK(eps >= 0, op, ": eps must be non-negative, got ", eps);
  SL_CHECK(momentum >= 0 && momentum <= 1, op, ": momentum must be in [0, 1], got ", momentum);
  SL_CHECK(running_mean.defined() == running_var.defined(), op,
           ": running_mean and running_var must both be given or both be undefined");
  SL_CHECK(training || running_mean.defined(), op,
           ": running_mean and running_var must be defined in evaluation mode");
  const int64_t N = input.size(0), C = input.size(1), S = tail_numel(input, 2);
  for (auto [name, p] :
       {std::pair{"weight", &weight}, std::pair{"bias", &bias},
        std::pair{"running_mean", &running_mean}, std::pair{"running_var", &running_var}}) {
    check_param(op, name, *p, {C});
  }
  // Exactly one value per channel has no batch variance; an empty batch is accepted and leaves
  // the running statistics alone, as PyTorch's batch_norm.
  SL_CHECK(!training || N * S != 1, op,
           ": expected more than 1 value per channel when training, got input of shape ",
           shape_str(input.sizes()));
  const DType ct = compute_dtype(input.dtype());
  const NormDTypes kt =
      norm_dtypes(input, {param_dtype(weight, input), param_dtype(bias, input),
                          param_dtype(running_mean, input), param_dtype(running_var, input)});
  Tensor x = prep(input, kt.x);
  NormForward r;
  r.out = empty(input.sizes(), kt.x, input.device());
  r.mean = empty({C}, ct, input.device());
  r.rstd = empty({C}, ct, input.device());
  // The kernel updates running stats in place: hand it the tensors themselves when they are
  // contiguous in the kernel's parameter dtype, else temporaries copied back afterwards.
  auto direct = [&](const Tensor& t) {
    return !t.defined() || (t.dtype() == kt.params && t.is_contiguous());
  };
  Tensor rm = direct(running_mean) ? running_mean : prep(running_mean, kt.params);
  Tensor rv = direct(running_var) ? running_var : prep(running_var, kt.params);
  if (input.numel() > 0) {
    batch_norm_forward_kernel(input.device().kind, view(r.out, {N, C, S}), r.mean, r.rstd,
                              view(x, {N, C, S}), prep(weight, kt.params), prep(bias, kt.params),
                              rm, rv, training, momentum, eps);
  } else {
    fill_(r.mean, 0);  // no statistics to save; nothing reads them for an empty input
    fill_(r.rstd, 0);
  }
  if (training && running_mean.defined() && input.numel() > 0) {
    if (rm.is_same(running_mean))
      running_mean.bump_version();
    else
      copy_(running_mean, rm);
    if (rv.is_same(running_var))
      running_var.bump_version();
    else
      copy_(running_var, rv);
  }
  r.out = cast(r.out, input.dtype());
  return r;
}

std::array<Tensor, 3> batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                          const NormForward& saved, const Tensor& weight,
                                          DType bias_dtype, bool training, double eps,
                                          std::array<bool, 3> needs) {
  const NormDTypes kt = norm_dtypes(input, {param_dtype(weight, input), bias_dtype});
  const int64_t N = input.size(0), C = input.size(1), S = tail_numel(input, 2);
  Tensor gi = needs[0] ? empty(input.sizes(), kt.x, input.device()) : Tensor();
  Tensor gw = needs[1] ? empty({C}, kt.params, input.device()) : Tensor();
  Tensor gb = needs[2] ? empty({C}, kt.params, input.device()) : Tensor();
  if (input.numel() > 0) {
    batch_norm_backward_kernel(input.device().kind, gi.defined() ? view(gi, {N, C, S}) : gi, gw, gb,
                               view(prep(grad_out, kt.x), {N, C, S}),
                               view(prep(input, kt.x), {N, C, S}), prep(weight, kt.params),
                               saved.mean, saved.rstd, training, eps);
  } else {
    for (Tensor* t : {&gw, &gb}) {
      if (t->defined()) fill_(*t, 0);
    }
  }
  std::array<Tensor, 3> r;
  if (gi.defined()) r[0] = cast(gi, input.dtype());
  if (gw.defined()) r[1] = cast(gw, weight.dtype());
  if (gb.defined()) r[2] = cast(gb, bias_dtype);
  return r;
}

}  // namespace ops
}  // namespace sl
