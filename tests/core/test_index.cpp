// Index family: error paths (type and message), embedding's padding_idx, one_hot, masked_select
// broadcasting, and determinism of the accumulating kernels.
#include <cmath>
#include <limits>

#include "core/ops/index.h"
#include "support/testing.h"

using namespace sl;

namespace {
Tensor idx(std::vector<int64_t> v) {
  return from_vector(v);
}
}  // namespace

TEST_CASE("index errors name the op and the bad value, never crash") {
  Tensor x = ones({4, 3});
  SL_CHECK_THROWS(
      index_select(x, 0, idx({1, 5})), IndexError,
      "index_select: index 5 is out of range for dim 0 of size 4 (expected 0 <= index < 4)");
  SL_CHECK_THROWS(index_select(x, 1, idx({-1})), IndexError,
                  "index_select: index -1 is out of range for dim 1 of size 3");
  SL_CHECK_THROWS(index_select(x, 0, tensor({1.f})), DTypeError,
                  "index_select: index must be int64 or int32, got float32");
  SL_CHECK_THROWS(index_select(x, 0, idx({0, 1}).view({1, 2})), ShapeError,
                  "index_select: index must be 1-d or 0-d, got shape [1, 2]");
  SL_CHECK_THROWS(index_select(x, 2, idx({0})), IndexError, "index_select: dim 2 out of range");
  SL_CHECK_THROWS(index_select(x, 0, idx({0}).to(Device("cpu:1"))), DeviceError,
                  "index_select: expected all tensors on the same device");
  SL_CHECK_THROWS(gather(x, 1, idx({0, 3, 1}).view({1, 3})), IndexError,
                  "gather: index 3 is out of range for dim 1 of size 3");
  SL_CHECK_THROWS(gather(x, 1, idx({0})), ShapeError,
                  "gather: index must have the same number of dims as the input (2)");
  SL_CHECK_THROWS(
      gather(x, 1, zeros({5, 1}, {.dtype = DType::i64})), ShapeError,
      "gather: index of shape [5, 1] is larger than the input of shape [4, 3] in dim 0");
  SL_CHECK_THROWS(gather(x, 0, zeros({1, 1}, {.dtype = DType::b8})), DTypeError,
                  "gather: index must be int64 or int32, got bool");
  SL_CHECK_THROWS(
      scatter(x, 0, zeros({1, 1}, {.dtype = DType::i64}), ones({1, 1}, {.dtype = DType::f64})),
      DTypeError, "scatter: self (float32) and src (float64) must have the same dtype");
  SL_CHECK_THROWS(scatter_add(x, 0, full({1, 1}, 9, {.dtype = DType::i64}), ones({1, 1})),
                  IndexError, "scatter_add: index 9 is out of range for dim 0 of size 4");
  SL_CHECK_THROWS(scatter_add(x.to(DType::b8), 0, zeros({1, 1}, {.dtype = DType::i64}),
                              ones({1, 1}).to(DType::b8)),
                  DTypeError, "scatter_add: not supported for bool tensors");
  SL_CHECK_THROWS(scatter(x, 0, zeros({1, 2}, {.dtype = DType::i64}), ones({1, 1})), ShapeError,
                  "scatter: index of shape [1, 2] is larger than src of shape [1, 1] in dim 1");
  SL_CHECK_THROWS(index_add(x, 0, idx({0, 1}), ones({3, 3})), ShapeError,
                  "index_add: source of shape [3, 3] does not match [2, 3]");
  SL_CHECK_THROWS(index_add(x, 0, idx({4}), ones({1, 3})), IndexError,
                  "index_add: index 4 is out of range for dim 0 of size 4");
}

TEST_CASE("embedding: lookup, errors, and a gradient that never touches padding_idx") {
  Tensor w = arange(15).to(DType::f32).view({5, 3});
  Tensor ids = idx({1, 3, 1, 0}).view({2, 2});
  Tensor e = embedding(w, ids);
  CHECK(e.sizes() == Shape{2, 2, 3});
  CHECK(equal(e[1][0], w[1]));
  SL_CHECK_THROWS(
      embedding(w, idx({7})), IndexError,
      "embedding: index 7 is out of range for a weight with 5 rows (expected 0 <= index < 5)");
  SL_CHECK_THROWS(embedding(w, tensor({1.f})), DTypeError,
                  "embedding: index must be int64 or int32");
  SL_CHECK_THROWS(embedding(w.view({-1}), ids), ShapeError, "embedding: weight must be 2-d");
  SL_CHECK_THROWS(embedding(w, ids, 5), IndexError, "embedding: padding_idx 5 is out of range");

  for (int64_t pad : {int64_t{1}, int64_t{-4}}) {  // -4 counts from the end: row 1
    CAPTURE(pad);
    Tensor wg = w.clone().requires_grad_();
    embedding(wg, ids, pad).sum().backward();
    // each use of a row adds ones to it, except row 1 (padding), which gets nothing
    std::vector<float> g = wg.grad().to_vector<float>();
    std::vector<float> want(15, 0.f);
    for (int64_t r : {3, 0}) {
      for (int k = 0; k < 3; ++k) want[static_cast<size_t>(r * 3 + k)] += 1;
    }
    CHECK(g == want);
  }
  // the kernel skips padding rows: a NaN source row aimed at the skipped index leaves it intact
  Tensor base = ones({3, 2});
  Tensor src = from_vector(std::vector<float>{1, 1, NAN, NAN}, {2, 2});
  Tensor r = ops::index_add(base, 0, idx({0, 2}), src, 1, /*skip=*/2);
  CHECK(r.to_vector<float>() == std::vector<float>{2, 2, 1, 1, 1, 1});
}

TEST_CASE("one_hot infers the class count and checks the range") {
  Tensor oh = one_hot(idx({0, 2}));
  CHECK(oh.sizes() == Shape{2, 3});
  CHECK(oh.dtype() == DType::i64);
  CHECK(oh.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 0, 0, 1});
  SL_CHECK_THROWS(one_hot(idx({0, 5}), 3), IndexError,
                  "one_hot: index 5 is out of range for num_classes 3");
  SL_CHECK_THROWS(one_hot(idx({-1}), 3), IndexError, "one_hot: index -1 is out of range");
  SL_CHECK_THROWS(one_hot(idx({}), -1), ValueError, "one_hot: cannot infer the number of classes");
  SL_CHECK_THROWS(one_hot(tensor({1.f}), 2), DTypeError, "one_hot: indices must be int64 or int32");
  CHECK(one_hot(idx({}), 4).sizes() == Shape{0, 4});
}

TEST_CASE("masked_select broadcasts and checks its mask") {
  Tensor x = arange(6).view({2, 3});
  Tensor m = from_vector(std::vector<bool>{true, false, true});
  CHECK(masked_select(x, m).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 3, 5});
  SL_CHECK_THROWS(masked_select(x, ones({3})), DTypeError,
                  "masked_select: mask must be bool, got float32");
  SL_CHECK_THROWS(masked_select(x, from_vector(std::vector<bool>{true, false})), ShapeError,
                  "masked_select: shapes [2, 3] and [2] do not broadcast");
  Tensor xg = ones({2, 3}, {.dtype = DType::f64, .requires_grad = true});
  masked_select(xg, m).sum().backward();
  CHECK(xg.grad().to_vector<double>() == std::vector<double>{1, 0, 1, 1, 0, 1});
}

TEST_CASE("index_add, scatter_add and gather backward are deterministic with repeated indices") {
  manual_seed(9);
  Tensor index = randint(0, 16, {4000});
  Tensor src = randn({4000, 64});
  Tensor base = zeros({16, 64});
  Tensor sidx = randint(0, 8, {3000, 64});
  Tensor ssrc = randn({3000, 64});
  int saved = get_num_threads();
  set_num_threads(1);
  Tensor a1 = index_add(base, 0, index, src);
  Tensor s1 = scatter_add(zeros({8, 64}), 0, sidx, ssrc);
  set_num_threads(2);
  Tensor a2 = index_add(base, 0, index, src);
  Tensor s2 = scatter_add(zeros({8, 64}), 0, sidx, ssrc);
  Tensor a3 = index_add(base, 0, index, src);
  set_num_threads(saved);
  CHECK(equal(a1, a2));
  CHECK(equal(a2, a3));
  CHECK(equal(s1, s2));
}

TEST_CASE("scatter with repeated indices keeps the last write along dim") {
  Tensor out = scatter(zeros({3}), 0, idx({1, 1, 2, 1}), tensor({1.f, 2.f, 3.f, 4.f}));
  CHECK(out.to_vector<float>() == std::vector<float>{0, 4, 3});
  Tensor v = scatter(zeros({2, 2}), 1, idx({1, 0}).view({2, 1}), Scalar(7));
  CHECK(v.to_vector<float>() == std::vector<float>{0, 7, 7, 0});
}
