// CUDA kernels of the elementwise family: fused activation backward helpers, and
// launch_binary, which picks the file that holds an op.
#include "core/cuda/binary.cuh"

namespace sl::cuda {

void launch_binary_arith(B op, DType dt, DevScalar alpha, const StridedLayout<3>& L,
                         cudaStream_t s);
void launch_binary_compare(B op, DType dt, DevScalar alpha, const StridedLayout<3>& L,
                           cudaStream_t s);

void launch_binary(B op, DType dt, DevScalar alpha, const StridedLayout<3>& L, cudaStream_t s) {
  if (op <= B::remainder) return launch_binary_arith(op, dt, alpha, L, s);
  if (op <= B::logical_xor) return launch_binary_compare(op, dt, alpha, L, s);
  // the backward helpers accept floating dtypes only (the glue has checked)
  launch_binary_range<B::relu_backward, B::silu_backward>(op, dt, alpha, L, s);
}

}  // namespace sl::cuda
