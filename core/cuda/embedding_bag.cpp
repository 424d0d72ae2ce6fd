// CUDA glue of the embedding_bag family (kernel in embedding_bag.cu).
#include "core/ops/embedding_bag.h"
#include "core/cuda/kernels_embedding.h"
#include "core/cuda/runtime.h"

namespace sl::cuda {
namespace {

void embedding_bag_max_cuda(const Tensor& out, const Tensor& arg, const Tensor& rows,
                            const Tensor& bounds, const Tensor& index, int64_t skip) {
  DeviceGuard g(rows.device());
  launch_embedding_bag_max(rows.dtype(), out.data_ptr(), static_cast<int64_t*>(arg.data_ptr()),
                           rows.data_ptr(), static_cast<const int64_t*>(bounds.data_ptr()),
                           static_cast<const int64_t*>(index.data_ptr()), skip, out.size(0),
                           out.size(1), rows.size(0), compute_stream(rows.device()));
}

SL_REGISTER_KERNEL(embedding_bag_max_kernel, DeviceKind::cuda, &embedding_bag_max_cuda);

}  // namespace
}  // namespace sl::cuda
