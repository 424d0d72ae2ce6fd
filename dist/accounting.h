// The ZeRO paper's memory model (Rajbhandari et al., arXiv 1910.02054, section 3 and Figure 1),
// to print next to what a strategy measures (Strategy::memory_report).
//
// For Psi parameters trained with Adam on N ranks, the per-rank bytes of model states are:
//   fp32 training (K = 8: two fp32 moments):
//     ddp    params 4 Psi + grads 4 Psi     + optimizer 8 Psi      = 16 Psi
//     zero1  params 4 Psi + grads 4 Psi     + optimizer 8 Psi / N
//     zero2  params 4 Psi + grads 4 Psi / N + optimizer 8 Psi / N
//   mixed precision (f16/bf16 parameters and gradients, K = 12: fp32 master + two moments):
//     ddp    2 Psi + 2 Psi     + 12 Psi      = 16 Psi
//     zero1  2 Psi + 2 Psi     + 12 Psi / N  = 4 Psi + 12 Psi / N
//     zero2  2 Psi + 2 Psi / N + 12 Psi / N  = 2 Psi + 14 Psi / N
// (single and dp keep what ddp keeps, per device.) SGD with momentum has K = 4 (8 with a master).
// Communication per step and rank, in the same accounting: ddp all-reduces 2 Psi elements
// (reduce-scatter + all-gather), zero1 and zero2 reduce-scatter Psi and all-gather Psi: the same
// 2 Psi.
#pragma once

#include <cstdint>
#include <string>

#include "dist/strategy.h"

namespace sl::dist {

struct MemoryPrediction {
  double param_bytes = 0;
  double grad_bytes = 0;
  double optimizer_state_bytes = 0;  ///< including fp32 master weights
  double total() const { return param_bytes + grad_bytes + optimizer_state_bytes; }
};

/// The paper's per-rank bytes for `psi` parameters on `n` ranks. `param_bytes_per_element` is 4
/// (fp32) or 2 (f16/bf16); `state_bytes_per_element` is K (8 for fp32 Adam, 12 for mixed
/// precision Adam with master weights, 4 for fp32 SGD with momentum).
MemoryPrediction predict_memory(StrategyKind kind, int64_t psi, int n,
                                double param_bytes_per_element, double state_bytes_per_element);

/// Relative difference |measured - predicted| / predicted of each category, worst first.
struct MemoryComparison {
  double param_rel = 0, grad_rel = 0, state_rel = 0;
  double worst() const;
  std::string str() const;
};
MemoryComparison compare_memory(const MemoryReport& measured, const MemoryPrediction& predicted);

/// Per-rank bytes of model states that strategy `kind` will hold for `model` trained by `opt` on
/// `world_size` ranks with `opts` (bucket caps, offload_optimizer; the other options change no
/// model state), from the layout rules (Note [Flat buffer layout]) and each optimizer group's
/// state_tensors / master_weights, without allocating, moving or communicating anything: what
/// Strategy::memory_report() reports after the first step, to the byte, in numel, param_bytes,
/// grad_bytes, optimizer_state_bytes, master_weight_bytes and offloaded_bytes (optimizer state,
/// masters and working copies on the host when opts.offload_optimizer; allowed whatever the
/// model's device, so a plan for GPUs can be made on a CPU). Not estimated (left 0): the
/// buffers in flight during a step (comm_buffer_bytes; zero1 adds its gradient shard there,
/// not counted here either) and activations (allocator_peak_bytes). single and dp report one
/// device (dp: the model's, which keeps the optimizer state; the other replicas hold parameters
/// and gradients only). Throws ValueError for world_size < 1, single with world_size
/// != 1, offload_optimizer with single/dp/ddp, a bucket cap < 1, an optimizer zero1/zero2
/// cannot shard, or trainable parameters and optimizer that do not match (as make_strategy).
MemoryReport estimate_memory(StrategyKind kind, const nn::Module& model,
                             const optim::Optimizer& opt, int world_size,
                             const StrategyOptions& opts = {});

}  // namespace sl::dist
