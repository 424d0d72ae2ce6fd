// CUDA glue of the sort family (a bitonic network, core/cuda/sort.cu).
#include "core/ops/sort.h"
#include "core/cuda/kernels_core.h"
#include "core/cuda/runtime.h"

namespace sl::cuda {
namespace {

void sort_cuda(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending) {
  SL_ASSERT(in.dim() == 3 && in.is_contiguous() && values.is_contiguous() &&
            indices.is_contiguous());
  DeviceGuard g(in.device());
  launch_sort(in.dtype(), values.data_ptr(), static_cast<int64_t*>(indices.data_ptr()),
              in.data_ptr(), in.size(0), in.size(1), in.size(2), in.size(1), descending,
              compute_stream(in.device()));
}

void topk_cuda(const Tensor& values, const Tensor& indices, const Tensor& in, int64_t k,
               bool largest) {
  SL_ASSERT(in.dim() == 3 && in.is_contiguous() && values.is_contiguous() &&
            indices.is_contiguous() && k >= 0 && k <= in.size(1));
  DeviceGuard g(in.device());
  launch_sort(in.dtype(), values.data_ptr(), static_cast<int64_t*>(indices.data_ptr()),
              in.data_ptr(), in.size(0), in.size(1), in.size(2), k, largest,
              compute_stream(in.device()));
}

SL_REGISTER_KERNEL(sort_kernel, DeviceKind::cuda, &sort_cuda);
SL_REGISTER_KERNEL(topk_kernel, DeviceKind::cuda, &topk_cuda);

}  // namespace
}  // namespace sl::cuda
