// The interface between the CUDA glue (upsample.cpp) and the kernels (upsample.cu) of the upsample
// family: pointers, sizes and scalars only (Note [CUDA glue and kernels]). Element types:
// float32, float64, float16, bfloat16 (16-bit computed in float). Planes are contiguous
// [P, H, W] in and [P, Ho, Wo] out; index rules: Note [Upsample source index].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace sl::cuda {

/// The fields of sl::UpsampleGeometry (core/ops/upsample.h) with the input plane's sizes.
struct UpsampleGeom {
  int64_t P, H, W, out_h, out_w;
  double scale_h, scale_w;
  bool align_corners;
  bool exact;
};

/// One thread per output element.
void launch_upsample_forward(DType dt, bool linear, void* out, const void* x, const UpsampleGeom& g,
                             cudaStream_t s);
/// grad_in [P, H, W] (overwritten): one thread per input element gathers, in ascending output
/// order, the outputs that read it (Note [Upsample backward order]): no atomics, the same bits on
/// every run.
void launch_upsample_backward(DType dt, bool linear, void* grad_in, const void* grad_out,
                              const UpsampleGeom& g, cudaStream_t s);

}  // namespace sl::cuda
