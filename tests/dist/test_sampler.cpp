// DistributedSampler: the global batches do not depend on the world size and equal
// nn::DataLoader's; ranks' shares are disjoint and cover each global batch.
#include <algorithm>
#include <set>

#include "../support/testing.h"
#include "dist/sampler.h"

using namespace sl;
using namespace sl::dist;

TEST_CASE("sampler: same global batches at any world size, equal to nn::DataLoader's") {
  const int64_t n = 50, G = 6;
  auto ds = std::make_shared<nn::TensorDataset>(TensorList{arange(n)});
  nn::DataLoader loader(
      ds, {.batch_size = G, .shuffle = true, .drop_last = true, .seed = 9, .prefetch = 0});
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::vector<int64_t>> ref;
    while (auto b = loader.next()) ref.push_back((*b)[0].to_vector<int64_t>());
    REQUIRE(ref.size() == 8);
    for (int w : {1, 2, 3, 4}) {
      for (size_t b = 0; b < ref.size(); ++b) {
        std::vector<int64_t> joined;
        for (int r = 0; r < w; ++r) {
          DistributedSampler s(n, r, w, {.global_batch_size = G, .seed = 9});
          CHECK(s.batches_per_epoch() == 8);
          auto part = s.local_batch(epoch, static_cast<int64_t>(b));
          if (G % w == 0) CHECK(part.size() == static_cast<size_t>(G / w));
          joined.insert(joined.end(), part.begin(), part.end());
        }
        CHECK(joined == ref[b]);  // contiguous shares, in rank order, rebuild the global batch
      }
    }
  }
}

TEST_CASE("sampler: without shuffle, a partial last batch, and the loader") {
  DistributedSampler s(7, 1, 2, {.global_batch_size = 4, .shuffle = false, .drop_last = false});
  CHECK(s.batches_per_epoch() == 2);
  CHECK(s.local_batch(0, 0) == std::vector<int64_t>{2, 3});
  CHECK(s.global_batch(0, 1) == std::vector<int64_t>{4, 5, 6});
  CHECK(s.local_batch(0, 1) == std::vector<int64_t>{5, 6});  // [3*1/2, 3*2/2) = [1, 3)
  CHECK(s.share(0, 1, 0) == std::vector<int64_t>{4});

  auto ds = std::make_shared<nn::TensorDataset>(TensorList{arange(10)});
  DistributedLoader dl(ds, 1, 2, {.global_batch_size = 4, .seed = 3});
  DistributedSampler ref(10, 1, 2, {.global_batch_size = 4, .seed = 3});
  auto b0 = dl.next();
  REQUIRE(b0);
  CHECK((*b0)[0].to_vector<int64_t>() == ref.local_batch(0, 0));
  nn::DataPosition pos = dl.position();
  auto b1 = dl.next();
  CHECK(!dl.next());  // 10 / 4 = 2 batches with drop_last
  CHECK(dl.position().epoch == 1);
  DistributedLoader resumed(ds, 1, 2, {.global_batch_size = 4, .seed = 3});
  resumed.set_position(pos);
  CHECK((*resumed.next())[0].to_vector<int64_t>() == (*b1)[0].to_vector<int64_t>());
  SL_CHECK_THROWS(resumed.set_position({.seed = 4}), ValueError,
                  "seed 4 differs from the loader's 3");
}

TEST_CASE("sampler: errors") {
  SL_CHECK_THROWS(DistributedSampler(5, 2, 2, {}), ValueError,
                  "DistributedSampler: rank 2 is not in [0, 2)");
  SL_CHECK_THROWS(DistributedSampler(5, 0, 1, {.global_batch_size = 0}), ValueError,
                  "global_batch_size must be >= 1, got 0");
  DistributedSampler s(5, 0, 1, {.global_batch_size = 2});
  SL_CHECK_THROWS(s.global_batch(0, 2), IndexError, "DistributedSampler: batch 2 is not in [0, 2)");
}
