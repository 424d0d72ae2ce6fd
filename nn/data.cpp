#include "nn/data.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "core/creation.h"
#include "core/random.h"

namespace sl::nn {

Dataset::~Dataset() = default;

// ---- TensorDataset --------------------------------------------------------------------------

TensorDataset::TensorDataset(TensorList tensors) : tensors_(std::move(tensors)) {
  SL_CHECK(!tensors_.empty(), "TensorDataset: at least one tensor is needed");
  for (size_t i = 0; i < tensors_.size(); ++i) {
    Tensor& t = tensors_[i];
    SL_CHECK(t.defined(), "TensorDataset: tensor ", i, " is undefined");
    SL_CHECK_DEVICE(t.is_cpu(), "TensorDataset: tensor ", i, " is on ", t.device(),
                    "; datasets hold CPU tensors (move batches to the device)");
    SL_CHECK_SHAPE(t.dim() >= 1, "TensorDataset: tensor ", i, " is 0-d; each needs a leading dim");
    SL_CHECK_SHAPE(t.size(0) == tensors_[0].size(0), "TensorDataset: tensor ", i,
                   " has leading size ", t.size(0), " but tensor 0 has ", tensors_[0].size(0));
    t = t.detach().contiguous();
  }
  size_ = tensors_[0].size(0);
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  for (int64_t i : indices) {
    SL_CHECK_INDEX(i >= 0 && i < size_, "TensorDataset: index ", i, " out of range for ", size_,
                   " examples");
  }
  Batch out;
  for (const Tensor& t : tensors_) {
    Shape sizes = t.sizes();
    sizes[0] = static_cast<int64_t>(indices.size());
    Tensor b = empty(sizes, {.dtype = t.dtype()});
    size_t row = t.nbytes() / static_cast<size_t>(std::max<int64_t>(size_, 1));
    const auto* src = static_cast<const char*>(t.data_ptr());
    auto* dst = static_cast<char*>(b.data_ptr());
    for (size_t k = 0; k < indices.size(); ++k) {
      std::memcpy(dst + k * row, src + static_cast<size_t>(indices[k]) * row, row);
    }
    out.push_back(b);
  }
  return out;
}

// ---- DataLoader --------------------------------------------------------------------------------

/// Prepares batches [first, end) of one epoch, in order, up to `capacity` ahead.
struct DataLoader::Worker {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Batch> ready;
  size_t capacity = 1;
  bool stop = false;
  bool finished = false;
  std::exception_ptr error;
  int64_t epoch = 0;
  std::thread thread;
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions opts)
    : dataset_(std::move(dataset)), opts_(opts) {
  SL_CHECK(dataset_ != nullptr, "DataLoader: the dataset is null");
  SL_CHECK(opts_.batch_size >= 1, "DataLoader: batch_size must be >= 1, got ", opts_.batch_size);
  SL_CHECK(opts_.prefetch >= 0, "DataLoader: prefetch must be >= 0, got ", opts_.prefetch);
  pos_.seed = opts_.seed;
}

DataLoader::~DataLoader() {
  stop_worker();
}

int64_t DataLoader::batches_per_epoch() const {
  int64_t n = dataset_->size(), b = opts_.batch_size;
  return opts_.drop_last ? n / b : (n + b - 1) / b;
}

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  int64_t n = dataset_->size();
  if (!opts_.shuffle) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
    return order;
  }
  Generator gen(pos_.seed);
  gen.set_state({pos_.seed, static_cast<uint64_t>(epoch) << 32});
  return randperm(n, {.dtype = DType::i64}, &gen).to_vector<int64_t>();
}

std::vector<int64_t> DataLoader::batch_indices(const std::vector<int64_t>& order, int64_t b) const {
  int64_t n = static_cast<int64_t>(order.size());
  int64_t lo = b * opts_.batch_size, hi = std::min(n, lo + opts_.batch_size);
  return std::vector<int64_t>(order.begin() + lo, order.begin() + hi);
}

void DataLoader::stop_worker() {
  if (!worker_) return;
  {
    std::lock_guard<std::mutex> lock(worker_->mu);
    worker_->stop = true;
  }
  worker_->cv.notify_all();
  if (worker_->thread.joinable()) worker_->thread.join();
  worker_.reset();
}

void DataLoader::set_position(const DataPosition& pos) {
  SL_CHECK(pos.epoch >= 0, "DataLoader::set_position: epoch must be >= 0, got ", pos.epoch);
  SL_CHECK(pos.batch >= 0 && pos.batch <= batches_per_epoch(), "DataLoader::set_position: batch ",
           pos.batch, " is outside [0, ", batches_per_epoch(), "]");
  stop_worker();
  pos_ = pos;
}

std::optional<Batch> DataLoader::next() {
  int64_t nb = batches_per_epoch();
  if (pos_.batch >= nb) {
    stop_worker();
    pos_.epoch += 1;
    pos_.batch = 0;
    return std::nullopt;
  }
  if (opts_.prefetch == 0) {
    Batch b = dataset_->get_batch(batch_indices(epoch_order(pos_.epoch), pos_.batch));
    pos_.batch += 1;
    return b;
  }
  if (!worker_) {
    worker_ = std::make_unique<Worker>();
    worker_->capacity = static_cast<size_t>(opts_.prefetch);
    worker_->epoch = pos_.epoch;
    Worker* w = worker_.get();
    std::vector<int64_t> order = epoch_order(pos_.epoch);
    int64_t first = pos_.batch;
    w->thread = std::thread([this, w, order = std::move(order), first, nb] {
      for (int64_t b = first; b < nb; ++b) {
        {
          std::unique_lock<std::mutex> lock(w->mu);
          w->cv.wait(lock, [w] { return w->stop || w->ready.size() < w->capacity; });
          if (w->stop) return;
        }
        Batch batch;
        try {
          batch = dataset_->get_batch(batch_indices(order, b));
        } catch (...) {
          std::lock_guard<std::mutex> lock(w->mu);
          w->error = std::current_exception();
          w->finished = true;
          w->cv.notify_all();
          return;
        }
        std::lock_guard<std::mutex> lock(w->mu);
        w->ready.push_back(std::move(batch));
        w->cv.notify_all();
      }
      std::lock_guard<std::mutex> lock(w->mu);
      w->finished = true;
      w->cv.notify_all();
    });
  }
  Worker* w = worker_.get();
  std::unique_lock<std::mutex> lock(w->mu);
  w->cv.wait(lock, [w] { return !w->ready.empty() || w->finished; });
  if (w->ready.empty()) {
    std::exception_ptr err = w->error;
    lock.unlock();
    stop_worker();  // the next call starts over at the failed batch
    if (err) std::rethrow_exception(err);
    detail::throw_error<ValueError>("DataLoader: the background thread stopped early");
  }
  Batch b = std::move(w->ready.front());
  w->ready.pop_front();
  w->cv.notify_all();
  lock.unlock();
  pos_.batch += 1;
  return b;
}

}  // namespace sl::nn
