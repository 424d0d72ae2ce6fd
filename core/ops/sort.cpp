#include "core/ops/sort.h"

#include "core/ops/copy.h"
#include "core/ops/shape.h"
#include "core/ops/view.h"

namespace sl {

SL_DEFINE_KERNEL(sort_kernel, void(const Tensor& values, const Tensor& indices, const Tensor& in,
                                   bool descending));
SL_DEFINE_KERNEL(topk_kernel, void(const Tensor& values, const Tensor& indices, const Tensor& in,
                                   int64_t k, bool largest));

namespace ops {

std::pair<Tensor, Tensor> sort(const Tensor& t, int64_t dim, bool descending) {
  check_defined("sort", t);
  // bool sorts (false < true) as in PyTorch 1.13; topk refuses bool, as PyTorch's does
  int64_t d = wrap_dim(dim, t.dim(), "sort");
  DimSplit s = split_at_dim(t.sizes(), d);
  Shape s3{s.outer, s.n, s.inner};
  Tensor values = empty(s3, t.dtype(), t.device());
  Tensor indices = empty(s3, DType::i64, t.device());
  if (values.numel() > 0) {
    sort_kernel(t.device().kind, values, indices, view(contiguous(t), s3), descending);
  }
  return {view(values, t.sizes()), view(indices, t.sizes())};
}

std::pair<Tensor, Tensor> topk(const Tensor& t, int64_t k, int64_t dim, bool largest) {
  check_defined("topk", t);
  SL_CHECK_DTYPE(!is_bool(t.dtype()), "topk: not supported for bool tensors");
  int64_t d = wrap_dim(dim, t.dim(), "topk");
  DimSplit s = split_at_dim(t.sizes(), d);
  SL_CHECK_INDEX(k >= 0 && k <= s.n, "topk: k (", k, ") is out of range for dim ", dim, " of size ",
                 s.n, " (expected 0 <= k <= ", s.n, ")");
  // A 0-d t gives 0-d results, its one element and index 0, for k = 0 as for k = 1: PyTorch 1.13
  // copies the element whatever k (torch.topk(torch.tensor(3.), 0) is (tensor(3.), tensor(0))).
  if (t.dim() == 0) k = 1;
  Tensor values = empty({s.outer, k, s.inner}, t.dtype(), t.device());
  Tensor indices = empty({s.outer, k, s.inner}, DType::i64, t.device());
  if (values.numel() > 0) {
    topk_kernel(t.device().kind, values, indices, view(contiguous(t), {s.outer, s.n, s.inner}), k,
                largest);
  }
  Shape out_shape = t.sizes();
  if (t.dim() > 0) out_shape[static_cast<size_t>(d)] = k;
  return {view(values, out_shape), view(indices, out_shape)};
}

}  // namespace ops
}  // namespace sl
