// The backward engine.
#pragma once

#include "autograd/node.h"

namespace sl {

/// Backpropagates from `roots` with the given gradients (one per root, same shapes), accumulating
/// into the .grad() of leaves that require grad. Runs on the calling thread with grad mode off,
/// or, with create_graph, on and recording the gradients' own graph (Note [Double backward] in
/// engine.cpp; the graph is then kept whatever retain_graph says, as PyTorch's default).
/// Throws AutogradError when a root needs no gradient, a gradient has the wrong shape, or the
/// graph was already freed.
void run_backward(const variable_list& roots, const variable_list& grad_roots, bool retain_graph,
                  bool create_graph = false);

/// Gradients of `outputs` w.r.t. `inputs` (like torch.autograd.grad), without touching any
/// .grad(). An input that the outputs do not depend on gets an undefined tensor. With
/// create_graph the results can be differentiated again (gradient penalties, Hessian-vector
/// products; Note [Double backward]).
variable_list grad(const variable_list& outputs, const variable_list& inputs,
                   const variable_list& grad_outputs = {}, bool retain_graph = false,
                   bool create_graph = false);

}  // namespace sl
