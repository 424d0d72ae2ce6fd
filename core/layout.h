// The coalesced strided layout of elementwise operands (internal header), shared by the CPU
// loops (core/cpu/loops.h) and the CUDA elementwise kernels (core/cuda/loops.cuh).
//
// Device-neutral and Tensor-free: it names no Tensor type (make_strided_layout takes any type
// with sizes(), strides(), element_size() and data_ptr()), so device code may include it too.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace sl {

/// Most dims an elementwise layout takes (after dropping size-1 dims).
inline constexpr int kMaxLayoutDims = 25;

/// Operands of an elementwise loop: all have the same (coalesced) sizes; dim 0 innermost;
/// strides in bytes (0 for broadcast dims). Operand 0 is the output.
template <int N>
struct StridedLayout {
  int ndim = 1;
  int64_t numel = 0;
  int64_t sizes[kMaxLayoutDims];
  int64_t strides[N][kMaxLayoutDims];  // [operand][dim]
  char* base[N];
};

/// The coalesced layout of operands that all have ops[0]'s sizes (inputs already expanded, so
/// broadcast dims have stride 0): size-1 dims dropped, dims contiguous for every operand merged,
/// innermost first; one dim of size 1 for a one-element tensor. Throws ShapeError
/// "<who>: D dims exceed the supported 25" for more dims than kMaxLayoutDims.
template <int N, class TensorT>
StridedLayout<N> make_strided_layout(const std::array<const TensorT*, N>& ops, const char* who) {
  StridedLayout<N> L;
  const auto& sizes = ops[0]->sizes();
  SL_CHECK_SHAPE(static_cast<int>(sizes.size()) <= kMaxLayoutDims, who, ": ", sizes.size(),
                 " dims exceed the supported ", kMaxLayoutDims);
  L.numel = 1;
  for (int64_t s : sizes) L.numel *= s;
  for (int k = 0; k < N; ++k) L.base[k] = static_cast<char*>(ops[k]->data_ptr());
  // innermost first, skipping size-1 dims
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
  // merge dim d into the previous kept dim when contiguous with it for every operand
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

}  // namespace sl
