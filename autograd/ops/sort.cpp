// Differentiable sort and top-k with their backward beside them: the gradient of the values is
// scattered back to the positions the indices name.
#include "autograd/ops/sort.h"

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/index.h"
#include "core/ops/copy.h"
#include "core/ops/index.h"
#include "core/ops/sort.h"

namespace sl {

namespace {
/// Records `values` = x at `indices` along dim: the backward scatters into zeros.
void record_selection(const char* name, const Tensor& x, Tensor& values, const Tensor& indices,
                      int64_t dim) {
  if (!needs_grad(x)) return;
  Shape s = x.sizes();
  SavedTensor si(indices);
  record(
      name, {x}, {&values},
      [name, s, si, dim](const BackwardCtx& c) -> variable_list {
        const Tensor& g = c.grad();
        Tensor z = ops::empty(s, g.dtype(), g.device());
        ops::fill_(z, 0);
        // the recorded scatter under create_graph (Note [Double backward]): its gradient is gather
        Tensor idx = si.unpack(name);
        return {GradMode::is_enabled() ? scatter(z, dim, idx, g) : ops::scatter(z, dim, idx, g)};
      },
      DoubleBackward::supported);
}
}  // namespace

std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  auto [values, indices] = ops::sort(x, dim, descending);
  record_selection("SortBackward", x, values, indices, dim);
  return {values, indices};
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  return ops::sort(x, dim, descending).second;
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest,
                               bool /*sorted*/) {
  auto [values, indices] = ops::topk(x, k, dim, largest);
  record_selection("TopkBackward", x, values, indices, dim);
  return {values, indices};
}

}  // namespace sl
