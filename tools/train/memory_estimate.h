// The trainer's --estimate-memory N: a table of the model-state bytes per rank each strategy would
// hold for the job's model, precision, optimizer and buckets on 1, 2, 4, ..., N ranks
// (dist::estimate_memory, exact to the byte after the first step), beside the ZeRO paper's
// formula, then the activations of one forward and backward of each rank count's micro-batch as
// measured on the run's device; the run then exits without training, so it answers "which mode
// fits on how many GPUs" on any machine (activations are measured, so on the device planned for
// they are exact only when measured there).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/strategy.h"

namespace sl::train {

/// The table, one line per (ranks, strategy): single on 1 rank, ddp/zero1/zero2 on 2, 4, ...,
/// `max_ranks` (powers of two, then max_ranks itself). zero1/zero2 rows offload when
/// opts.offload_optimizer (their optimizer bytes in the host column). The paper's column takes K =
/// 4 bytes per float32 state tensor of `opt` (Optimizer::state_tensors: AdamW and Lamb 2, SGD 1
/// with momentum and 0 without), plus 4 for the fp32 master when `params_16` (f16/bf16
/// parameters): AdamW 8 or 12, SGD with momentum 4 or 8. Throws ValueError for max_ranks < 1.
std::string memory_estimate_table(const nn::Module& model, const optim::Optimizer& opt,
                                  const dist::StrategyOptions& opts, int64_t max_ranks,
                                  bool params_16);

/// The rank counts of the table: 1, 2, 4, ... below max_ranks, then max_ranks.
std::vector<int64_t> estimate_rank_counts(int64_t max_ranks);

/// What one forward and backward of a rank's micro-batch allocated on its device beyond what stays
/// allocated after it (the gradients): activations kept for backward and temporaries, at the
/// allocator's peak. bytes < 0: not measured (`why` says why).
struct ActivationSample {
  int64_t ranks = 1;
  int64_t micro_batch = 0;
  int64_t bytes = -1;
  std::string why;
};

/// The samples as a table under the model states' one, naming the device they were measured on.
std::string activation_table(const std::vector<ActivationSample>& samples, const Device& device);

}  // namespace sl::train
