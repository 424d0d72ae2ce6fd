// CUDA kernels of the elementwise family: arithmetic binary ops (add .. remainder).
#include "core/cuda/binary.cuh"

namespace sl::cuda {
void launch_binary_arith(B op, DType dt, DevScalar alpha, const StridedLayout<3>& L,
                         cudaStream_t s) {
  launch_binary_range<B::add, B::remainder>(op, dt, alpha, L, s);
}
}  // namespace sl::cuda
