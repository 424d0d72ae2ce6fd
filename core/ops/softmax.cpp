#include "core/ops/softmax.h"

#include "core/ops/copy.h"
#include "core/ops/shape.h"
#include "core/ops/view.h"

namespace sl {

SL_DEFINE_KERNEL(softmax_kernel, void(const Tensor& out, const Tensor& in, bool log));
SL_DEFINE_KERNEL(softmax_backward_kernel,
                 void(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, bool log));

namespace ops {

Tensor softmax(const Tensor& t, int64_t dim, bool log, std::optional<DType> dtype) {
  const char* name = log ? "log_softmax" : "softmax";
  check_defined(name, t);
  Tensor x = dtype ? cast(t, *dtype) : t;
  SL_CHECK_DTYPE(is_floating(x.dtype()), name, ": expected a floating dtype, got ",
                 dtype_name(x.dtype()));
  int64_t d = wrap_dim(dim, t.dim(), name);
  DimSplit s = split_at_dim(t.sizes(), d);
  Tensor out = empty({s.outer, s.n, s.inner}, x.dtype(), x.device());
  if (out.numel() > 0) {
    softmax_kernel(x.device().kind, out, view(contiguous(x), {s.outer, s.n, s.inner}), log);
  }
  return view(out, t.sizes());
}

Tensor softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, bool log) {
  const char* name = log ? "log_softmax_backward" : "softmax_backward";
  check_defined(name, g, "gradient");
  check_defined(name, y, "output");
  check_same_device(name, {&g, &y});
  SL_CHECK_SHAPE(g.sizes() == y.sizes(), name, ": gradient of shape ", shape_str(g.sizes()),
                 " does not match the output's shape ", shape_str(y.sizes()));
  SL_CHECK_DTYPE(is_floating(y.dtype()), name, ": expected a floating dtype, got ",
                 dtype_name(y.dtype()));
  int64_t d = wrap_dim(dim, y.dim(), name);
  DimSplit s = split_at_dim(y.sizes(), d);
  Shape s3{s.outer, s.n, s.inner};
  Tensor gi = empty(s3, y.dtype(), y.device());
  if (gi.numel() > 0) {
    softmax_backward_kernel(y.device().kind, gi, view(contiguous(cast(g, y.dtype())), s3),
                            view(contiguous(y), s3), log);
  }
  return view(gi, y.sizes());
}

}  // namespace ops
}  // namespace sl
