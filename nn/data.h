// Datasets and the DataLoader: batching, shuffling from a seeded Philox generator, drop_last,
// a background thread that prepares the next batches, and a position that checkpoints save and
// restore exactly.
//
// Note [Data order]
// The order of epoch e is a pure function of (seed, e): randperm(n) drawn from a Generator whose
// state is {seed, e << 32} (identity order without shuffle). A DataPosition {seed, epoch, batch}
// therefore pins down every batch still to come, and set_position() on a fresh loader continues
// exactly where the saved one stopped: the resumed run sees the same batches in the same order,
// bit for bit. The background thread only computes batches ahead; it never changes which batches
// come next.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace sl::nn {

/// One batch: the dataset's tensors for the chosen examples, stacked along a new leading dim
/// (e.g. {images [B, 1, 28, 28], labels [B]}).
using Batch = std::vector<Tensor>;

/// A source of examples addressed by index 0..size()-1. get_batch may run on the loader's
/// background thread, so it must not touch state shared with the training thread without
/// locking (reading immutable data, as TensorDataset does, is fine).
class Dataset {
 public:
  virtual ~Dataset();
  virtual int64_t size() const = 0;
  /// The examples at `indices`, in that order, as one batch.
  virtual Batch get_batch(const std::vector<int64_t>& indices) const = 0;
};

/// Examples are the rows (leading-dim slices) of CPU tensors that share their leading size, as
/// torch.utils.data.TensorDataset. Throws ValueError for no tensors or undefined ones,
/// ShapeError for differing leading sizes or 0-d tensors, DeviceError for non-CPU tensors.
class TensorDataset : public Dataset {
 public:
  explicit TensorDataset(TensorList tensors);
  int64_t size() const override { return size_; }
  /// Throws IndexError for an index outside [0, size()).
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  const TensorList& tensors() const { return tensors_; }

 private:
  TensorList tensors_;
  int64_t size_ = 0;
};

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  /// Drop the last, smaller batch of each epoch.
  bool drop_last = false;
  /// Seed of the shuffling generator (Note [Data order]).
  uint64_t seed = 0;
  /// Batches prepared ahead by the background thread; 0 prepares them on the calling thread.
  int64_t prefetch = 2;
};

/// Where a loader stands: the next batch next() returns is batch `batch` of epoch `epoch`.
struct DataPosition {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t batch = 0;
  bool operator==(const DataPosition&) const = default;
};

class DataLoader {
 public:
  /// Throws ValueError for a null dataset, batch_size < 1 or prefetch < 0.
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions opts);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Batches in one epoch (the last partial one counted unless drop_last).
  int64_t batches_per_epoch() const;
  /// The next batch of the current epoch, or nullopt when the epoch is over; after nullopt the
  /// position is the start of the next epoch, so `while (auto b = loader.next())` runs one
  /// epoch per loop. Rethrows (once) any error the dataset raised while preparing a batch.
  std::optional<Batch> next();
  /// The position of the batch the next call to next() returns.
  DataPosition position() const { return pos_; }
  /// Continues from `pos` (stopping any work in flight). Throws ValueError when pos.epoch < 0
  /// or pos.batch is outside [0, batches_per_epoch()].
  void set_position(const DataPosition& pos);
  /// The example order of `epoch` (Note [Data order]).
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  const DataLoaderOptions& options() const { return opts_; }

 private:
  struct Worker;
  void stop_worker();
  std::vector<int64_t> batch_indices(const std::vector<int64_t>& order, int64_t b) const;

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions opts_;
  DataPosition pos_;
  std::unique_ptr<Worker> worker_;
};

}  // namespace sl::nn
