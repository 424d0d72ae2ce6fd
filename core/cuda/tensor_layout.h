// Builds the StridedLayout of CUDA elementwise kernels from Tensors (internal header; host glue
// only). Same coalescing as the CPU loops: size-1 dims dropped, dims contiguous for every operand
// merged, innermost first.
#pragma once

#include <array>

#include "core/cuda/kernels.h"
#include "core/tensor.h"

namespace sl::cuda {

/// Operands all have ops[0]'s sizes (inputs already expanded). Throws ShapeError beyond
/// kMaxDims dims.
template <int N>
StridedLayout<N> make_layout(const std::array<const Tensor*, N>& ops) {
  StridedLayout<N> L;
  const Shape& sizes = ops[0]->sizes();
  SL_CHECK_SHAPE(static_cast<int>(sizes.size()) <= kMaxDims, "cuda kernel: ", sizes.size(),
                 " dims exceed the supported ", kMaxDims);
  L.numel = shape_numel(sizes);
  for (int k = 0; k < N; ++k) L.base[k] = static_cast<char*>(ops[k]->data_ptr());
  int nd = 0;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    int64_t s = sizes[static_cast<size_t>(d)];
    if (s == 1) continue;
    L.sizes[nd] = s;
    for (int k = 0; k < N; ++k) {
      L.strides[k][nd] =
          ops[k]->strides()[static_cast<size_t>(d)] * static_cast<int64_t>(ops[k]->element_size());
    }
    ++nd;
  }
  int out = 0;
  for (int d = 0; d < nd; ++d) {
    if (out > 0) {
      bool mergeable = true;
      for (int k = 0; k < N && mergeable; ++k) {
        mergeable = L.strides[k][d] == L.strides[k][out - 1] * L.sizes[out - 1];
      }
      if (mergeable) {
        L.sizes[out - 1] *= L.sizes[d];
        continue;
      }
    }
    L.sizes[out] = L.sizes[d];
    for (int k = 0; k < N; ++k) L.strides[k][out] = L.strides[k][d];
    ++out;
  }
  if (out == 0) {  // one element
    L.sizes[0] = 1;
    for (int k = 0; k < N; ++k) L.strides[k][0] = 0;
    out = 1;
  }
  L.ndim = out;
  return L;
}

/// The scalar as kernels see it.
inline DevScalar dev_scalar(const Scalar& s) {
  return DevScalar{s.to_double(), s.to_int(), s.to_bool()};
}

}  // namespace sl::cuda
