// CUDA glue of the shape family: flip is a strided copy from a view with negated strides, as on
// the CPU (core/cpu/shape.cpp); the CUDA copy kernels take signed byte strides.
#include "core/ops/shape.h"
#include "core/ops/copy.h"

namespace sl::cuda {
namespace {

void flip_cuda(const Tensor& out, const Tensor& in, const std::vector<bool>& flip_dim) {
  Shape strides = in.strides();
  int64_t offset = in.storage_offset();
  for (size_t d = 0; d < strides.size(); ++d) {
    if (!flip_dim[d] || in.sizes()[d] <= 1) continue;
    offset += (in.sizes()[d] - 1) * strides[d];
    strides[d] = -strides[d];
  }
  Tensor reversed(
      std::make_shared<TensorImpl>(in.storage(), in.sizes(), strides, offset, in.dtype()));
  copy_kernel(DeviceKind::cuda, out, reversed);
}

SL_REGISTER_KERNEL(flip_kernel, DeviceKind::cuda, &flip_cuda);

}  // namespace
}  // namespace sl::cuda
