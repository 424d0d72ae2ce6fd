#include "dist/accounting.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "dist/flat_layout.h"
#include "dist/sharded_optimizer.h"
#include "dist/strategy_impl.h"
#include "optim/functional.h"

namespace sl::dist {

MemoryPrediction predict_memory(StrategyKind kind, int64_t psi, int n, double param_bpe,
                                double state_bpe) {
  SL_CHECK(n >= 1 && psi >= 0, "predict_memory: need psi >= 0 and n >= 1, got psi=", psi, " n=", n);
  const double p = static_cast<double>(psi), nn = static_cast<double>(n);
  MemoryPrediction m;
  m.param_bytes = param_bpe * p;
  m.grad_bytes = param_bpe * p;
  m.optimizer_state_bytes = state_bpe * p;
  if (kind == StrategyKind::zero1 || kind == StrategyKind::zero2) m.optimizer_state_bytes /= nn;
  if (kind == StrategyKind::zero2) m.grad_bytes /= nn;
  return m;
}

double MemoryComparison::worst() const {
  return std::max({param_rel, grad_rel, state_rel});
}

std::string MemoryComparison::str() const {
  std::ostringstream os;
  os << "params " << param_rel * 100 << "%, grads " << grad_rel * 100 << "%, optimizer state "
     << state_rel * 100 << "% off the prediction";
  return os.str();
}

MemoryComparison compare_memory(const MemoryReport& m, const MemoryPrediction& p) {
  auto rel = [](double got, double want) {
    return want == 0 ? (got == 0 ? 0.0 : INFINITY) : std::abs(got - want) / want;
  };
  MemoryComparison c;
  c.param_rel = rel(static_cast<double>(m.param_bytes), p.param_bytes);
  c.grad_rel = rel(static_cast<double>(m.grad_bytes), p.grad_bytes);
  c.state_rel = rel(static_cast<double>(m.optimizer_state_bytes + m.master_weight_bytes),
                    p.optimizer_state_bytes);
  return c;
}

namespace {

int64_t bytes_of(int64_t n, DType dt) {
  return n * static_cast<int64_t>(dtype_size(dt));
}

}  // namespace

MemoryReport estimate_memory(StrategyKind kind, const nn::Module& model,
                             const optim::Optimizer& opt, int world_size,
                             const StrategyOptions& opts) {
  const char* op = "estimate_memory";
  SL_CHECK(world_size >= 1, op, ": world_size must be >= 1, got ", world_size);
  SL_CHECK(kind != StrategyKind::single || world_size == 1, op,
           ": single trains on one rank, got world_size ", world_size);
  SL_CHECK(!opts.offload_optimizer || kind == StrategyKind::zero1 || kind == StrategyKind::zero2,
           op,
           ": offload_optimizer needs zero1 or zero2 (it moves the rank's optimizer shard), got ",
           strategy_name(kind));
  SL_CHECK(opts.bucket_cap_bytes >= 1 && opts.first_bucket_cap_bytes >= 1, op,
           ": bucket caps must be >= 1, got ", opts.bucket_cap_bytes, " and ",
           opts.first_bucket_cap_bytes);
  const auto named = trainable_parameters(model, opt, op);
  const auto index = optimizer_index(opt, named);
  MemoryReport m;
  m.strategy = strategy_name(kind);
  m.world_size = world_size;
  // a parameter's optimizer state: state_tensors of its size, in float32 beside a master copy
  auto master_of = [&](size_t i) {
    return optim::is_low_precision(named[i].second.dtype()) && opt.master_weights(index[i].first);
  };
  for (const auto& [n, p] : named) m.numel += p.numel();

  if (kind == StrategyKind::single || kind == StrategyKind::dp || kind == StrategyKind::ddp) {
    // the optimizer's own per-parameter state (optim/functional.cpp)
    for (size_t i = 0; i < named.size(); ++i) {
      const Tensor& p = named[i].second;
      const bool master = master_of(i);
      const DType state_dt = master ? DType::f32 : p.dtype();
      m.optimizer_state_bytes += opt.state_tensors(index[i].first) * bytes_of(p.numel(), state_dt);
      if (master) m.master_weight_bytes += bytes_of(p.numel(), DType::f32);
    }
    if (kind != StrategyKind::ddp) {  // the parameters and their .grad() as they are
      for (const auto& [n, p] : named) m.param_bytes += bytes_of(p.numel(), p.dtype());
      m.grad_bytes = m.param_bytes;
      return m;
    }
  }
  std::vector<ParamSpec> specs;
  for (const auto& [n, p] : named) specs.push_back({p.numel(), p.dtype()});
  const FlatLayout L(specs, world_size, opts.bucket_cap_bytes, opts.first_bucket_cap_bytes);
  for (const FlatGroup& g : L.groups()) m.param_bytes += bytes_of(g.numel, g.dtype);
  if (kind == StrategyKind::ddp) {
    m.grad_bytes = m.param_bytes;  // the flat gradient buffers
    return m;
  }
  update_rule_of(opt);  // zero1/zero2 shard the optimizers ShardedOptimizer supports only
  // Note [Flat buffer layout] 5: state, masters and (zero2) gradients in shard layout
  const ShardStatePlan plan = plan_shard_state(L, opt, index);
  const int n_state = plan.state_tensors;
  const std::vector<bool>& master = plan.master;
  int64_t state = 0, masters = 0, working = 0;
  for (size_t g = 0; g < L.groups().size(); ++g) {
    const FlatGroup& fg = L.groups()[g];
    const DType state_dt = master[g] ? DType::f32 : fg.dtype;
    state += n_state * bytes_of(fg.shard_numel, state_dt);
    if (master[g]) masters += bytes_of(fg.shard_numel, DType::f32);
    // offloaded: the host's gradient and parameter shards in the group's dtype
    working += 2 * bytes_of(fg.shard_numel, fg.dtype);
    if (kind == StrategyKind::zero2) m.grad_bytes += bytes_of(fg.shard_numel, fg.dtype);
  }
  if (kind == StrategyKind::zero1) m.grad_bytes = m.param_bytes;
  if (opts.offload_optimizer) {
    m.offloaded_bytes = state + masters + working;
  } else {
    m.optimizer_state_bytes = state;
    m.master_weight_bytes = masters;
  }
  return m;
}

}  // namespace sl::dist
