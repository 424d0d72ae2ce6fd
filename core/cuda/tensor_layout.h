// Builds the StridedLayout of CUDA elementwise kernels from Tensors (internal header; host glue
// only), with the CPU loops' coalescing (core/layout.h). The kernels' StridedLayout (kernels.h)
// has the same members as core/layout.h's.
#pragma once

#include <array>

#include "core/cuda/kernels.h"
#include "core/layout.h"
#include "core/tensor.h"

namespace sl::cuda {

/// The coalesced layout (core/layout.h, as the CPU loops build it) of operands that all have
/// ops[0]'s sizes (inputs already expanded). Throws ShapeError beyond kMaxDims dims.
template <int N>
StridedLayout<N> make_layout(const std::array<const Tensor*, N>& ops) {
  static_assert(kMaxDims >= kMaxLayoutDims, "make_strided_layout fills kMaxLayoutDims dims");
  return make_strided_layout<N, Tensor, StridedLayout<N>>(ops, "cuda kernel");
}

/// The scalar as kernels see it.
inline DevScalar dev_scalar(const Scalar& s) {
  return DevScalar{s.to_double(), s.to_int(), s.to_bool()};
}

}  // namespace sl::cuda
