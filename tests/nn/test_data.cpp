// Dataset / DataLoader: batching, shuffling, drop_last, background prefetch, exact resume.
#include <atomic>
#include <set>

#include "nn/data.h"
#include "support/testing.h"

using namespace sl;

namespace {
std::shared_ptr<nn::TensorDataset> numbers(int64_t n) {
  Tensor x = arange(0, n, 1, {.dtype = DType::f32}).view({n, 1}) * 10.0;
  Tensor y = arange(0, n, 1, {.dtype = DType::i64});
  return std::make_shared<nn::TensorDataset>(TensorList{x, y});
}

std::vector<std::vector<int64_t>> run_epoch(nn::DataLoader& dl) {
  std::vector<std::vector<int64_t>> out;
  while (auto b = dl.next()) {
    out.push_back((*b)[1].to_vector<int64_t>());
    // Both tensors of a batch describe the same examples.
    std::vector<float> x = (*b)[0].to_vector<float>();
    for (size_t i = 0; i < x.size(); ++i) CHECK(x[i] == 10.0f * static_cast<float>(out.back()[i]));
  }
  return out;
}
}  // namespace

TEST_CASE("sequential batches with and without drop_last") {
  nn::DataLoader a(numbers(10), {.batch_size = 4});
  CHECK(a.batches_per_epoch() == 3);
  auto e = run_epoch(a);
  CHECK(e == std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}});
  CHECK(a.position() == nn::DataPosition{0, 1, 0});
  nn::DataLoader b(numbers(10), {.batch_size = 4, .drop_last = true, .prefetch = 0});
  CHECK(run_epoch(b) == std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}});
}

TEST_CASE("shuffling is a permutation per epoch, fixed by the seed") {
  auto ds = numbers(100);
  nn::DataLoader a(ds, {.batch_size = 7, .shuffle = true, .seed = 11});
  nn::DataLoader b(ds, {.batch_size = 7, .shuffle = true, .seed = 11, .prefetch = 0});
  nn::DataLoader c(ds, {.batch_size = 7, .shuffle = true, .seed = 12});
  auto a0 = run_epoch(a), a1 = run_epoch(a);
  auto b0 = run_epoch(b), b1 = run_epoch(b);
  CHECK(a0 == b0);  // background thread or not, same batches
  CHECK(a1 == b1);
  CHECK(a0 != a1);  // a new order each epoch
  CHECK(run_epoch(c) != a0);
  std::set<int64_t> seen;
  for (auto& batch : a0) seen.insert(batch.begin(), batch.end());
  CHECK(seen.size() == 100);
}

TEST_CASE("set_position resumes exactly") {
  auto ds = numbers(50);
  nn::DataLoaderOptions opts{.batch_size = 4, .shuffle = true, .seed = 3};
  nn::DataLoader full(ds, opts);
  auto e0 = run_epoch(full), e1 = run_epoch(full);
  // Stop mid-epoch 1 with batches prefetched, save the position, resume in a fresh loader.
  nn::DataLoader first(ds, opts);
  run_epoch(first);
  std::vector<std::vector<int64_t>> got;
  for (int i = 0; i < 5; ++i) got.push_back((*first.next())[1].to_vector<int64_t>());
  nn::DataPosition saved = first.position();
  CHECK(saved == nn::DataPosition{3, 1, 5});
  nn::DataLoader resumed(ds, {.batch_size = 4, .shuffle = true, .seed = 999});
  resumed.set_position(saved);  // the seed travels with the position
  auto rest = run_epoch(resumed);
  got.insert(got.end(), rest.begin(), rest.end());
  CHECK(got == e1);
  SL_CHECK_THROWS(resumed.set_position({3, 0, 14}), ValueError, "batch 14 is outside [0, 13]");
}

namespace {
struct Flaky : nn::Dataset {
  int64_t size() const override { return 8; }
  nn::Batch get_batch(const std::vector<int64_t>& idx) const override {
    for (int64_t i : idx) SL_CHECK(i != 5, "Flaky: example ", i, " is corrupt");
    return {from_vector(idx)};
  }
};
}  // namespace

TEST_CASE("errors from the background thread reach the caller") {
  nn::DataLoader dl(std::make_shared<Flaky>(), {.batch_size = 2, .prefetch = 3});
  CHECK(dl.next().has_value());
  CHECK(dl.next().has_value());
  SL_CHECK_THROWS(dl.next(), ValueError, "Flaky: example 5 is corrupt");
  CHECK(dl.position().batch == 2);  // the failed batch was not consumed
}

TEST_CASE("dataset and loader argument errors") {
  SL_CHECK_THROWS(nn::TensorDataset({}), ValueError, "at least one tensor");
  SL_CHECK_THROWS(nn::TensorDataset({zeros({3}), zeros({4})}), ShapeError,
                  "tensor 1 has leading size 4 but tensor 0 has 3");
  SL_CHECK_THROWS(nn::DataLoader(numbers(3), {.batch_size = 0}), ValueError,
                  "batch_size must be >= 1");
  SL_CHECK_THROWS(numbers(3)->get_batch({3}), IndexError, "index 3 out of range for 3 examples");
}
