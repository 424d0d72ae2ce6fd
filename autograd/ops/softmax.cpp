// Differentiable softmax / log_softmax with their backward beside them. The backward needs only
// the output y: softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g).
#include "autograd/ops/softmax.h"

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/activation_derivative.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "core/amp.h"
#include "core/ops/copy.h"
#include "core/ops/softmax.h"

namespace sl {

namespace {
Tensor softmax_impl(const Tensor& x_in, int64_t dim, bool log, std::optional<DType> dtype) {
  // autocast `fp32` policy (Note [Autocast] in core/amp.h), unless the caller chose a dtype
  const Tensor x = dtype ? x_in : autocast(x_in, AmpPolicy::fp32);
  const char* name = log ? "LogSoftmaxBackward" : "SoftmaxBackward";
  Tensor out = ops::softmax(x, dim, log, dtype);
  if (needs_grad(x)) {
    SavedTensor sy = SavedTensor::output(out);
    DType in_dtype = x.dtype();
    record(
        name, {x}, {&out},
        [sy, dim, log, name, in_dtype](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor y = sy.unpack(name);
          if (GradMode::is_enabled()) {  // create_graph: the formula above, differentiable
            Tensor gi = log ? sub(g, mul(exp(y), sum(g, {dim}, true)))
                            : detail::softmax_backward_ops(g, y, dim);
            return {to_dtype(gi, in_dtype)};
          }
          return {ops::cast(ops::softmax_backward(g, y, dim, log), in_dtype)};
        },
        DoubleBackward::supported);
  }
  return out;
}
}  // namespace

namespace detail {
Tensor softmax_backward_ops(const Tensor& g, const Tensor& y, int64_t dim) {
  return mul(y, sub(g, sum(mul(g, y), {dim}, true)));
}
}  // namespace detail

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_impl(x, dim, false, dtype);
}

Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_impl(x, dim, true, dtype);
}

Tensor Tensor::softmax(int64_t dim) const {
  return sl::softmax(*this, dim);
}
Tensor Tensor::log_softmax(int64_t dim) const {
  return sl::log_softmax(*this, dim);
}

}  // namespace sl
