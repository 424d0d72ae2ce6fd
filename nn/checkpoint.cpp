#include "nn/checkpoint.h"

#include "autograd/engine.h"
#include "autograd/function.h"
#include "core/amp.h"
#include "core/random.h"

namespace sl::nn {

Tensor checkpoint(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                  const TensorList& params) {
  SL_CHECK(fn != nullptr, "checkpoint: the function is empty");
  TensorList all = inputs;
  all.insert(all.end(), params.begin(), params.end());
  if (!needs_grad_list(all)) return fn(inputs);

  GeneratorState rng_before = default_generator().state();
  const AutocastState amp_before = autocast_state();
  Tensor out;
  {
    NoGradGuard no_grad;
    out = fn(inputs);
  }
  SL_CHECK(out.defined(), "checkpoint: the function returned an undefined tensor");
  SL_CHECK(out.is_floating_point(), "checkpoint: the function must return a floating tensor, got ",
           dtype_name(out.dtype()));
  // out may alias an input (identity); give the node a fresh tensor.
  for (const auto& in : inputs) {
    if (in.defined() && out.is_same_storage(in)) {
      NoGradGuard no_grad;
      out = out.clone();
      break;
    }
  }

  std::vector<SavedTensor> saved;
  std::vector<bool> input_needs;
  for (const auto& in : inputs) {
    saved.emplace_back(in.defined() ? in : Tensor());
    input_needs.push_back(in.defined() && in.requires_grad());
  }
  size_t n_in = inputs.size();
  record("CheckpointBackward", all, {&out},
         [fn, saved, input_needs, params, n_in, rng_before,
          amp_before](const BackwardCtx& c) -> variable_list {
           TensorList det;
           variable_list wrt;
           std::vector<size_t> slot;  // position in the node's inputs of each wrt entry
           for (size_t i = 0; i < n_in; ++i) {
             Tensor t = saved[i].unpack("CheckpointBackward");
             if (t.defined()) {
               t = t.detach();
               if (input_needs[i] && c.needs(i)) {
                 t.requires_grad_(true);
                 wrt.push_back(t);
                 slot.push_back(i);
               }
             }
             det.push_back(t);
           }
           for (size_t j = 0; j < params.size(); ++j) {
             if (params[j].defined() && params[j].requires_grad() && c.needs(n_in + j)) {
               wrt.push_back(params[j]);
               slot.push_back(n_in + j);
             }
           }
           variable_list result(n_in + params.size());
           if (wrt.empty()) return result;
           Generator& gen = default_generator();
           GeneratorState now = gen.state();
           gen.set_state(rng_before);
           Tensor y;
           try {
             EnableGradGuard enable;
             AutocastStateGuard amp(amp_before);  // the dtypes the forward computed in
             y = fn(det);
           } catch (...) {
             gen.set_state(now);
             throw;
           }
           gen.set_state(now);
           SL_CHECK_AUTOGRAD(y.defined() && y.sizes() == c.grad().sizes(),
                             "CheckpointBackward: the recomputed output has a different shape; "
                             "the checkpointed function must be deterministic");
           if (!y.requires_grad()) return result;
           if (y.is_leaf()) {
             // fn returned one of the tensors itself: its gradient is the incoming one. (sl::grad
             // cannot capture at a root that is itself a leaf with no graph holding its node.)
             for (size_t k = 0; k < wrt.size(); ++k) {
               if (wrt[k].is_same(y)) result[slot[k]] = c.grad();
             }
             return result;
           }
           variable_list g = grad({y}, wrt, {c.grad()});
           for (size_t k = 0; k < wrt.size(); ++k) result[slot[k]] = g[k];
           return result;
         });
  return out;
}

CheckpointWrapper::CheckpointWrapper(std::shared_ptr<Module> inner)
    : Module(inner ? inner->type_name() : "CheckpointWrapper"), inner_(std::move(inner)) {
  SL_CHECK(inner_ != nullptr, "CheckpointWrapper: the wrapped module is null");
  for (const auto& [name, p] : inner_->named_parameters(/*recurse=*/false)) {
    register_parameter(name, p, p.requires_grad());
  }
  StateDict own = inner_->state_dict();
  for (const auto& [name, b] : inner_->named_buffers(/*recurse=*/false)) {
    register_buffer(name, b, /*persistent=*/own.contains(name));
  }
  for (const auto& [name, c] : inner_->named_children()) register_module(name, c);
  training_ = inner_->is_training();
}

Tensor CheckpointWrapper::forward(const Tensor& x) {
  Module* m = inner_.get();
  return checkpoint([m](const TensorList& in) { return m->forward(in[0]); }, {x},
                    inner_->parameters());
}

void CheckpointWrapper::train(bool on) {
  Module::train(on);
  inner_->train(on);
}

}  // namespace sl::nn
