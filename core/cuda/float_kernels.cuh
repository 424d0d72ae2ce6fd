// Helpers shared by the hand-written floating-point kernels (dropout, optim, rnn, softmax):
// `visit_float` maps a floating dtype to its device storage type, `grid_stride` is the
// grid-stride loop over a flat range. Internal header; device code only. Kept apart from
// loops.cuh and dev_types.cuh so that editing it recompiles only the files that use it.
#pragma once

#include <cstdint>

#include "core/cuda/dev_types.cuh"

namespace sl::cuda {

/// Calls f(DevTag<T>{}) with T the device storage type of the floating dtype dt (f32, f64, f16,
/// bf16). Throws DTypeError "<op>: expected a floating dtype, got <dt>" for any other dtype.
template <class F>
void visit_float(DType dt, const char* op, F&& f) {
  SL_CHECK_DTYPE(is_floating(dt), op, ": expected a floating dtype, got ", dtype_name(dt));
  visit_dev_dtype(dt, [&](auto tag) {
    if constexpr (is_float_v<typename decltype(tag)::type>) f(tag);
  });
}

/// Calls f(i) for every i in [0, n) that falls to this thread: i = its global id, then steps of
/// the grid's thread count. f returning early skips one index (the loop's `continue`).
template <class F>
__device__ __forceinline__ void grid_stride(int64_t n, F&& f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    f(i);
  }
}

}  // namespace sl::cuda
