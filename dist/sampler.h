// DistributedSampler / DistributedLoader: each rank's disjoint share of every global batch.
//
// The global order of epoch e is the one nn::DataLoader uses (Note [Data order]: randperm(n)
// from a Generator in state {seed, e << 32}, identity without shuffle), and global batch b is
// order[b * G, (b + 1) * G) for the global batch size G. Rank r of N takes the contiguous slice
// [r * len / N, (r + 1) * len / N) of each global batch. So the global batches do not depend on
// N: a run on 1, 2 or 3 ranks (or a single-process DataLoader with batch size G and the same
// seed) sees the same examples in the same steps, and with G divisible by N every rank's
// share is equal, so averaging the ranks' mean-loss gradients gives the global batch's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "nn/data.h"

namespace sl::dist {

struct DistributedSamplerOptions {
  int64_t global_batch_size = 1;
  bool shuffle = true;
  /// Drop the last, smaller global batch of each epoch (keeps every step's batch size equal).
  bool drop_last = true;
  uint64_t seed = 0;
};

class DistributedSampler {
 public:
  /// Throws ValueError for a negative dataset size, a global batch size < 1, or a rank outside
  /// [0, world_size).
  DistributedSampler(int64_t dataset_size, int rank, int world_size,
                     DistributedSamplerOptions opts);
  int64_t batches_per_epoch() const;
  /// The global example order of `epoch` (the same for every rank and world size).
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  /// Global batch b of `epoch` (IndexError outside [0, batches_per_epoch())).
  std::vector<int64_t> global_batch(int64_t epoch, int64_t b) const;
  /// This rank's share of global batch b.
  std::vector<int64_t> local_batch(int64_t epoch, int64_t b) const;
  /// The share of `rank` (any rank) of global batch b.
  std::vector<int64_t> share(int64_t epoch, int64_t b, int rank) const;
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  const DistributedSamplerOptions& options() const { return opts_; }

 private:
  int64_t n_;
  int rank_;
  int world_size_;
  DistributedSamplerOptions opts_;
};

/// DataLoader-like iteration over this rank's shares: next() returns this rank's part of the
/// next global batch (synchronously), position() / set_position() use nn::DataPosition with
/// the global batch index, so checkpoints resume at the same global batch at any world size.
class DistributedLoader {
 public:
  DistributedLoader(std::shared_ptr<const nn::Dataset> dataset, int rank, int world_size,
                    DistributedSamplerOptions opts);
  /// This rank's share of the next global batch, or nullopt at the end of the epoch (the
  /// position then moves to the next epoch). A rank whose share is empty (a last partial batch
  /// smaller than N without drop_last) gets an empty optional too, so avoid that with drop_last.
  std::optional<nn::Batch> next();
  nn::DataPosition position() const { return pos_; }
  /// Throws ValueError when pos.seed differs from the sampler's or the batch is out of range.
  void set_position(const nn::DataPosition& pos);
  const DistributedSampler& sampler() const { return sampler_; }

 private:
  std::shared_ptr<const nn::Dataset> dataset_;
  DistributedSampler sampler_;
  nn::DataPosition pos_;
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
};

}  // namespace sl::dist
