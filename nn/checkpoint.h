// Activation checkpointing: run a function (or a module) without keeping its intermediate
// activations, and recompute them during backward, trading compute for memory.
//
// Note [Checkpoint recompute]
// Forward runs under NoGradGuard, so the function's graph and saved tensors are dropped at once;
// one CheckpointBackward node is recorded with edges to the inputs and to the listed parameters.
// Its backward (1) restores the default generator to its state before the forward, so dropout
// draws the same masks, (2) reruns the function with grad mode on, on detached copies of the
// inputs, (3) backpropagates the incoming gradient through that fresh graph with sl::grad
// (capture mode: nothing is accumulated there) and returns the gradients of inputs and
// parameters, which the outer backward then accumulates as for any op, firing leaf hooks (DDP
// and ZeRO see nothing unusual), and (4) puts the generator back where it was. The recompute
// runs under the autocast state (core/amp.h) the forward saw, so a forward in a bf16 scope is
// recomputed in bf16 even when backward runs outside the scope, as PyTorch's checkpoint does.
// Limits, as in PyTorch: a function that changes state as it runs (BatchNorm's running
// statistics in training mode) changes it again during the recompute; random draws from a
// generator other than the default one are not replayed.
#pragma once

#include <functional>
#include <memory>

#include "nn/module.h"

namespace sl::nn {

/// fn(inputs) computed as Note [Checkpoint recompute] describes. `params`: tensors fn reads that
/// need gradients but are not inputs (a module's parameters). fn must be deterministic apart
/// from the default generator and return one tensor. Without grad mode or without any input or
/// parameter requiring grad, this is just fn(inputs).
Tensor checkpoint(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                  const TensorList& params = {});

/// Wraps a module so its forward(x) is checkpointed. The wrapper registers the wrapped module's
/// own parameters, buffers and children under their names, so every dotted name (and so the
/// state dict) is unchanged: swap a layer for its wrapped self with
///   parent.replace_module("layer", std::make_shared<nn::CheckpointWrapper>(layer));
/// train()/eval() reach the wrapped module. Throws ValueError for a null module.
class CheckpointWrapper : public Module {
 public:
  explicit CheckpointWrapper(std::shared_ptr<Module> inner);
  Tensor forward(const Tensor& x) override;
  void train(bool on = true) override;
  std::string extra_repr() const override { return inner_->extra_repr(); }
  const std::shared_ptr<Module>& wrapped() const { return inner_; }

 private:
  std::shared_ptr<Module> inner_;
};

}  // namespace sl::nn
