// Builds the StridedLayout of CUDA elementwise kernels from Tensors (internal header; host glue
// only), with the CPU loops' coalescing: the kernels take core/layout.h's StridedLayout.
#pragma once

#include <array>

#include "core/cuda/kernels.h"
#include "core/layout.h"
#include "core/tensor.h"

namespace sl::cuda {

/// The coalesced layout (core/layout.h, as the CPU loops build it) of operands that all have
/// ops[0]'s sizes (inputs already expanded). Throws ShapeError beyond kMaxLayoutDims dims.
template <int N>
StridedLayout<N> make_layout(const std::array<const Tensor*, N>& ops) {
  return make_strided_layout<N, Tensor>(ops, "cuda kernel");
}

/// The scalar as kernels see it.
inline DevScalar dev_scalar(const Scalar& s) {
  return DevScalar{s.to_double(), s.to_int(), s.to_bool()};
}

}  // namespace sl::cuda
