// Masked-LM inputs (models/mlm.h): BERT's 15% / 80-10-10 rule checked statistically, special ids
// never chosen, labels, the keyed draws of Note [MLM row keys], and bad input.
#include <cmath>
#include <cstdint>
#include <vector>

#include "models/mlm.h"
#include "support/testing.h"

using namespace sl;

namespace {

constexpr int64_t kVocab = 1000, kMask = 4, kCls = 2, kSep = 3;

models::MlmMaskingOptions options() {
  return {.mask_id = kMask, .vocab_size = kVocab, .never_mask = {0, kCls, kSep}};
}

/// Rows of L ids: [CLS] w ... w [SEP] with words from 10..kVocab-1 (a fixed LCG).
Tensor rows(int64_t B, int64_t L, uint32_t seed = 7) {
  std::vector<int64_t> v(static_cast<size_t>(B * L));
  uint32_t s = seed;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < L; ++t) {
      s = s * 1664525u + 1013904223u;
      v[b * L + t] = t == 0 ? kCls : t == L - 1 ? kSep : 10 + (s >> 8) % (kVocab - 10);
    }
  }
  return from_vector(v, {B, L});
}

/// Equal shapes and int64 values.
bool same(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.to_vector<int64_t>() == b.to_vector<int64_t>();
}

std::vector<uint64_t> keys(int64_t B, int64_t epoch = 0) {
  std::vector<uint64_t> k;
  for (int64_t b = 0; b < B; ++b) k.push_back(models::mlm_row_key(5, epoch, b));
  return k;
}

}  // namespace

TEST_CASE("mlm masking follows BERT's 15% and 80/10/10 rule") {
  const int64_t B = 200, L = 102;  // 100 eligible positions per row: n = 20000 trials
  Tensor ids = rows(B, L);
  auto kk = keys(B);
  models::MlmBatch m = models::mask_for_mlm(ids, kk, options());
  const int64_t* in = ids.data_ptr<int64_t>();
  const int64_t* out = m.input_ids.data_ptr<int64_t>();
  const int64_t* lab = m.labels.data_ptr<int64_t>();
  int64_t chosen = 0, masked = 0, replaced = 0, kept = 0;
  for (int64_t i = 0; i < B * L; ++i) {
    const bool special = in[i] == kCls || in[i] == kSep;
    if (lab[i] == -100) {
      CHECK(out[i] == in[i]);  // not chosen: unchanged
      continue;
    }
    CHECK_FALSE(special);
    CHECK(lab[i] == in[i]);  // the label is the original id
    ++chosen;
    if (out[i] == kMask) {
      ++masked;
    } else if (out[i] != in[i]) {
      ++replaced;
    } else {
      ++kept;
    }
  }
  // Binomial bounds at 6 standard deviations (a false failure has probability ~1e-9; the draws
  // are fixed by the keys, so the counts are the same on every run anyway).
  auto within = [](int64_t count, double n, double p) {
    const double sd = std::sqrt(n * p * (1 - p));
    return std::fabs(static_cast<double>(count) - n * p) <= 6 * sd;
  };
  CHECK(within(chosen, 20000, 0.15));
  CHECK(within(masked, static_cast<double>(chosen), 0.8));
  // A random id equal to the original counts as kept: p = 0.1 * (1 - 1 / kVocab).
  CHECK(within(replaced, static_cast<double>(chosen), 0.1 * (1 - 1.0 / kVocab)));
  CHECK(within(kept, static_cast<double>(chosen), 0.1 + 0.1 / kVocab));
}

TEST_CASE("mlm masking: a row's mask depends on its key only, not on its batch") {
  Tensor ids = rows(8, 20);
  auto kk = keys(8);
  models::MlmBatch all = models::mask_for_mlm(ids, kk, options());
  // Row 5 alone, with its key: the same ids and labels as in the batch of 8.
  std::vector<uint64_t> k5{kk[5]};
  models::MlmBatch one = models::mask_for_mlm(ids.slice(0, 5, 6), k5, options());
  CHECK(same(one.input_ids, all.input_ids.slice(0, 5, 6)));
  CHECK(same(one.labels, all.labels.slice(0, 5, 6)));
  // Another epoch draws another mask (keys differ; with 18 eligible positions per row and 8 rows
  // two equal label sets are practically impossible).
  models::MlmBatch next = models::mask_for_mlm(ids, keys(8, 1), options());
  CHECK_FALSE(same(next.labels, all.labels));
  CHECK(models::mlm_row_key(5, 0, 1) != models::mlm_row_key(5, 1, 0));
  CHECK(models::mlm_row_key(5, 0, 1) != models::mlm_row_key(6, 0, 1));
}

TEST_CASE("mlm masking labels at least one position per row, and none when mask_prob is 0") {
  // [CLS] w [SEP]: one eligible position, chosen with probability 1e-12 by the draw; the row
  // would have no label, so that position is masked.
  Tensor ids = from_vector(std::vector<int64_t>{kCls, 42, kSep, kCls, 43, kSep}, {2, 3});
  auto o = options();
  o.mask_prob = 1e-12;
  models::MlmBatch m = models::mask_for_mlm(ids, keys(2), o);
  CHECK(same(m.labels, from_vector(std::vector<int64_t>{-100, 42, -100, -100, 43, -100}, {2, 3})));
  CHECK(same(m.input_ids,
             from_vector(std::vector<int64_t>{kCls, kMask, kSep, kCls, kMask, kSep}, {2, 3})));
  o.mask_prob = 0;
  models::MlmBatch none = models::mask_for_mlm(ids, keys(2), o);
  CHECK(same(none.input_ids, ids));
  CHECK(same(none.labels, full({2, 3}, -100, TensorOptions{.dtype = DType::i64})));
  // A row of special ids only has nothing to label.
  Tensor specials = from_vector(std::vector<int64_t>{kCls, kSep}, {1, 2});
  o.mask_prob = 1e-12;
  CHECK(same(models::mask_for_mlm(specials, keys(1), o).labels,
             full({1, 2}, -100, TensorOptions{.dtype = DType::i64})));
}

TEST_CASE("mlm masking rejects bad input with clear errors") {
  Tensor ids = rows(2, 5);
  auto kk = keys(2);
  SL_CHECK_THROWS(models::mask_for_mlm(ids.to(DType::i32), kk, options()), DTypeError,
                  "mask_for_mlm: ids must be int64, got int32");
  SL_CHECK_THROWS(models::mask_for_mlm(ids.view({10}), keys(10), options()), ShapeError,
                  "mask_for_mlm: ids must be [B, L], got [10]");
  SL_CHECK_THROWS(models::mask_for_mlm(ids, keys(3), options()), ValueError,
                  "mask_for_mlm: 3 row keys for 2 rows");
  auto o = options();
  o.mask_prob = 1.5;
  SL_CHECK_THROWS(models::mask_for_mlm(ids, kk, o), ValueError, "got mask_prob 1.5");
  o = options();
  o.mask_token_prob = 0.95;
  SL_CHECK_THROWS(models::mask_for_mlm(ids, kk, o), ValueError,
                  "mask_token_prob + random_token_prob <= 1");
  o = options();
  o.mask_id = kVocab;
  SL_CHECK_THROWS(models::mask_for_mlm(ids, kk, o), ValueError,
                  "mask_id 1000 is outside the vocabulary [0, 1000)");
  Tensor bad = from_vector(std::vector<int64_t>{kCls, 5, -1, kSep}, {1, 4});
  SL_CHECK_THROWS(models::mask_for_mlm(bad, keys(1), options()), ValueError,
                  "mask_for_mlm: id -1 at row 0, position 2 is outside the vocabulary [0, 1000)");
}
