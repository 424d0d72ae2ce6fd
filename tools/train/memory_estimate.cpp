#include "memory_estimate.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "dist/accounting.h"

namespace sl::train {

namespace {

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", bytes / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

std::vector<int64_t> estimate_rank_counts(int64_t max_ranks) {
  SL_CHECK(max_ranks >= 1, "--estimate-memory: need at least 1 rank, got ", max_ranks);
  std::vector<int64_t> sizes;
  for (int64_t n = 1; n < max_ranks; n *= 2) sizes.push_back(n);
  sizes.push_back(max_ranks);
  return sizes;
}

std::string activation_table(const std::vector<ActivationSample>& samples, const Device& device) {
  std::string out =
      "activations and temporaries per rank: one forward and backward of its "
      "micro-batch, measured on " +
      device.str() + " (the allocator's peak above what stays allocated after it)\n";
  char line[256];
  std::snprintf(line, sizeof line, "%6s  %11s %10s\n", "ranks", "micro-batch", "MiB");
  out += line;
  for (const ActivationSample& a : samples) {
    const std::string micro = a.micro_batch > 0 ? std::to_string(a.micro_batch) : "-";
    std::snprintf(line, sizeof line, "%6lld  %11s %10s%s%s\n", static_cast<long long>(a.ranks),
                  micro.c_str(), a.bytes < 0 ? "-" : mib(static_cast<double>(a.bytes)).c_str(),
                  a.why.empty() ? "" : "  ", a.why.c_str());
    out += line;
  }
  return out;
}

std::string memory_estimate_table(const nn::Module& model, const optim::Optimizer& opt,
                                  const dist::StrategyOptions& opts, int64_t max_ranks,
                                  bool params_16) {
  const std::vector<int64_t> sizes = estimate_rank_counts(max_ranks);
  // K: the optimizer's float32 state tensors per parameter (AdamW's and LAMB's two moments,
  // SGD's momentum buffer or none without momentum), plus the master copy of 16-bit parameters;
  // zero1/zero2 shard all of it
  int state_tensors = 0;
  for (size_t g = 0; g < opt.num_param_groups(); ++g)
    state_tensors = std::max(state_tensors, opt.state_tensors(g));
  const double param_bpe = params_16 ? 2 : 4, k = 4.0 * (state_tensors + (params_16 ? 1 : 0));
  const bool offload = opts.offload_optimizer;
  std::string out;
  char line[256];
  for (int64_t n : sizes) {
    std::vector<dist::StrategyKind> kinds{dist::StrategyKind::single};
    if (n > 1)
      kinds = {dist::StrategyKind::ddp, dist::StrategyKind::zero1, dist::StrategyKind::zero2};
    for (dist::StrategyKind kind : kinds) {
      const bool zero = kind == dist::StrategyKind::zero1 || kind == dist::StrategyKind::zero2;
      dist::StrategyOptions o = opts;
      o.offload_optimizer = offload && zero;
      const dist::MemoryReport m = dist::estimate_memory(kind, model, opt, static_cast<int>(n), o);
      if (out.empty()) {
        std::snprintf(line, sizeof line,
                      "model states per rank in MiB (Psi = %lld parameters; activations "
                      "below; communication buffers not included)\n",
                      static_cast<long long>(m.numel));
        out += line;
        std::snprintf(line, sizeof line, "%6s  %-8s %10s %10s %10s %10s %10s %10s %12s\n", "ranks",
                      "strategy", "params", "grads", "optimizer", "masters", "device", "host",
                      "ZeRO paper");
        out += line;
      }
      const double device = static_cast<double>(m.param_bytes + m.grad_bytes +
                                                m.optimizer_state_bytes + m.master_weight_bytes);
      // the paper's formula for the same strategy with the state on the device (Psi_bytes * K)
      const double paper =
          dist::predict_memory(kind, m.numel, static_cast<int>(n), param_bpe, k).total();
      std::snprintf(line, sizeof line, "%6lld  %-8s %10s %10s %10s %10s %10s %10s %12s\n",
                    static_cast<long long>(n), dist::strategy_name(kind),
                    mib(static_cast<double>(m.param_bytes)).c_str(),
                    mib(static_cast<double>(m.grad_bytes)).c_str(),
                    mib(static_cast<double>(m.optimizer_state_bytes)).c_str(),
                    mib(static_cast<double>(m.master_weight_bytes)).c_str(), mib(device).c_str(),
                    mib(static_cast<double>(m.offloaded_bytes)).c_str(), mib(paper).c_str());
      out += line;
    }
  }
  out +=
      "device: params + grads + optimizer + masters; host: the offloaded optimizer state, "
      "masters and the step's copies (--offload-optimizer 1); ZeRO paper: (2 or 4 + K) Psi "
      "bytes with the state on the device, K = ";
  out += std::to_string(static_cast<int>(k)) + " (" + opt.name() + (params_16 ? ", masters" : "") +
         ")\n";
  return out;
}

}  // namespace sl::train
