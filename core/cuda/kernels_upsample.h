// The interface between the CUDA glue (upsample.cpp) and the kernels (upsample.cu) of the upsample
// family: pointers, sizes and scalars only (Note [CUDA glue and kernels]). Element types:
// float32, float64, float16, bfloat16 (16-bit computed in float). Planes are contiguous
// [P, H, W] in and [P, Ho, Wo] out (trilinear: [P, D, H, W] and [P, Do, Ho, Wo]); index rules:
// Note [Upsample source index]. Nearest, linear and trilinear kernels are in upsample.cu, bicubic
// and antialias in upsample_cubic.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace sl::cuda {

/// The fields of sl::UpsampleGeometry (core/ops/upsample.h) with the input plane's sizes.
/// D and out_d are 1 except for trilinear.
struct UpsampleGeom {
  int64_t P, D, H, W, out_d, out_h, out_w;
  double scale_d, scale_h, scale_w;
  bool align_corners;
  bool exact;  ///< nearest-exact
  bool cubic;  ///< antialias: the cubic filter
};

/// The kernels of upsample.cu.
enum class UpsampleRule { nearest, linear, trilinear };

/// One thread per output element.
void launch_upsample_forward(DType dt, UpsampleRule rule, void* out, const void* x,
                             const UpsampleGeom& g, cudaStream_t s);
/// grad_in [P, (D,) H, W] (overwritten): one thread per input element gathers, in ascending
/// output order, the outputs that read it (Note [Upsample backward order]): no atomics, the same
/// bits on every run.
void launch_upsample_backward(DType dt, UpsampleRule rule, void* grad_in, const void* grad_out,
                              const UpsampleGeom& g, cudaStream_t s);
/// Bicubic, or with `antialias` the antialiased bilinear / bicubic (g.cubic): one thread per
/// output element.
void launch_upsample_cubic_forward(DType dt, bool antialias, void* out, const void* x,
                                   const UpsampleGeom& g, cudaStream_t s);
/// The gather backward of launch_upsample_cubic_forward, as launch_upsample_backward.
void launch_upsample_cubic_backward(DType dt, bool antialias, void* grad_in, const void* grad_out,
                                    const UpsampleGeom& g, cudaStream_t s);

}  // namespace sl::cuda
