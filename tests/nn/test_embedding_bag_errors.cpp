// EmbeddingBag / F::embedding_bag refusals, as PyTorch 1.13's (typed, naming the op and values).
#include "nn/embedding_bag.h"
#include "nn/functional.h"
#include "support/testing.h"

using namespace sl;
namespace F = sl::nn::functional;

namespace {
Tensor i64s(std::vector<int64_t> v) {
  return from_vector(v);
}
}  // namespace

TEST_CASE("embedding_bag refuses bad offsets") {
  Tensor w = randn({5, 2});
  Tensor x = i64s({0, 1, 2, 3});
  SL_CHECK_THROWS(F::embedding_bag(w, x, {.offsets = i64s({1, 2})}), ValueError,
                  "embedding_bag: offsets[0] has to be 0 (the first bag starts at position 0), "
                  "got 1");
  SL_CHECK_THROWS(F::embedding_bag(w, x, {.offsets = i64s({0, 3, 2})}), ValueError,
                  "offsets must be non-decreasing, got offsets[1] = 3 > offsets[2] = 2");
  SL_CHECK_THROWS(F::embedding_bag(w, x, {.offsets = i64s({0, 5})}), ValueError,
                  "offsets[-1] can not be greater than the input's length 4, got offsets[-1] = 5");
  SL_CHECK_THROWS(F::embedding_bag(w, x, {.offsets = i64s({0, 1}).view({1, 2})}), ValueError,
                  "offsets has to be a 1-d tensor, got shape [1, 2]");
  SL_CHECK_THROWS(F::embedding_bag(w, x), ValueError, "a 1-d input needs offsets");
  SL_CHECK_THROWS(F::embedding_bag(w, x.view({2, 2}), {.offsets = i64s({0})}), ValueError,
                  "if input is 2-d ([2, 2]), offsets has to be undefined");
  SL_CHECK_THROWS(F::embedding_bag(w, x.view({1, 2, 2})), ValueError,
                  "input has to be a 1-d or 2-d tensor, got shape [1, 2, 2]");
  SL_CHECK_THROWS(F::embedding_bag(w, x, {.offsets = i64s({0}).to(DType::i32)}), DTypeError,
                  "offsets must have the input's dtype int64, got int32");
  SL_CHECK_THROWS(F::embedding_bag(w, x, {.offsets = tensor({0.0f})}), DTypeError,
                  "offsets must have the input's dtype int64, got float32");
  SL_CHECK_THROWS(F::embedding_bag(w, x, {.offsets = i64s({}), .include_last_offset = true}),
                  ValueError, "with include_last_offset, offsets needs at least 1 entry");
}

TEST_CASE("embedding_bag refuses bad indices, weights and per_sample_weights") {
  Tensor w = randn({5, 2});
  Tensor off = i64s({0, 2});
  SL_CHECK_THROWS(F::embedding_bag(w, i64s({0, 5, 1}), {.offsets = off}), IndexError,
                  "embedding_bag: index 5 is out of range for a weight with 5 rows");
  SL_CHECK_THROWS(F::embedding_bag(w, i64s({0, -1, 1}), {.offsets = off}), IndexError, "-1");
  SL_CHECK_THROWS(F::embedding_bag(w, tensor({0.0f, 1.0f}), {.offsets = off}), DTypeError,
                  "embedding_bag: input must be int64 or int32, got float32");
  SL_CHECK_THROWS(F::embedding_bag(randn({5}), i64s({0}), {.offsets = i64s({0})}), ShapeError,
                  "weight must be 2-d");
  SL_CHECK_THROWS(F::embedding_bag(i64s({1, 2}).view({1, 2}), i64s({0}), {.offsets = i64s({0})}),
                  DTypeError, "weight must be floating, got int64");
  Tensor x = i64s({0, 1, 2});
  SL_CHECK_THROWS(
      F::embedding_bag(
          w, x, {.offsets = off, .mode = EmbeddingBagMode::mean, .per_sample_weights = randn({3})}),
      ValueError, "per_sample_weights is only supported for mode='sum', got mode='mean'");
  SL_CHECK_THROWS(
      F::embedding_bag(
          w, x, {.offsets = off, .mode = EmbeddingBagMode::max, .per_sample_weights = randn({3})}),
      ValueError, "got mode='max'");
  SL_CHECK_THROWS(
      F::embedding_bag(
          w, x, {.offsets = off, .mode = EmbeddingBagMode::sum, .per_sample_weights = randn({2})}),
      ShapeError, "per_sample_weights ([2]) must have the same shape as the input ([3])");
  SL_CHECK_THROWS(F::embedding_bag(w, x,
                                   {.offsets = off,
                                    .mode = EmbeddingBagMode::sum,
                                    .per_sample_weights = randn({3}, {.dtype = DType::f64})}),
                  DTypeError,
                  "per_sample_weights must have the weight's dtype float32, got float64");
  SL_CHECK_THROWS(F::embedding_bag(w, x, {.offsets = off, .padding_idx = 5}), ValueError,
                  "padding_idx 5 must be within [-5, 5)");
  SL_CHECK_THROWS(F::embedding_bag(w, x, {.offsets = off, .sparse = true}), ValueError,
                  "sparse=true is not supported");
  SL_CHECK_THROWS(
      F::embedding_bag(w, x,
                       {.offsets = off, .mode = EmbeddingBagMode::max, .scale_grad_by_freq = true}),
      ValueError, "max mode does not support scaling the gradient by the frequency");
  SL_CHECK_THROWS(F::embedding_bag(Tensor(), x, {.offsets = off}), ValueError, "embedding_bag");
}

TEST_CASE("EmbeddingBag module refusals") {
  SL_CHECK_THROWS(nn::EmbeddingBag(5, 2, {.mode = "median"}), ValueError,
                  "EmbeddingBag: mode has to be one of sum, mean or max, got 'median'");
  SL_CHECK_THROWS(nn::EmbeddingBag(5, 2, {.sparse = true}), ValueError,
                  "EmbeddingBag: sparse=true is not supported");
  SL_CHECK_THROWS(nn::EmbeddingBag(5, 2, {.scale_grad_by_freq = true, .mode = "max"}), ValueError,
                  "max mode does not support scaling the gradient");
  SL_CHECK_THROWS(nn::EmbeddingBag(5, 2, {.padding_idx = -6}), ValueError,
                  "EmbeddingBag: padding_idx -6 must be within [-5, 5)");
  SL_CHECK_THROWS(nn::EmbeddingBag(0, 2), ValueError, "must be positive");
  SL_CHECK_THROWS(nn::EmbeddingBag::from_pretrained(randn({2, 2, 2})), ShapeError,
                  "EmbeddingBag.from_pretrained: embeddings parameter is expected to be "
                  "2-dimensional");
  nn::EmbeddingBag m(5, 2, {.mode = "sum"});
  SL_CHECK_THROWS(m.forward(i64s({0, 1}), i64s({0}), randn({2}, {.dtype = DType::f64})), DTypeError,
                  "per_sample_weights must have the weight's dtype");
  SL_CHECK_THROWS(m.forward(i64s({0, 1})), ValueError, "a 1-d input needs offsets");
}
