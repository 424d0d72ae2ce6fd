// CUDA glue of the upsample family: its kernels in upsample.cu and upsample_cubic.cu.
#include "core/ops/upsample.h"
#include "core/cuda/kernels_upsample.h"
#include "core/cuda/runtime.h"

namespace sl::cuda {
namespace {

/// in_planes: [P, H, W], or [P, D, H, W] for trilinear and 5-d nearest.
UpsampleGeom geom(const Tensor& in_planes, const UpsampleGeometry& g) {
  const bool vol = in_planes.dim() == 4;
  const int64_t D = vol ? in_planes.size(1) : 1;
  return UpsampleGeom{in_planes.size(0),
                      D,
                      in_planes.size(-2),
                      in_planes.size(-1),
                      vol ? g.out_d : 1,
                      g.out_h,
                      g.out_w,
                      g.scale_d,
                      g.scale_h,
                      g.scale_w,
                      g.align_corners,
                      g.exact,
                      g.cubic};
}

/// The registered kernel of a mode: `launch` (launch_upsample_forward or
/// launch_upsample_cubic_forward) with its mode argument.
template <auto launch, auto mode>
void forward(const Tensor& out, const Tensor& input, const UpsampleGeometry& g) {
  DeviceGuard dg(input.device());
  launch(input.dtype(), mode, out.data_ptr(), input.data_ptr(), geom(input, g),
         compute_stream(input.device()));
}

/// The backward of forward<launch, mode>: launch_upsample_backward or
/// launch_upsample_cubic_backward.
template <auto launch, auto mode>
void backward(const Tensor& grad_input, const Tensor& grad_out, const UpsampleGeometry& g) {
  DeviceGuard dg(grad_out.device());
  launch(grad_out.dtype(), mode, grad_input.data_ptr(), grad_out.data_ptr(), geom(grad_input, g),
         compute_stream(grad_out.device()));
}

constexpr auto kFwd = &launch_upsample_forward;
constexpr auto kBwd = &launch_upsample_backward;
constexpr auto kCubicFwd = &launch_upsample_cubic_forward;
constexpr auto kCubicBwd = &launch_upsample_cubic_backward;

SL_REGISTER_KERNEL(upsample_nearest_forward_kernel, DeviceKind::cuda,
                   (&forward<kFwd, UpsampleRule::nearest>));
SL_REGISTER_KERNEL(upsample_nearest_backward_kernel, DeviceKind::cuda,
                   (&backward<kBwd, UpsampleRule::nearest>));
SL_REGISTER_KERNEL(upsample_linear_forward_kernel, DeviceKind::cuda,
                   (&forward<kFwd, UpsampleRule::linear>));
SL_REGISTER_KERNEL(upsample_linear_backward_kernel, DeviceKind::cuda,
                   (&backward<kBwd, UpsampleRule::linear>));
SL_REGISTER_KERNEL(upsample_trilinear_forward_kernel, DeviceKind::cuda,
                   (&forward<kFwd, UpsampleRule::trilinear>));
SL_REGISTER_KERNEL(upsample_trilinear_backward_kernel, DeviceKind::cuda,
                   (&backward<kBwd, UpsampleRule::trilinear>));
// the cubic launches' mode argument: antialias
SL_REGISTER_KERNEL(upsample_cubic_forward_kernel, DeviceKind::cuda, (&forward<kCubicFwd, false>));
SL_REGISTER_KERNEL(upsample_cubic_backward_kernel, DeviceKind::cuda, (&backward<kCubicBwd, false>));
SL_REGISTER_KERNEL(upsample_aa_forward_kernel, DeviceKind::cuda, (&forward<kCubicFwd, true>));
SL_REGISTER_KERNEL(upsample_aa_backward_kernel, DeviceKind::cuda, (&backward<kCubicBwd, true>));

}  // namespace
}  // namespace sl::cuda
