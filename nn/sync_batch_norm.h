// Synchronised batch normalisation: BatchNorm whose training statistics cover the batches of
// every process, as torch.nn.SyncBatchNorm.
//
// Note [SyncBatchNorm]
// Under data parallelism each rank normalises with the statistics of its own share of the
// batch; with small shares (detection, segmentation, 3-D inputs: a few images per GPU) those
// statistics are noisy and the model trains worse than on the whole batch. SyncBatchNorm
// computes them over the global batch:
// - forward (training only): each rank computes per channel its count n_r, sum s_r and sum of
//   squared deviations from its own mean m2_r (one pass of batch_norm's fused kernel); one
//   all_gather of those 2C + 1 values as float64;
//   every rank combines them alike (Chan et al.'s parallel variance: M2 = sum_r m2_r +
//   n_r (s_r / n_r - mean)^2), normalises with the global mean and biased variance and updates
//   the running statistics with the unbiased one, exactly as BatchNorm on the concatenated
//   batch would. Ranks may hold different numbers of rows (even none); the global count must
//   exceed 1.
// - backward: the local sums of dy and dy * (x - mean) are all-reduced (2C values); the input
//   gradient uses the global sums, the weight and bias gradients stay local (the strategy
//   averages them with every other gradient), so ddp + SyncBatchNorm on N ranks computes the
//   gradient of single-process training on the whole batch (tests/dist/ranks).
// - evaluation (and a world of one) is plain BatchNorm: no communication.
// Cost: besides the two collectives per layer (latency-bound: 2C + 1 and 2C values), two more
// passes over the activation each way than BatchNorm's fused kernels (the statistics, then the
// normalisation; backward: the local sums, then the input gradient). The gathered rows are
// combined in float64 on the input's device, so on a GPU the forward does not wait for the
// all_gather on the host; only a rank with at most one value per channel reads the counts back
// (the global count can be 1 or less only if every rank's is, so then every rank checks it and
// throws alike).
// nn never sees a process group: layers hold a StatsSync, which dist implements over one
// (dist/stats_sync.h), and a Strategy with `sync_batchnorm` installs it in every BatchNorm of
// the model, so model code does not change. Every rank must run the same BatchNorm layers in
// the same order, as with any collective; a rank that does not reaches the group's timeout.
#pragma once

#include <memory>

#include "core/tensor.h"

namespace sl::nn {

class Module;

/// How SyncBatchNorm combines values across processes. Both calls block until every rank has
/// made the same call; implementations must keep the ranks' calls in one order.
class StatsSync {
 public:
  virtual ~StatsSync();
  /// Number of processes (1: nothing to combine).
  virtual int world_size() const = 0;
  /// Every rank's `local` (1-d, same numel and dtype on every rank), stacked in rank order:
  /// [world_size, numel].
  virtual Tensor all_gather(const Tensor& local) = 0;
  /// `t` (contiguous) becomes its sum over the ranks, in place.
  virtual void all_reduce_sum(const Tensor& t) = 0;
};
using StatsSyncPtr = std::shared_ptr<StatsSync>;

/// Training-mode batch norm of `input` [N, C, *] with the statistics of every rank's input
/// (Note [SyncBatchNorm]); updates running_mean / running_var (when defined) with `momentum`.
/// 16-bit inputs are computed in float32 and returned in their dtype. Throws as batch_norm for
/// bad shapes or dtypes (before any communication), ValueError when the ranks hold one value
/// per channel or fewer in all, and what `sync` throws (a timeout) otherwise.
Tensor sync_batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, double momentum, double eps,
                       const StatsSyncPtr& sync);

/// Makes every BatchNorm1d / BatchNorm2d in `module`'s tree synchronise its training statistics
/// through `sync` (nullptr: back to local statistics), as SyncBatchNorm.convert_sync_batchnorm
/// without replacing modules (names, parameters and buffers stay). Returns how many layers.
int64_t convert_sync_batchnorm(Module& module, StatsSyncPtr sync);

}  // namespace sl::nn
