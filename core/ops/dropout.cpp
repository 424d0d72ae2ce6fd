#include "core/ops/dropout.h"

#include <utility>

#include "core/ops/copy.h"

namespace sl {

SL_DEFINE_KERNEL(dropout_forward_kernel,
                 void(const Tensor& out, const Tensor& mask, const Tensor& input, double p,
                      double scale, uint64_t seed, uint64_t offset));
SL_DEFINE_KERNEL(dropout_backward_kernel, void(const Tensor& grad_input, const Tensor& grad_out,
                                               const Tensor& mask, double scale));

namespace ops {

void check_dropout_p(const char* op, double p) {
  SL_CHECK(p >= 0.0 && p <= 1.0, op, ": dropout probability has to be between 0 and 1, but got ",
           p);
}

std::pair<Tensor, Tensor> dropout_forward(const Tensor& input, double p, uint64_t seed,
                                          uint64_t offset) {
  check_defined("dropout", input);
  SL_CHECK_DTYPE(is_floating(input.dtype()), "dropout: expected a floating input, got ",
                 dtype_name(input.dtype()));
  Tensor x = contiguous(input);
  Tensor out = empty_like(x);
  Tensor mask = empty(x.sizes(), DType::b8, x.device());
  if (x.numel() > 0) {
    dropout_forward_kernel(x.device().kind, out, mask, x, p, 1.0 / (1.0 - p), seed, offset);
  }
  return {out, mask};
}

Tensor dropout_backward(const Tensor& grad_out, const Tensor& mask, double p) {
  Tensor g = contiguous(grad_out);
  Tensor gi = empty_like(g);
  if (g.numel() > 0) dropout_backward_kernel(g.device().kind, gi, g, mask, 1.0 / (1.0 - p));
  return gi;
}

}  // namespace ops
}  // namespace sl
