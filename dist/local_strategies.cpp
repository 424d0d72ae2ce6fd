// The one-process strategies: single (the model and optimizer as they are) and dp
// (torch.nn.DataParallel's semantics over several devices of one process).
#include <exception>
#include <thread>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "core/amp.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/view.h"
#include "dist/strategy_impl.h"

namespace sl::dist {

namespace {

TensorList defined_grads(const std::vector<std::pair<std::string, Tensor>>& named) {
  TensorList gs;
  for (const auto& [n, p] : named) {
    if (p.grad().defined()) gs.push_back(p.grad());
  }
  return gs;
}

class SingleStrategy final : public Strategy {
 public:
  SingleStrategy(std::shared_ptr<nn::Module> model, optim::Optimizer& opt, StrategyOptions opts)
      : Strategy(StrategyKind::single, std::move(model), opt, std::move(opts),
                 make_single_group()) {}

 protected:
  TensorList owned_gradients() override { return defined_grads(named_params_); }
  void update_parameters(const std::vector<bool>&) override { opt_.step(); }
};

/// Concatenates per-replica outputs along dim 0 onto `dst` (differentiable: the gradient is
/// split back and moved to each replica's device).
Tensor gather_outputs(const TensorList& outs, Device dst) {
  SL_CHECK(!outs.empty(), "dp: no replica produced an output");
  Shape sizes = outs[0].sizes();
  SL_CHECK_SHAPE(!sizes.empty(),
                 "dp: replica outputs must have a batch dim to gather along, "
                 "got a 0-d tensor (return per-example values and reduce after the forward)");
  int64_t total = 0;
  for (const Tensor& o : outs) {
    SL_CHECK_SHAPE(o.dim() == outs[0].dim() && o.dtype() == outs[0].dtype(),
                   "dp: replica outputs differ in rank or dtype: ", shape_str(o.sizes()), " ",
                   dtype_name(o.dtype()), " vs ", shape_str(sizes), " ",
                   dtype_name(outs[0].dtype()));
    total += o.size(0);
  }
  sizes[0] = total;
  Tensor out = ops::empty(sizes, outs[0].dtype(), dst);
  std::vector<int64_t> starts;
  int64_t at = 0;
  {
    NoGradGuard ng;
    for (const Tensor& o : outs) {
      starts.push_back(at);
      ops::copy_(ops::narrow(out, 0, at, o.size(0)), o);
      at += o.size(0);
    }
  }
  if (needs_grad_list(outs)) {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    std::vector<Device> devs;
    for (size_t i = 0; i < outs.size(); ++i) {
      ranges.emplace_back(starts[i], outs[i].size(0));
      devs.push_back(outs[i].device());
    }
    record(
        "GatherBackward", outs, {&out},
        [ranges, devs](const BackwardCtx& c) -> variable_list {
          // create_graph (a gradient penalty through dp): the recorded narrow and device copy
          const bool graph = GradMode::is_enabled();
          variable_list gs;
          for (size_t i = 0; i < ranges.size(); ++i) {
            if (!c.needs(i)) {
              gs.emplace_back();
              continue;
            }
            const auto [start, length] = ranges[i];
            gs.push_back(
                graph ? to_device(c.grad(0).narrow(0, start, length).contiguous(), devs[i], true)
                      : ops::to_device(ops::contiguous(ops::narrow(c.grad(0), 0, start, length)),
                                       devs[i], true));
          }
          return gs;
        },
        DoubleBackward::supported);
  }
  return out;
}

class DataParallelStrategy final : public Strategy {
 public:
  DataParallelStrategy(std::shared_ptr<nn::Module> model, optim::Optimizer& opt,
                       StrategyOptions opts)
      : Strategy(StrategyKind::dp, std::move(model), opt, std::move(opts), make_single_group()) {
    Device home = named_params_.empty() ? kCPU : named_params_.front().second.device();
    devices_ = opts_.dp_devices;
    if (devices_.empty()) {
      SL_CHECK(opts_.dp_replicas >= 1, "dp: dp_replicas must be >= 1, got ", opts_.dp_replicas);
      SL_CHECK(home.index + opts_.dp_replicas <= kMaxDevicesPerKind, "dp: dp_replicas ",
               opts_.dp_replicas, " from ", home, " would need ", device_kind_name(home.kind), ":",
               home.index + opts_.dp_replicas - 1, ", past the last device index (",
               kMaxDevicesPerKind - 1, ")");
      for (int i = 0; i < opts_.dp_replicas; ++i) devices_.emplace_back(home.kind, home.index + i);
    }
    SL_CHECK_DEVICE(devices_.front() == home, "dp: the model is on ", home,
                    " but the first dp device is ", devices_.front());
    // Replicas run on threads of their own, one per device; two on one device would share its
    // per-device library handles (cuDNN's may not be used by two threads at once).
    for (size_t i = 1; i < devices_.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        SL_CHECK(devices_[i] != devices_[j], "dp: dp_devices lists ", devices_[i], " twice (at ", j,
                 " and ", i, "); each replica needs a device of its own");
      }
    }
    replicas_.push_back(model_);
    if (devices_.size() > 1) {
      SL_CHECK(static_cast<bool>(opts_.replica_factory),
               "dp: replica_factory is required to build the replicas (a function returning a "
               "new module of the model's type)");
    }
    auto master_names = model_->named_parameters();
    for (size_t i = 1; i < devices_.size(); ++i) {
      std::shared_ptr<nn::Module> r = opts_.replica_factory();
      SL_CHECK(r != nullptr, "dp: replica_factory returned null");
      r->to(devices_[i]);
      auto names = r->named_parameters();
      SL_CHECK(names.size() == master_names.size(), "dp: replica ", i, " has ", names.size(),
               " parameters, the model ", master_names.size());
      for (size_t j = 0; j < names.size(); ++j) {
        SL_CHECK(names[j].first == master_names[j].first &&
                     names[j].second.sizes() == master_names[j].second.sizes(),
                 "dp: replica ", i, " parameter ", j, " is '", names[j].first, "' ",
                 shape_str(names[j].second.sizes()), ", the model's is '", master_names[j].first,
                 "' ", shape_str(master_names[j].second.sizes()));
      }
      replicas_.push_back(std::move(r));
    }
  }

  Tensor forward(const TensorList& inputs, const ForwardFn& fn) override {
    if (replicas_.size() == 1) return fn(*model_, inputs);
    SL_CHECK(!inputs.empty() && inputs[0].defined() && inputs[0].dim() >= 1,
             "dp: the first input must have a batch dim to split");
    int64_t batch = inputs[0].size(0);
    int64_t k = std::min<int64_t>(static_cast<int64_t>(replicas_.size()), batch);
    sync_replicas(k);
    // torch.chunk's split: chunks of ceil(batch / k), the last smaller.
    int64_t chunk = (batch + k - 1) / k;
    std::vector<TensorList> shards(static_cast<size_t>(k));
    std::vector<int64_t> lens;
    for (int64_t r = 0; r * chunk < batch; ++r) lens.push_back(std::min(chunk, batch - r * chunk));
    k = static_cast<int64_t>(lens.size());
    for (const Tensor& x : inputs) {
      SL_CHECK_SHAPE(x.dim() >= 1 && x.size(0) == batch,
                     "dp: every input must have the batch "
                     "size ",
                     batch, " in dim 0, got ", shape_str(x.sizes()));
      int64_t at = 0;
      for (int64_t r = 0; r < k; ++r) {
        Tensor part = x.narrow(0, at, lens[static_cast<size_t>(r)]);
        shards[static_cast<size_t>(r)].push_back(part.to(devices_[static_cast<size_t>(r)]));
        at += lens[static_cast<size_t>(r)];
      }
    }
    TensorList outs(static_cast<size_t>(k));
    std::vector<std::exception_ptr> errors(static_cast<size_t>(k));
    // The replicas' threads run in the caller's grad mode and autocast scope (both per thread).
    bool grad_on = GradMode::is_enabled();
    const AutocastState amp = autocast_state();
    auto run = [&](int64_t r) {
      try {
        GradMode::set_enabled(grad_on);
        AutocastStateGuard amp_guard(amp);
        outs[static_cast<size_t>(r)] =
            fn(*replicas_[static_cast<size_t>(r)], shards[static_cast<size_t>(r)]);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    };
    std::vector<std::thread> threads;
    for (int64_t r = 1; r < k; ++r) threads.emplace_back(run, r);
    run(0);
    for (auto& t : threads) t.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    return gather_outputs(outs, devices_.front());
  }

  void zero_grad() override {
    opt_.zero_grad(true);
    for (size_t i = 1; i < replicas_.size(); ++i) replicas_[i]->zero_grad(true);
  }

 protected:
  void sync_gradients() override {
    // Reduce the replicas' gradients onto the first device, in replica order.
    NoGradGuard ng;
    auto master = model_->named_parameters();
    for (size_t i = 1; i < replicas_.size(); ++i) {
      auto ps = replicas_[i]->named_parameters();
      for (size_t j = 0; j < ps.size(); ++j) {
        const Tensor& g = ps[j].second.grad();
        if (!g.defined()) continue;
        const Tensor& p = master[j].second;
        Tensor moved = ops::to_device(g, p.device(), true);
        if (p.grad().defined()) {
          Tensor acc = p.grad();
          ops::binary_(BinaryOp::add, acc, moved);
        } else {
          p.set_grad(moved);
        }
      }
      replicas_[i]->zero_grad(true);
    }
  }
  TensorList owned_gradients() override { return defined_grads(named_params_); }
  void update_parameters(const std::vector<bool>&) override { opt_.step(); }

 private:
  /// Copies the model's parameters and buffers into the first k replicas.
  void sync_replicas(int64_t k) {
    NoGradGuard ng;
    auto mp = model_->named_parameters();
    auto mb = model_->named_buffers();
    for (int64_t i = 1; i < k; ++i) {
      auto& r = replicas_[static_cast<size_t>(i)];
      auto rp = r->named_parameters();
      for (size_t j = 0; j < rp.size(); ++j) ops::copy_(rp[j].second, mp[j].second);
      auto rb = r->named_buffers();
      for (size_t j = 0; j < rb.size() && j < mb.size(); ++j)
        ops::copy_(rb[j].second, mb[j].second);
    }
  }

  std::vector<Device> devices_;
  std::vector<std::shared_ptr<nn::Module>> replicas_;
};

}  // namespace

std::unique_ptr<Strategy> make_single_strategy(std::shared_ptr<nn::Module> model,
                                               optim::Optimizer& opt, StrategyOptions opts) {
  return std::make_unique<SingleStrategy>(std::move(model), opt, std::move(opts));
}

std::unique_ptr<Strategy> make_dp_strategy(std::shared_ptr<nn::Module> model, optim::Optimizer& opt,
                                           StrategyOptions opts) {
  return std::make_unique<DataParallelStrategy>(std::move(model), opt, std::move(opts));
}

}  // namespace sl::dist
