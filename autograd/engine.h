// The backward engine.
#pragma once

#include "autograd/node.h"

namespace sl {

/// Backpropagates from `roots` with the given gradients (one per root, same shapes), accumulating
/// into the .grad() of leaves that require grad. Runs on the calling thread with grad mode off.
/// Throws AutogradError when a root needs no gradient, a gradient has the wrong shape, or the
/// graph was already freed.
void run_backward(const variable_list& roots, const variable_list& grad_roots, bool retain_graph);

/// Gradients of `outputs` w.r.t. `inputs` (like torch.autograd.grad), without touching any
/// .grad(). An input that the outputs do not depend on gets an undefined tensor.
variable_list grad(const variable_list& outputs, const variable_list& inputs,
                   const variable_list& grad_outputs = {}, bool retain_graph = false);

}  // namespace sl
