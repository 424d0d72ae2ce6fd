#include "dist/sampler.h"

#include <algorithm>

#include "core/creation.h"
#include "core/random.h"

namespace sl::dist {

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank, int world_size,
                                       DistributedSamplerOptions opts)
    : n_(dataset_size), rank_(rank), world_size_(world_size), opts_(opts) {
  SL_CHECK(dataset_size >= 0, "DistributedSampler: dataset size must be >= 0, got ", dataset_size);
  SL_CHECK(opts.global_batch_size >= 1, "DistributedSampler: global_batch_size must be >= 1, got ",
           opts.global_batch_size);
  SL_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "DistributedSampler: rank ", rank,
           " is not in [0, ", world_size, ")");
}

int64_t DistributedSampler::batches_per_epoch() const {
  int64_t g = opts_.global_batch_size;
  return opts_.drop_last ? n_ / g : (n_ + g - 1) / g;
}

std::vector<int64_t> DistributedSampler::epoch_order(int64_t epoch) const {
  if (!opts_.shuffle) {
    std::vector<int64_t> order(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) order[static_cast<size_t>(i)] = i;
    return order;
  }
  // Exactly nn::DataLoader::epoch_order (Note [Data order]).
  Generator gen(opts_.seed);
  gen.set_state({opts_.seed, static_cast<uint64_t>(epoch) << 32});
  return randperm(n_, {.dtype = DType::i64}, &gen).to_vector<int64_t>();
}

std::vector<int64_t> DistributedSampler::global_batch(int64_t epoch, int64_t b) const {
  SL_CHECK_INDEX(b >= 0 && b < batches_per_epoch(), "DistributedSampler: batch ", b,
                 " is not in [0, ", batches_per_epoch(), ")");
  std::vector<int64_t> order = epoch_order(epoch);
  int64_t lo = b * opts_.global_batch_size;
  int64_t hi = std::min(n_, lo + opts_.global_batch_size);
  return std::vector<int64_t>(order.begin() + lo, order.begin() + hi);
}

std::vector<int64_t> DistributedSampler::share(int64_t epoch, int64_t b, int rank) const {
  SL_CHECK_INDEX(rank >= 0 && rank < world_size_, "DistributedSampler: rank ", rank,
                 " is not in [0, ", world_size_, ")");
  std::vector<int64_t> g = global_batch(epoch, b);
  int64_t len = static_cast<int64_t>(g.size());
  int64_t lo = rank * len / world_size_, hi = (rank + 1) * len / world_size_;
  return std::vector<int64_t>(g.begin() + lo, g.begin() + hi);
}

std::vector<int64_t> DistributedSampler::local_batch(int64_t epoch, int64_t b) const {
  return share(epoch, b, rank_);
}

DistributedLoader::DistributedLoader(std::shared_ptr<const nn::Dataset> dataset, int rank,
                                     int world_size, DistributedSamplerOptions opts)
    : dataset_(std::move(dataset)),
      sampler_(dataset_ ? dataset_->size() : 0, rank, world_size, opts) {
  SL_CHECK(dataset_ != nullptr, "DistributedLoader: dataset is null");
  pos_.seed = opts.seed;
}

std::optional<nn::Batch> DistributedLoader::next() {
  if (pos_.batch >= sampler_.batches_per_epoch()) {
    pos_.epoch += 1;
    pos_.batch = 0;
    return std::nullopt;
  }
  if (order_epoch_ != pos_.epoch) {
    order_ = sampler_.epoch_order(pos_.epoch);
    order_epoch_ = pos_.epoch;
  }
  int64_t g = sampler_.options().global_batch_size;
  int64_t n = static_cast<int64_t>(order_.size());
  int64_t lo = pos_.batch * g, hi = std::min(n, lo + g);
  int64_t len = hi - lo, r = sampler_.rank(), w = sampler_.world_size();
  std::vector<int64_t> idx(order_.begin() + lo + r * len / w,
                           order_.begin() + lo + (r + 1) * len / w);
  pos_.batch += 1;
  if (idx.empty()) return std::nullopt;
  return dataset_->get_batch(idx);
}

void DistributedLoader::set_position(const nn::DataPosition& pos) {
  SL_CHECK(pos.seed == sampler_.options().seed, "DistributedLoader::set_position: seed ", pos.seed,
           " differs from the loader's ", sampler_.options().seed);
  SL_CHECK(pos.epoch >= 0 && pos.batch >= 0 && pos.batch <= sampler_.batches_per_epoch(),
           "DistributedLoader::set_position: epoch ", pos.epoch, " batch ", pos.batch,
           " is out of range (", sampler_.batches_per_epoch(), " batches per epoch)");
  pos_ = pos;
}

}  // namespace sl::dist
