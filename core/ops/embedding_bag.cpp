#include "core/ops/embedding_bag.h"

#include "core/ops/copy.h"

namespace sl {

SL_DEFINE_KERNEL(embedding_bag_max_kernel,
                 void(const Tensor& out, const Tensor& arg, const Tensor& rows,
                      const Tensor& bounds, const Tensor& index, int64_t skip));

namespace ops {

std::pair<Tensor, Tensor> embedding_bag_max(const Tensor& rows, const Tensor& bounds,
                                            const Tensor& index, int64_t skip) {
  const char* op = "embedding_bag";
  check_same_device(op, {&rows, &bounds, &index});
  SL_CHECK_SHAPE(rows.dim() == 2 && bounds.dim() == 1 && index.dim() == 1 &&
                     index.size(0) == rows.size(0) && bounds.size(0) >= 1,
                 op, ": max expects rows [L, D], bounds [B + 1] and index [L], got ",
                 shape_str(rows.sizes()), ", ", shape_str(bounds.sizes()), " and ",
                 shape_str(index.sizes()));
  SL_CHECK_DTYPE(bounds.dtype() == DType::i64 && index.dtype() == DType::i64, op,
                 ": max expects int64 bounds and index, got ", dtype_name(bounds.dtype()), " and ",
                 dtype_name(index.dtype()));
  SL_CHECK_DTYPE(is_floating(rows.dtype()), op, ": weight must be floating, got ",
                 dtype_name(rows.dtype()));
  const int64_t B = bounds.size(0) - 1, D = rows.size(1);
  Tensor out = empty({B, D}, rows.dtype(), rows.device());
  Tensor arg = empty({B, D}, DType::i64, rows.device());
  if (out.numel() > 0) {
    embedding_bag_max_kernel(rows.device().kind, out, arg, contiguous(rows), contiguous(bounds),
                             contiguous(index), skip);
  }
  return {out, arg};
}

}  // namespace ops
}  // namespace sl
