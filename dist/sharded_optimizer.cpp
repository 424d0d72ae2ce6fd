#include "dist/sharded_optimizer.h"

#include <algorithm>
#include <string_view>

#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/cuda/cuda_api.h"
#include "core/ops/copy.h"
#include "core/ops/optim.h"
#include "core/ops/view.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/adamax.h"
#include "optim/lamb.h"
#include "optim/nadam.h"
#include "optim/radam.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"

namespace sl::dist {

namespace {

Tensor slice(const Tensor& t, int64_t off, int64_t n) {
  return t.defined() ? ops::narrow(t, 0, off, n) : Tensor();
}

}  // namespace

UpdateRule update_rule_of(const optim::Optimizer& opt) {
  if (dynamic_cast<const optim::SGD*>(&opt)) return UpdateRule::sgd;
  if (dynamic_cast<const optim::AdamW*>(&opt)) return UpdateRule::adamw;
  if (dynamic_cast<const optim::Adam*>(&opt)) return UpdateRule::adam;
  if (dynamic_cast<const optim::Lamb*>(&opt)) return UpdateRule::lamb;
  if (dynamic_cast<const optim::RMSprop*>(&opt)) return UpdateRule::rmsprop;
  if (dynamic_cast<const optim::Adagrad*>(&opt)) return UpdateRule::adagrad;
  if (dynamic_cast<const optim::Adamax*>(&opt)) return UpdateRule::adamax;
  if (dynamic_cast<const optim::NAdam*>(&opt)) return UpdateRule::nadam;
  if (dynamic_cast<const optim::RAdam*>(&opt)) return UpdateRule::radam;
  detail::throw_error<ValueError>(
      "zero: optimizer ", opt.name(),
      " is not supported (SGD, Adam, AdamW, Lamb, RMSprop, Adagrad, Adamax, NAdam and RAdam are)");
}

Tensor& ShardState::tensor(size_t k) {
  Tensor* fields[] = {&momentum_buffer, &exp_avg, &exp_avg_sq, &max_exp_avg_sq, &square_avg,
                      &grad_avg,        &sum,     &exp_inf,    &master};
  static_assert(std::size(fields) == optim::ParamState::kNumTensors);
  return *fields[k];
}

std::vector<std::pair<std::string, Tensor>> ShardState::named() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t k = 0; k < optim::ParamState::kNumTensors; ++k) {
    if (tensor(k).defined()) out.emplace_back(optim::ParamState::kKeys[k], tensor(k));
  }
  return out;
}

namespace {

/// The state tensors any optimizer group keeps.
optim::StateKeys union_state_keys(const optim::Optimizer& opt) {
  optim::StateKeys keys;
  for (size_t g = 0; g < opt.num_param_groups(); ++g) keys |= opt.state_keys(g);
  return keys;
}

}  // namespace

ShardStatePlan plan_shard_state(const FlatLayout& L, const optim::Optimizer& opt,
                                const std::vector<std::pair<size_t, size_t>>& opt_index) {
  SL_CHECK(opt_index.size() == L.params().size(), "zero: ", opt_index.size(),
           " optimizer indices for ", L.params().size(), " parameters");
  ShardStatePlan plan;
  // a centered RMSprop group and another with momentum need 3 buffers, though each keeps 2
  plan.state_keys = union_state_keys(opt);
  plan.state_tensors = static_cast<int>(plan.state_keys.count());
  plan.master.assign(L.groups().size(), false);
  for (size_t i = 0; i < L.params().size(); ++i) {
    if (optim::is_low_precision(L.params()[i].dtype) && opt.master_weights(opt_index[i].first)) {
      plan.master[static_cast<size_t>(L.slots()[i].group)] = true;
    }
  }
  return plan;
}

ShardedOptimizer::ShardedOptimizer(const FlatBuffers& flat, int rank, optim::Optimizer& opt,
                                   std::vector<std::pair<size_t, size_t>> opt_index,
                                   AllReduceSum all_reduce_sum, std::optional<Device> state_device)
    : flat_(flat),
      rank_(rank),
      opt_(opt),
      rule_(update_rule_of(opt)),
      all_reduce_sum_(std::move(all_reduce_sum)),
      state_device_(state_device.value_or(flat.device())),
      offload_(state_device_ != flat.device()) {
  const FlatLayout& L = flat.layout();
  const ShardStatePlan plan = plan_shard_state(L, opt, opt_index);  // checks opt_index's size
  SL_CHECK(rule_ != UpdateRule::lamb || all_reduce_sum_ || L.world_size() == 1, "zero: Lamb over ",
           L.world_size(),
           " ranks needs an all-reduce for its per-parameter norms (none was given)");
  // Runs: consecutive owned pieces, adjacent in both the flat buffer and the shard, with one
  // optimizer group.
  for (const Piece& pc : L.pieces_of_rank(rank)) {
    size_t og = opt_index[static_cast<size_t>(pc.param)].first;
    if (!runs_.empty()) {
      Run& r = runs_.back();
      if (r.group == pc.group && r.opt_group == og && r.flat_offset + r.numel == pc.flat_offset &&
          r.shard_offset + r.numel == pc.shard_offset) {
        r.numel += pc.numel();
        r.bounds.push_back(r.numel);
        r.params.push_back(pc.param);
        continue;
      }
    }
    runs_.push_back(Run{
        pc.group, og, pc.flat_offset, pc.shard_offset, pc.numel(), {0, pc.numel()}, {pc.param}, 0});
  }
  const std::vector<bool>& master = plan.master;
  state_.resize(L.groups().size());
  steps_.assign(L.params().size(), 0);
  momentum_ready_.assign(L.params().size(), 0);
  mu_products_.assign(L.params().size(), 1.0);
  for (const auto& [g, i] : opt_index) opt_group_.push_back(g);
  if (offload_) {
    host_params_.resize(L.groups().size());
    host_grads_.resize(L.groups().size());
  }
  for (size_t g = 0; g < L.groups().size(); ++g) {
    ShardState& s = state_[g];
    const int64_t n = L.groups()[g].shard_numel;
    const DType dt = L.groups()[g].dtype;
    DType state_dt = master[g] ? DType::f32 : dt;
    // offloaded: what crosses to and from the GPU every step is pinned where the backend can
    if (master[g]) s.master = zeros_1d(n, DType::f32);
    if (offload_) host_params_[g] = zeros_1d(n, dt, true);
    if (offload_) host_grads_[g] = zeros_1d(n, dt, true);
    // Adagrad's sum is filled with each run's initial value below
    for (size_t k = 0; k < plan.state_keys.size(); ++k) {
      if (plan.state_keys[k]) s.tensor(k) = zeros_1d(n, state_dt);
    }
  }
  if (rule_ == UpdateRule::adagrad) {
    auto& adagrad = static_cast<optim::Adagrad&>(opt_);
    for (const Run& r : runs_) {
      ops::fill_(slice(state_[static_cast<size_t>(r.group)].sum, r.shard_offset, r.numel),
                 adagrad.options(r.opt_group).initial_accumulator_value);
    }
  }
  refresh_master();
}

DType ShardedOptimizer::state_dtype(size_t g) const {
  return state_[g].master.defined() ? DType::f32 : flat_.layout().groups()[g].dtype;
}

void ShardedOptimizer::ensure_state_buffers() {
  const optim::StateKeys keys = union_state_keys(opt_);
  for (size_t g = 0; g < state_.size(); ++g) {
    const int64_t n = flat_.layout().groups()[g].shard_numel;
    for (size_t k = 0; k < keys.size(); ++k) {
      if (keys[k] && !state_[g].tensor(k).defined())
        state_[g].tensor(k) = zeros_1d(n, state_dtype(g));
    }
  }
}

double ShardedOptimizer::initial_state(size_t k, size_t group) const {
  if (rule_ == UpdateRule::adagrad && std::string_view(optim::ParamState::kKeys[k]) == "sum") {
    return static_cast<const optim::Adagrad&>(opt_).options(group).initial_accumulator_value;
  }
  return 0.0;
}

void ShardedOptimizer::mark_momentum(const Run& r) {
  for (int64_t p : r.params) momentum_ready_[static_cast<size_t>(p)] = 1;
}

bool ShardedOptimizer::uses_master(int group) const {
  return state_[static_cast<size_t>(group)].master.defined();
}

Tensor ShardedOptimizer::zeros_1d(int64_t n, DType dt, bool pinned) const {
  Tensor z = ops::empty({n}, dt, state_device_);
  ops::fill_(z, 0);
  // page-locked host memory makes the copies to and from the GPU direct DMA transfers; backends
  // without it (the fake GPU) keep pageable memory, which copies stage through pinned buffers
  if (pinned && state_device_.is_cpu() && pinned_allocator_kernel.has(flat_.device().kind)) {
    z = z.pin_memory();
  }
  return z;
}

Tensor ShardedOptimizer::update_target(const Run& r) const {
  const auto g = static_cast<size_t>(r.group);
  if (state_[g].master.defined()) return slice(state_[g].master, r.shard_offset, r.numel);
  if (offload_) return slice(host_params_[g], r.shard_offset, r.numel);
  return slice(flat_.param_buffer(r.group), r.flat_offset, r.numel);
}

void ShardedOptimizer::write_back(const Run& r, const Tensor& target) const {
  if (!uses_master(r.group) && !offload_) return;  // updated in place
  Tensor src = target;
  if (offload_ && uses_master(r.group)) {
    // Round the master on the host into the pinned parameter copy, so the copy to the GPU is
    // a direct asynchronous DMA instead of a staged copy of a fresh pageable cast that ends in
    // a stream synchronize. The next write into this part of host_params_ is the next step's
    // update, after stage_gradients has waited for the stream (see there).
    src = slice(host_params_[static_cast<size_t>(r.group)], r.shard_offset, r.numel);
    ops::copy_(src, target);
  }
  // rounds a master into the parameter's dtype (on the device that holds it); crosses devices
  // when offloaded, asynchronously from pinned memory (Note [Pinned host memory])
  ops::copy_(slice(flat_.param_buffer(r.group), r.flat_offset, r.numel), src);
}

const std::vector<Tensor>& ShardedOptimizer::stage_gradients(
    const std::vector<Tensor>& grad_shards) {
  if (!offload_) return grad_shards;
  // Offloaded, write_back's copies from host_params_ to the GPU are asynchronous (pinned), and
  // this step's update writes host_params_ again (in place, or rounding a master into it), so
  // those copies must have run first: they were queued on the parameters' device's compute
  // stream, which is drained here. (The device-to-host copies below would wait for it too, but
  // only when a group's shard is not empty; refresh_master writes host_params_ by
  // device-to-host copies on the same stream, ordered after them on the GPU.)
  if (flat_.device().is_cuda()) cuda::synchronize(flat_.device().index);
  for (size_t g = 0; g < grad_shards.size(); ++g) ops::copy_(host_grads_[g], grad_shards[g]);
  return host_grads_;
}

void ShardedOptimizer::refresh_master(bool masters) {
  refresh_master(std::vector<bool>(flat_.layout().params().size(), !masters));
}

void ShardedOptimizer::refresh_master(const std::vector<bool>& master_loaded) {
  SL_CHECK(master_loaded.size() == flat_.layout().params().size(), "zero: ", master_loaded.size(),
           " master flags for ", flat_.layout().params().size(), " parameters");
  NoGradGuard no_grad;
  for (const Run& r : runs_) {
    if (!uses_master(r.group) && !offload_) continue;
    const Tensor target = update_target(r);
    const Tensor params = slice(flat_.param_buffer(r.group), r.flat_offset, r.numel);
    // one copy per span of consecutive pieces to refresh (offloaded, each is a synchronising
    // device-to-host copy)
    auto keep = [&](size_t j) {
      return uses_master(r.group) && master_loaded[static_cast<size_t>(r.params[j])];
    };
    for (size_t j = 0; j < r.params.size();) {
      size_t k = j + 1;
      while (k < r.params.size() && keep(k) == keep(j)) ++k;
      if (!keep(j)) {
        const int64_t b = r.bounds[j], n = r.bounds[k] - b;
        ops::copy_(slice(target, b, n), slice(params, b, n));
      }
      j = k;
    }
  }
}

std::vector<ShardedOptimizer::Run> ShardedOptimizer::active_runs(
    const std::vector<bool>& skip) const {
  auto skipped = [&](int64_t p) { return !skip.empty() && skip[static_cast<size_t>(p)]; };
  std::vector<Run> out;
  for (const Run& r : runs_) {
    size_t j = 0;
    while (j < r.params.size()) {
      if (skipped(r.params[j])) {
        ++j;
        continue;
      }
      // [j, k): consecutive pieces to update with one step count
      const int64_t step = steps_[static_cast<size_t>(r.params[j])];
      size_t k = j + 1;
      const uint8_t ready = momentum_ready_[static_cast<size_t>(r.params[j])];
      const double mu_product = mu_products_[static_cast<size_t>(r.params[j])];
      while (k < r.params.size() && !skipped(r.params[k]) &&
             steps_[static_cast<size_t>(r.params[k])] == step &&
             momentum_ready_[static_cast<size_t>(r.params[k])] == ready &&
             mu_products_[static_cast<size_t>(r.params[k])] == mu_product) {
        ++k;
      }
      const int64_t b = r.bounds[j];
      Run sub{r.group, r.opt_group, r.flat_offset + b, r.shard_offset + b, r.bounds[k] - b, {},
              {},      step,        mu_product};
      for (size_t i = j; i <= k; ++i) sub.bounds.push_back(r.bounds[i] - b);
      sub.params.assign(r.params.begin() + static_cast<std::ptrdiff_t>(j),
                        r.params.begin() + static_cast<std::ptrdiff_t>(k));
      out.push_back(std::move(sub));
      j = k;
    }
  }
  return out;
}

void ShardedOptimizer::step(const std::vector<Tensor>& grad_shards_in,
                            const std::vector<bool>& skip) {
  SL_CHECK(skip.empty() || skip.size() == flat_.layout().params().size(), "zero: ", skip.size(),
           " skip flags for ", flat_.layout().params().size(), " parameters");
  NoGradGuard no_grad;
  SL_CHECK(grad_shards_in.size() == state_.size(), "zero: ", grad_shards_in.size(),
           " gradient shards for ", state_.size(), " dtype groups");
  const std::vector<Tensor>& grad_shards = stage_gradients(grad_shards_in);
  for (size_t p = 0; p < steps_.size(); ++p) {
    if (skip.empty() || !skip[p]) steps_[p] += 1;
  }
  if (rule_ == UpdateRule::nadam) {
    // every rank advances every stepped parameter's product, owner of a piece of it or not
    auto& nadam = static_cast<optim::NAdam&>(opt_);
    for (size_t g = 0; g < opt_.num_param_groups(); ++g) nadam.options(g);  // range checks
    for (size_t p = 0; p < steps_.size(); ++p) {
      if (skip.empty() || !skip[p]) {
        mu_products_[p] =
            nadam_mu_product(nadam.options(opt_group_[p]).hyper(), steps_[p], mu_products_[p]);
      }
    }
  }
  const std::vector<Run> runs = active_runs(skip);
  if (rule_ == UpdateRule::lamb) {
    lamb_step(grad_shards, runs);
    return;
  }
  ensure_state_buffers();
  for (const Run& r : runs) {
    const ShardState& s = state_[static_cast<size_t>(r.group)];
    Tensor param = update_target(r);
    Tensor grad = slice(grad_shards[static_cast<size_t>(r.group)], r.shard_offset, r.numel);
    if (rule_ == UpdateRule::sgd) {
      SgdHyper h = static_cast<optim::SGD&>(opt_).options(r.opt_group).hyper();
      Tensor buf = h.momentum != 0.0 ? slice(s.momentum_buffer, r.shard_offset, r.numel) : Tensor();
      // PyTorch's first step with momentum copies the gradient into the parameter's buffer
      ops::sgd_step(param, grad, buf, h, !momentum_ready_[static_cast<size_t>(r.params[0])]);
      if (h.momentum != 0.0) mark_momentum(r);
    } else if (rule_ == UpdateRule::rmsprop) {
      RmspropHyper h = static_cast<optim::RMSprop&>(opt_).options(r.opt_group).hyper();
      ops::rmsprop_step(
          param, grad, slice(s.square_avg, r.shard_offset, r.numel),
          h.centered ? slice(s.grad_avg, r.shard_offset, r.numel) : Tensor(),
          h.momentum > 0.0 ? slice(s.momentum_buffer, r.shard_offset, r.numel) : Tensor(), h);
      if (h.momentum > 0.0) mark_momentum(r);  // from zeros, as PyTorch's
    } else if (rule_ == UpdateRule::adagrad) {
      AdagradHyper h = static_cast<optim::Adagrad&>(opt_).options(r.opt_group).hyper();
      ops::adagrad_step(param, grad, slice(s.sum, r.shard_offset, r.numel), r.step, h);
    } else if (rule_ == UpdateRule::adamax) {
      AdamaxHyper h = static_cast<optim::Adamax&>(opt_).options(r.opt_group).hyper();
      ops::adamax_step(param, grad, slice(s.exp_avg, r.shard_offset, r.numel),
                       slice(s.exp_inf, r.shard_offset, r.numel), r.step, h);
    } else if (rule_ == UpdateRule::nadam) {
      NadamHyper h = static_cast<optim::NAdam&>(opt_).options(r.opt_group).hyper();
      ops::nadam_step(param, grad, slice(s.exp_avg, r.shard_offset, r.numel),
                      slice(s.exp_avg_sq, r.shard_offset, r.numel), r.step, r.mu_product, h);
    } else if (rule_ == UpdateRule::radam) {
      RadamHyper h = static_cast<optim::RAdam&>(opt_).options(r.opt_group).hyper();
      ops::radam_step(param, grad, slice(s.exp_avg, r.shard_offset, r.numel),
                      slice(s.exp_avg_sq, r.shard_offset, r.numel), r.step, h);
    } else {
      AdamHyper h = rule_ == UpdateRule::adam ? static_cast<optim::Adam&>(opt_).hyper(r.opt_group)
                                              : static_cast<optim::AdamW&>(opt_).hyper(r.opt_group);
      ops::adam_step(param, grad, slice(s.exp_avg, r.shard_offset, r.numel),
                     slice(s.exp_avg_sq, r.shard_offset, r.numel),
                     h.amsgrad ? slice(s.max_exp_avg_sq, r.shard_offset, r.numel) : Tensor(),
                     r.step, h);
    }
    write_back(r, param);
  }
}

void ShardedOptimizer::lamb_step(const std::vector<Tensor>& grad_shards,
                                 const std::vector<Run>& runs) {
  auto& lamb = static_cast<optim::Lamb&>(opt_);
  const int64_t num_params = static_cast<int64_t>(flat_.layout().params().size());
  const Device dev = state_device_;
  // rows this rank owns nothing of stay 0, so the sum over ranks is the whole parameter's
  Tensor sums = ops::empty({2 * num_params}, DType::f64, dev);
  ops::fill_(sums, 0);
  std::vector<Tensor> updates(state_.size());
  for (size_t g = 0; g < state_.size(); ++g) {
    updates[g] = ops::empty({grad_shards[g].numel()},
                            state_[g].master.defined() ? DType::f32 : grad_shards[g].dtype(), dev);
  }
  for (const Run& r : runs) {
    const ShardState& s = state_[static_cast<size_t>(r.group)];
    ops::lamb_moments(
        update_target(r), slice(grad_shards[static_cast<size_t>(r.group)], r.shard_offset, r.numel),
        slice(s.exp_avg, r.shard_offset, r.numel), slice(s.exp_avg_sq, r.shard_offset, r.numel),
        slice(updates[static_cast<size_t>(r.group)], r.shard_offset, r.numel), r.bounds, r.params,
        sums, r.step, lamb.options(r.opt_group).hyper());
  }
  if (all_reduce_sum_) all_reduce_sum_(sums);  // one collective: the norms of whole parameters
  for (const Run& r : runs) {
    Tensor param = update_target(r);
    ops::lamb_apply(param, slice(updates[static_cast<size_t>(r.group)], r.shard_offset, r.numel),
                    r.bounds, r.params, sums, lamb.options(r.opt_group).lr);
    write_back(r, param);
  }
}

int64_t ShardedOptimizer::state_bytes() const {
  int64_t b = 0;
  for (const ShardState& s : state_) {
    for (size_t k = 0; k + 1 < optim::ParamState::kNumTensors; ++k) {  // all but the master, last
      b += tensor_bytes({s.tensor(k)});
    }
  }
  return b;
}

int64_t ShardedOptimizer::working_copy_bytes() const {
  return tensor_bytes(host_params_) + tensor_bytes(host_grads_);
}

int64_t ShardedOptimizer::master_bytes() const {
  int64_t b = 0;
  for (const ShardState& s : state_) b += tensor_bytes({s.master});
  return b;
}

}  // namespace sl::dist
