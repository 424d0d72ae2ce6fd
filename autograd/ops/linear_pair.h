// Recording a linear map whose backward is its adjoint (a pool, an upsample), so that the pair is
// closed under differentiation. Internal (not installed).
#pragma once

#include "autograd/function.h"
#include "autograd/grad_mode.h"

namespace sl::detail {

/// Records out = fwd(x) for a linear map fwd with adjoint adj (both callable as
/// Tensor(const Tensor&), adj taking tensors of out's shape to x's). Its gradient is adj(g); under
/// create_graph (Note [Double backward] in autograd/engine.cpp) adj is itself recorded, as
/// adjoint_name, with gradient fwd, so any order of derivative works. With grad mode off the
/// backward calls adj alone, as an unrecorded kernel.
template <class Fwd, class Adj>
Tensor record_linear_pair(const char* name, const char* adjoint_name, const Tensor& x, Fwd fwd,
                          Adj adj) {
  Tensor out = fwd(x);
  if (needs_grad(x)) {
    record(
        name, {x}, {&out},
        [name, adjoint_name, fwd, adj](const BackwardCtx& c) -> variable_list {
          if (!GradMode::is_enabled()) return {adj(c.grad())};
          return {record_linear_pair(adjoint_name, name, c.grad(), adj, fwd)};
        },
        DoubleBackward::supported);
  }
  return out;
}

}  // namespace sl::detail
