// Differentiable resampling: argument rules of F.interpolate (PyTorch 1.13), the upsample
// kernels' forward, and its backward beside it.
#include "autograd/ops/upsample.h"

#include <cmath>

#include "autograd/function.h"
#include "autograd/ops/linear_pair.h"
#include "autograd/ops/pool.h"
#include "core/ops/copy.h"
#include "core/ops/pool.h"
#include "core/ops/upsample.h"
#include "core/ops/view.h"

namespace sl {

void check_interpolate_mode(const InterpolateOptions& o, const char* op) {
  const std::string& mode = o.mode;
  SL_CHECK(mode == "nearest" || mode == "nearest-exact" || mode == "area" || mode == "linear" ||
               mode == "bilinear" || mode == "bicubic" || mode == "trilinear",
           op,
           ": mode must be one of nearest | nearest-exact | area | linear | bilinear | bicubic | "
           "trilinear, got '",
           mode, "'");
  const bool interpolating =
      mode == "linear" || mode == "bilinear" || mode == "bicubic" || mode == "trilinear";
  SL_CHECK(interpolating || !o.align_corners.has_value(), op,
           ": align_corners option can only be set with the interpolating modes linear | "
           "bilinear | bicubic | trilinear, got align_corners=",
           *o.align_corners ? "True" : "False", " with mode '", mode, "'");
  SL_CHECK(!o.antialias || mode == "bilinear" || mode == "bicubic", op,
           ": antialias is only supported for the bilinear and bicubic modes, got mode '", mode,
           "'");
}

namespace {

std::string list_str(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + detail::str_cat(v[i]);
  return s + "]";
}

/// The per-dim values of a one-or-per-dim list.
template <class V>
std::vector<V> per_dim(const std::vector<V>& v, int64_t dims) {
  return v.size() == 1 ? std::vector<V>(static_cast<size_t>(dims), v[0]) : v;
}

struct Resolved {
  UpsampleGeometry g;
  UpsampleMode mode = UpsampleMode::nearest;
  bool area = false;  ///< adaptive average pooling to the output size, as PyTorch's "area"
  const char* backward_name = "";
};

Resolved resolve(const Tensor& input, const InterpolateOptions& o) {
  constexpr const char* op = "interpolate";
  ops::check_defined(op, input);
  const std::string& mode = o.mode;
  check_interpolate_mode(o, op);
  const bool interpolating =
      mode == "linear" || mode == "bilinear" || mode == "bicubic" || mode == "trilinear";
  if (!interpolating) {
    SL_CHECK_SHAPE(input.dim() >= 3 && input.dim() <= 5, op, ": mode '", mode,
                   "' expects a 3-d [N, C, W], 4-d [N, C, H, W] or 5-d [N, C, D, H, W] input, got ",
                   shape_str(input.sizes()));
  } else {
    const int64_t want = mode == "linear" ? 3 : mode == "trilinear" ? 5 : 4;
    SL_CHECK_SHAPE(input.dim() == want, op, ": mode '", mode, "' expects a ", want, "-d input",
                   want == 3   ? " [N, C, W]"
                   : want == 4 ? " [N, C, H, W]"
                               : " [N, C, D, H, W]",
                   ", got ", shape_str(input.sizes()));
  }
  SL_CHECK_DTYPE(is_floating(input.dtype()), op, ": expected a floating input, got ",
                 dtype_name(input.dtype()));
  const int64_t dims = input.dim() - 2;
  const bool has_size = !o.size.empty(), has_scale = !o.scale_factor.empty();
  SL_CHECK(!(has_size && has_scale), op,
           ": only one of size or scale_factor should be defined, got size ", shape_str(o.size),
           " and scale_factor ", list_str(o.scale_factor));
  SL_CHECK(has_size || has_scale, op, ": either size or scale_factor should be defined");
  SL_CHECK(!(has_size && o.recompute_scale_factor.value_or(false)), op,
           ": recompute_scale_factor is not meaningful with an explicit size");
  for (int64_t d = 2; d < input.dim(); ++d) {
    SL_CHECK_SHAPE(input.size(d) > 0, op, ": expected non-empty spatial dims, got input ",
                   shape_str(input.sizes()));
  }
  std::vector<int64_t> out(static_cast<size_t>(dims));
  std::vector<double> scale(static_cast<size_t>(dims), 0.0);
  if (has_size) {
    SL_CHECK(o.size.size() == 1 || static_cast<int64_t>(o.size.size()) == dims, op,
             ": size must hold one value or one per spatial dim (", dims, "), got ",
             shape_str(o.size), " for input ", shape_str(input.sizes()));
    out = per_dim(o.size, dims);
    for (int64_t v : out) {
      SL_CHECK(v > 0, op, ": size must be positive, got ", shape_str(o.size));
    }
  } else {
    SL_CHECK(o.scale_factor.size() == 1 || static_cast<int64_t>(o.scale_factor.size()) == dims, op,
             ": scale_factor must hold one value or one per spatial dim (", dims, "), got ",
             list_str(o.scale_factor), " for input ", shape_str(input.sizes()));
    scale = per_dim(o.scale_factor, dims);
    for (size_t d = 0; d < scale.size(); ++d) {
      SL_CHECK(std::isfinite(scale[d]) && scale[d] > 0, op,
               ": scale_factor must be positive and finite, got ", list_str(o.scale_factor));
      const double in = static_cast<double>(input.size(static_cast<int64_t>(d) + 2));
      const double n = std::floor(in * scale[d]);  // PyTorch: the product truncated
      SL_CHECK_SHAPE(n >= 1 && n < 9.0e15, op, ": output size floor(", in, " * ", scale[d],
                     ") = ", n, " must be at least 1 (and representable), for input ",
                     shape_str(input.sizes()));
      out[d] = static_cast<int64_t>(n);
    }
    // with recompute_scale_factor the kernels use the size ratio, as PyTorch's (C++) recompute
    if (o.recompute_scale_factor.value_or(false)) std::fill(scale.begin(), scale.end(), 0.0);
  }
  Resolved r;
  r.mode = interpolating ? (mode == "bicubic" ? UpsampleMode::cubic : UpsampleMode::linear)
                         : UpsampleMode::nearest;
  if (o.antialias) r.mode = UpsampleMode::antialias;
  r.area = mode == "area";
  r.g.exact = mode == "nearest-exact";
  r.g.cubic = mode == "bicubic";
  r.g.align_corners = o.align_corners.value_or(false);
  r.g.out_w = out.back();
  r.g.scale_w = scale.back();
  if (dims >= 2) {
    r.g.out_h = out[dims - 2];
    r.g.scale_h = scale[dims - 2];
  }
  if (dims == 3) {
    r.g.out_d = out[0];
    r.g.scale_d = scale[0];
  }
  if (o.antialias) {
    r.backward_name = r.g.cubic ? "UpsampleBicubic2DAaBackward" : "UpsampleBilinear2DAaBackward";
  } else if (mode == "bicubic") {
    r.backward_name = "UpsampleBicubic2DBackward";
  } else if (mode == "trilinear") {
    r.backward_name = "UpsampleTrilinear3DBackward";
  } else if (interpolating) {
    r.backward_name = dims == 1 ? "UpsampleLinear1DBackward" : "UpsampleBilinear2DBackward";
  } else if (r.g.exact) {
    r.backward_name = dims == 1   ? "UpsampleNearestExact1DBackward"
                      : dims == 2 ? "UpsampleNearestExact2DBackward"
                                  : "UpsampleNearestExact3DBackward";
  } else {
    r.backward_name = dims == 1   ? "UpsampleNearest1DBackward"
                      : dims == 2 ? "UpsampleNearest2DBackward"
                                  : "UpsampleNearest3DBackward";
  }
  return r;
}

bool is_16bit(DType t) {
  return t == DType::f16 || t == DType::bf16;
}

/// "area" on a 5-d input: PyTorch's adaptive_avg_pool3d to (Do, Ho, Wo). An adaptive window is the
/// product of one window per dim, so its mean is the mean over D of the means over (H, W): two
/// adaptive_avg_pool2d passes, the first over (H, W) of [N, C * D, H, W], the second over D of
/// [N, C, D, Ho * Wo] (its windows along the Ho * Wo dim are single elements, divided by 1).
/// PyTorch sums the whole window before dividing once, so values may differ in the last bits.
/// 16-bit inputs (on any device) are resampled in float32 and rounded once: 16-bit passes would
/// round the (H, W) means before the mean over D.
Tensor area3d_forward(const Tensor& x, const UpsampleGeometry& g) {
  if (is_16bit(x.dtype())) return ops::cast(area3d_forward(ops::cast(x, DType::f32), g), x.dtype());
  const Shape& s = x.sizes();
  const int64_t N = s[0], C = s[1], D = s[2], H = s[3], W = s[4];
  if (x.numel() == 0) return ops::empty({N, C, g.out_d, g.out_h, g.out_w}, x.dtype(), x.device());
  const Tensor hw = ops::adaptive_avg_pool2d_forward(
      ops::view(ops::contiguous(x), {N, C * D, H, W}), {g.out_h, g.out_w});
  const Tensor d = ops::adaptive_avg_pool2d_forward(ops::view(hw, {N, C, D, g.out_h * g.out_w}),
                                                    {g.out_d, g.out_h * g.out_w});
  return ops::view(d, {N, C, g.out_d, g.out_h, g.out_w});
}

/// The gradient of area3d_forward w.r.t. an input of sizes s: the two passes' backward (in float32
/// for a 16-bit grad, rounded once, as the forward).
Tensor area3d_backward(const Tensor& grad, const Shape& s, const UpsampleGeometry& g) {
  if (is_16bit(grad.dtype())) {
    return ops::cast(area3d_backward(ops::cast(grad, DType::f32), s, g), grad.dtype());
  }
  const int64_t N = s[0], C = s[1], D = s[2], H = s[3], W = s[4];
  if (grad.numel() == 0) {
    Tensor gi = ops::empty(s, grad.dtype(), grad.device());
    ops::fill_(gi, 0);
    return gi;
  }
  const Tensor gd = ops::adaptive_avg_pool2d_backward(
      ops::view(ops::contiguous(grad), {N, C, g.out_d, g.out_h * g.out_w}),
      {N, C, D, g.out_h * g.out_w});
  const Tensor ghw = ops::adaptive_avg_pool2d_backward(ops::view(gd, {N, C * D, g.out_h, g.out_w}),
                                                       {N, C * D, H, W});
  return ops::view(ghw, s);
}

}  // namespace

Tensor interpolate(const Tensor& input, const InterpolateOptions& options) {
  const Resolved r = resolve(input, options);
  if (r.area) {
    // PyTorch's "area" is adaptive average pooling to the output size (its grad_fn names it too)
    if (input.dim() == 3) return adaptive_avg_pool1d(input, r.g.out_w);
    if (input.dim() == 4) return adaptive_avg_pool2d(input, {r.g.out_h, r.g.out_w});
    const Shape in_sizes = input.sizes();
    return detail::record_linear_pair(
        "AdaptiveAvgPool3DBackward", "AdaptiveAvgPool3DBackwardBackward", input,
        [g = r.g](const Tensor& t) { return area3d_forward(t, g); },
        [in_sizes, g = r.g](const Tensor& t) { return area3d_backward(t, in_sizes, g); });
  }
  // every mode is linear in the input: the backward is the adjoint, recorded as a pair so that
  // create_graph can differentiate it again (Note [Double backward] in autograd/engine.cpp)
  const Shape in_sizes = input.sizes();
  return detail::record_linear_pair(
      r.backward_name, "UpsampleBackwardBackward", input,
      [g = r.g, mode = r.mode](const Tensor& t) { return ops::upsample_forward(t, g, mode); },
      [in_sizes, g = r.g, mode = r.mode](const Tensor& t) {
        return ops::upsample_backward(t, in_sizes, g, mode);
      });
}

}  // namespace sl
