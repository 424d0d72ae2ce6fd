// The strategy-independent part of Strategy: parsing, the step pipeline (gradient sync,
// inf/NaN agreement, clipping, loss scaling), no_sync, and the factory.
#include "dist/strategy.h"

#include <cmath>
#include <sstream>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/optim.h"
#include "core/ops/view.h"
#include "core/profiler.h"
#include "dist/flat_buffers.h"
#include "dist/stats_sync.h"
#include "dist/strategy_impl.h"
#include "optim/clip_grad.h"

namespace sl::dist {

StrategyKind parse_strategy(const std::string& name) {
  static const std::pair<const char*, StrategyKind> kinds[] = {{"single", StrategyKind::single},
                                                               {"dp", StrategyKind::dp},
                                                               {"ddp", StrategyKind::ddp},
                                                               {"zero1", StrategyKind::zero1},
                                                               {"zero2", StrategyKind::zero2}};
  for (const auto& [n, k] : kinds) {
    if (name == n) return k;
  }
  detail::throw_error<ValueError>("strategy: unknown strategy '", name,
                                  "' (expected single, dp, ddp, zero1 or zero2)");
}

const char* strategy_name(StrategyKind k) {
  switch (k) {
    case StrategyKind::single:
      return "single";
    case StrategyKind::dp:
      return "dp";
    case StrategyKind::ddp:
      return "ddp";
    case StrategyKind::zero1:
      return "zero1";
    case StrategyKind::zero2:
      return "zero2";
  }
  return "?";
}

std::string MemoryReport::str() const {
  std::ostringstream os;
  auto mb = [](int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
  os << strategy << " rank memory (N=" << world_size << ", Psi=" << numel << "): params "
     << mb(param_bytes) << " MiB, grads " << mb(grad_bytes) << " MiB, optimizer state "
     << mb(optimizer_state_bytes) << " MiB, master weights " << mb(master_weight_bytes)
     << " MiB, comm buffers " << mb(comm_buffer_bytes) << " MiB, allocator peak "
     << mb(allocator_peak_bytes) << " MiB";
  if (offloaded_bytes > 0) os << ", offloaded to the host " << mb(offloaded_bytes) << " MiB";
  return os.str();
}

std::vector<std::pair<std::string, Tensor>> trainable_parameters(const nn::Module& model,
                                                                 const optim::Optimizer& opt,
                                                                 const char* op) {
  std::vector<std::pair<std::string, Tensor>> named;
  for (auto& [name, p] : model.named_parameters()) {
    if (p.requires_grad()) named.emplace_back(name, p);
  }
  // The optimizer must hold exactly the trainable parameters.
  std::unordered_set<const TensorImpl*> in_opt;
  for (size_t g = 0; g < opt.num_param_groups(); ++g) {
    for (const Tensor& p : opt.params(g)) in_opt.insert(p.impl());
  }
  for (const auto& [name, p] : named) {
    SL_CHECK(in_opt.count(p.impl()), op, ": trainable parameter '", name,
             "' is not in the optimizer");
  }
  SL_CHECK(in_opt.size() == named.size(), op, ": the optimizer holds ", in_opt.size(),
           " parameters but the model has ", named.size(), " trainable ones");
  return named;
}

Strategy::Strategy(StrategyKind kind, std::shared_ptr<nn::Module> model, optim::Optimizer& opt,
                   StrategyOptions opts, ProcessGroupPtr group)
    : kind_(kind),
      model_(std::move(model)),
      opt_(opt),
      opts_(std::move(opts)),
      group_(std::move(group)) {
  SL_CHECK(model_ != nullptr, "make_strategy: model is null");
  SL_CHECK(opts_.bucket_cap_bytes >= 1, "make_strategy: bucket_cap_bytes must be >= 1, got ",
           opts_.bucket_cap_bytes);
  SL_CHECK(opts_.first_bucket_cap_bytes >= 1,
           "make_strategy: first_bucket_cap_bytes must be >= 1, got ",
           opts_.first_bucket_cap_bytes);
  SL_CHECK(opts_.max_grad_norm >= 0 && !std::isnan(opts_.max_grad_norm),
           "make_strategy: max_grad_norm must be >= 0, got ", opts_.max_grad_norm);
  named_params_ = trainable_parameters(*model_, opt_, "make_strategy");
  if (opts_.loss_scaling) {
    // Validates the options exactly as GradScaler does.
    optim::GradScaler check(*opts_.loss_scaling);
    scale_ = opts_.loss_scaling->enabled ? opts_.loss_scaling->init_scale : 1.0;
    if (!opts_.loss_scaling->enabled) opts_.loss_scaling.reset();
  }
  if (opts_.reduce_dtype) {
    SL_CHECK_DTYPE(
        is_floating(*opts_.reduce_dtype),
        "make_strategy: reduce_dtype must be a floating dtype (f16, bf16, f32, f64), got ",
        dtype_name(*opts_.reduce_dtype));
    SL_CHECK(kind_ != StrategyKind::dp,
             "make_strategy: reduce_dtype applies to gradients communicated between processes "
             "(ddp, zero1, zero2); dp's replicas are threads of one process, summed in place");
  }
  SL_CHECK(!opts_.offload_optimizer || kind_ == StrategyKind::zero1 || kind_ == StrategyKind::zero2,
           "make_strategy: offload_optimizer needs zero1 or zero2 (the optimizer state of the "
           "rank's shard moves to the host), not ",
           strategy_name(kind_));
  if (opts_.sync_batchnorm) {
    SL_CHECK(kind_ != StrategyKind::dp,
             "make_strategy: sync_batchnorm needs one process per rank (ddp, zero1, zero2); dp's "
             "replicas are threads of one process");
    if (group_->size() > 1)
      synced_batchnorms_ = nn::convert_sync_batchnorm(*model_, make_stats_sync(group_));
  }
}

Strategy::~Strategy() {
  if (synced_batchnorms_ > 0) nn::convert_sync_batchnorm(*model_, nullptr);
}

Tensor Strategy::forward(const Tensor& x) {
  return forward(TensorList{x},
                 [](nn::Module& m, const TensorList& in) { return m.forward(in[0]); });
}

Tensor Strategy::forward(const TensorList& inputs, const ForwardFn& fn) {
  return fn(*model_, inputs);
}

void Strategy::backward(const Tensor& loss) {
  if (opts_.loss_scaling) {
    (loss * scale_).backward();
  } else {
    loss.backward();
  }
}

void Strategy::zero_grad() {
  opt_.zero_grad(true);
}

StepResult Strategy::step() {
  StepResult r;
  r.loss_scale = scale_;
  {
    profiler::Scope scope("gradient sync", profiler::Category::phase);
    sync_gradients();
  }
  NoGradGuard no_grad;
  TensorList grads = owned_gradients();
  const bool scaling = opts_.loss_scaling.has_value();
  const bool share = !gradients_replicated() && world_size() > 1;
  // the group's collectives take tensors where the gradients are (a GPU's for NCCL)
  const Device dev = grads.empty() ? kCPU : grads.front().device();
  const bool check = scaling || opts_.skip_nonfinite;
  const std::vector<uint8_t> used = local_gradient_flags();
  std::vector<bool> unused;  // per parameter, when any is: no rank has a gradient for it
  if (check || !used.empty()) {
    // one collective carries the inf/NaN flag and which parameters any rank has a gradient for
    // (Note [Unused parameters]); every rank agrees on both
    const auto n = static_cast<int64_t>(used.size());
    Tensor control = zeros({1 + n}, {.dtype = DType::f32, .device = dev});
    if (check) {
      Tensor found = ops::narrow(control, 0, 0, 1);
      for (const Tensor& g : grads) ops::unscale_check_(g, found, scaling ? 1.0 / scale_ : 1.0);
    }
    if (n > 0) {
      std::vector<float> flags(used.begin(), used.end());
      ops::copy_(ops::narrow(control, 0, 1, n), from_vector(flags));
    }
    if (world_size() > 1 && (share || n > 0)) group_->allreduce(control, ReduceOp::max)->wait();
    Tensor host = control.cpu();
    const float* h = host.data_ptr<float>();
    r.found_nonfinite = h[0] != 0.f;
    bool any_skipped = false;
    for (int64_t i = 0; i < n; ++i) any_skipped = any_skipped || h[1 + i] == 0.f;
    for (int64_t i = 0; i < n && any_skipped; ++i) unused.push_back(h[1 + i] == 0.f);
  }
  bool skip = r.found_nonfinite && (scaling || opts_.skip_nonfinite);
  if (opts_.max_grad_norm > 0 && !skip) {
    profiler::Scope scope("clip gradients", profiler::Category::phase);
    double partial = optim::grad_norm_partial(grads, opts_.norm_type);
    if (share) {
      Tensor t = full({1}, partial, {.dtype = DType::f64, .device = dev});
      group_->allreduce(t, std::isinf(opts_.norm_type) ? ReduceOp::max : ReduceOp::sum)->wait();
      partial = t.cpu().item<double>();
    }
    r.grad_norm = optim::total_norm_from_partial(partial, opts_.norm_type);
    optim::clip_grads_with_norm_(grads, opts_.max_grad_norm, r.grad_norm);
  }
  if (!skip) {
    profiler::Scope scope("update parameters", profiler::Category::phase);
    update_parameters(unused);
    steps_taken_ += 1;
    r.taken = true;
  }
  if (scaling) {
    const optim::GradScalerOptions& o = *opts_.loss_scaling;
    if (r.found_nonfinite) {
      scale_ *= o.backoff_factor;
      growth_tracker_ = 0;
    } else if (++growth_tracker_ == o.growth_interval) {
      scale_ *= o.growth_factor;
      growth_tracker_ = 0;
    }
  }
  return r;
}

MemoryReport Strategy::memory_report() const {
  MemoryReport m;
  m.strategy = name();
  m.world_size = world_size();
  Device dev = named_params_.empty() ? kCPU : named_params_.front().second.device();
  for (const auto& [n, p] : named_params_) {
    m.numel += p.numel();
    m.param_bytes += static_cast<int64_t>(p.nbytes());
    if (p.grad().defined()) m.grad_bytes += static_cast<int64_t>(p.grad().nbytes());
  }
  for (size_t g = 0; g < opt_.num_param_groups(); ++g) {
    for (size_t i = 0; i < opt_.params(g).size(); ++i) {
      const optim::ParamState& s = opt_.state(g, i);
      m.optimizer_state_bytes += tensor_bytes(s.state_tensors());
      m.master_weight_bytes += tensor_bytes({s.master});
    }
  }
  m.allocator_peak_bytes = memory_stats(dev).peak_bytes;
  return m;
}

Strategy::NoSync::NoSync(Strategy* s, bool active) : s_(active ? s : nullptr) {
  if (s_) {
    prev_ = s_->no_sync_;
    s_->no_sync_ = true;
  }
}

Strategy::NoSync::~NoSync() {
  if (s_) s_->no_sync_ = prev_;
}

Strategy::NoSync::NoSync(NoSync&& o) noexcept : s_(o.s_), prev_(o.prev_) {
  o.s_ = nullptr;
}

std::unique_ptr<Strategy> make_strategy(const std::string& kind, std::shared_ptr<nn::Module> model,
                                        optim::Optimizer& opt, StrategyOptions opts) {
  StrategyKind k = parse_strategy(kind);
  switch (k) {
    case StrategyKind::single:
      return make_single_strategy(std::move(model), opt, std::move(opts));
    case StrategyKind::dp:
      return make_dp_strategy(std::move(model), opt, std::move(opts));
    case StrategyKind::ddp:
    case StrategyKind::zero1:
    case StrategyKind::zero2:
      return make_flat_strategy(k, std::move(model), opt, std::move(opts));
  }
  return nullptr;
}

}  // namespace sl::dist
