// CUDA kernels of the elementwise family: comparisons and logical ops (bool results).
#include "core/cuda/binary.cuh"

namespace sl::cuda {
void launch_binary_compare(B op, DType dt, DevScalar alpha, const StridedLayout<3>& L,
                           cudaStream_t s) {
  launch_binary_range<B::eq, B::logical_xor>(op, dt, alpha, L, s);
}
}  // namespace sl::cuda
