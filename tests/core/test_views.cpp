// Views and aliasing: write-through, composed views against index arithmetic done by hand,
// view-vs-reshape, zero-size and 0-d edge cases, and in-place writes through overlapping views.
#include "support/testing.h"

using namespace sl;

namespace {
/// 0, 1, 2, ... as float64 with the given shape.
Tensor iota(const Shape& s) {
  return arange(shape_numel(s)).to(DType::f64).view(s);
}
}  // namespace

TEST_CASE("views share storage and write through to the base") {
  Tensor x = zeros({3, 4});
  x.select(1, -1).fill_(1);     // last column
  x.narrow(0, 1, 1).fill_(2);   // middle row
  x.t().select(0, 0).fill_(3);  // first column, through a transpose
  x.slice(1, 1, 3, 1)[2].fill_(4);
  std::vector<float> want(12, 0.f);
  for (int r = 0; r < 3; ++r) want[static_cast<size_t>(r * 4 + 3)] = 1;
  for (int c = 0; c < 4; ++c) want[static_cast<size_t>(4 + c)] = 2;
  for (int r = 0; r < 3; ++r) want[static_cast<size_t>(r * 4)] = 3;
  want[9] = want[10] = 4;
  CHECK(x.to_vector<float>() == want);
}

TEST_CASE("composed views address the right elements (checked against index arithmetic)") {
  Tensor x = iota({4, 5, 6});
  // permute -> slice with a step -> select -> narrow with a negative start
  Tensor v = x.permute({2, 0, 1}).slice(0, 1, 6, 2).select(2, 3).narrow(1, -2, 2);
  REQUIRE(v.sizes() == Shape{3, 2});
  CHECK(v.is_same_storage(x));
  std::vector<double> got = v.to_vector<double>();
  for (int64_t a = 0; a < 3; ++a) {
    for (int64_t b = 0; b < 2; ++b) {
      int64_t k = 1 + 2 * a, i = 2 + b, j = 3;  // x[i][j][k]
      CHECK(got[static_cast<size_t>(a * 2 + b)] == static_cast<double>((i * 5 + j) * 6 + k));
    }
  }
  // expand: stride 0, every row aliases the source
  Tensor e = iota({3, 1}).expand({2, 3, 4});
  CHECK(e.stride(0) == 0);
  CHECK(e.stride(2) == 0);
  CHECK(e[1][2][3].item<double>() == 2.0);
}

TEST_CASE("view needs compatible strides; reshape copies when it must") {
  Tensor x = iota({4, 3});
  Tensor t = x.t();
  SL_CHECK_THROWS(
      t.view({12}), ShapeError,
      "view: size [12] is not compatible with the input's sizes [3, 4] and strides [1, 3]");
  Tensor r = t.reshape({12});
  CHECK(!r.is_same_storage(x));
  CHECK(r[1].item<double>() == 3.0);
  CHECK(x.reshape({2, 6}).is_same_storage(x));
  CHECK(x.view({-1}).is_same_storage(x));
  SL_CHECK_THROWS(x.view({5, -1}), ShapeError, "view");
  SL_CHECK_THROWS(x.view({-1, -1}), ShapeError, "view");
  CHECK(x.contiguous().is_same(x));
  CHECK(!x.clone().is_same_storage(x));
}

TEST_CASE("zero-size and 0-d views") {
  Tensor x = iota({3, 4});
  CHECK(x.narrow(1, 4, 0).sizes() == Shape{3, 0});
  CHECK(x.slice(0, 5, 10).sizes() == Shape{0, 4});
  CHECK(x.slice(1, -100, 100).sizes() == Shape{3, 4});
  Tensor z = zeros({0, 3});
  CHECK(z.t().sizes() == Shape{3, 0});
  CHECK(z.view({3, 0, 5}).numel() == 0);
  SL_CHECK_THROWS(z.select(0, 0), IndexError, "select: index 0 out of range for dim 0 of size 0");
  Tensor s = scalar_tensor(2.5);
  CHECK(s.dim() == 0);
  CHECK(s.unsqueeze(0).sizes() == Shape{1});
  CHECK(s.unsqueeze(-1).sizes() == Shape{1});
  CHECK(s.view({1, 1}).sizes() == Shape{1, 1});
  CHECK(s.squeeze().dim() == 0);
  CHECK(s.transpose(0, -1).dim() == 0);
  SL_CHECK_THROWS(s.select(0, 0), IndexError, "select: cannot select from a 0-d tensor");
  SL_CHECK_THROWS(s.narrow(0, 0, 1), IndexError, "narrow: cannot narrow a 0-d tensor");
  SL_CHECK_THROWS(s.unsqueeze(2), IndexError, "unsqueeze: dim 2 out of range");
}

TEST_CASE("negative dims count from the end everywhere") {
  Tensor x = iota({2, 3, 4});
  CHECK(x.transpose(-1, -3).sizes() == Shape{4, 3, 2});
  CHECK(x.unsqueeze(-1).sizes() == Shape{2, 3, 4, 1});
  CHECK(x.unsqueeze(-4).sizes() == Shape{1, 2, 3, 4});
  CHECK(x.flatten(-2).sizes() == Shape{2, 12});
  CHECK(x.movedim(-1, 0).sizes() == Shape{4, 2, 3});
  CHECK(x.size(-1) == 4);
  SL_CHECK_THROWS(x.size(-4), IndexError, "size: dim -4 out of range for a 3-d tensor");
  SL_CHECK_THROWS(x.permute({0, 1, 1}), ValueError, "permute: dim 1 appears more than once");
}

TEST_CASE("expand checks its sizes") {
  Tensor x = ones({3, 1});
  CHECK(x.expand({-1, 4}).sizes() == Shape{3, 4});
  SL_CHECK_THROWS(
      x.expand({4, 4}), ShapeError,
      "expand: the expanded size (4) must match the existing size (3) at non-singleton dim 0");
  SL_CHECK_THROWS(x.expand({4}), ShapeError, "expand: the number of sizes (1) must be at least");
  SL_CHECK_THROWS(x.expand({-1, -2}), ShapeError,
                  "expand: invalid size -2 at dim 1; target [-1, -2], tensor [3, 1]");
  SL_CHECK_THROWS(x.expand({-1, 3, 1}), ShapeError, "expand: a new leading dim needs a size >= 0");
}

TEST_CASE("as_strided stays inside the storage") {
  Tensor x = zeros({6});
  CHECK(x.as_strided({2, 2}, {3, 1}, 1).sizes() == Shape{2, 2});
  SL_CHECK_THROWS(x.as_strided({2, 2}, {3, 1}, 3), IndexError,
                  "as_strided: view of sizes [2, 2], strides [3, 1] and offset 3 reaches element 7 "
                  "but the storage holds 6");
}

TEST_CASE("in-place writes through overlapping views read the old values") {
  // dst and src are different views of one storage: the result must be as if src were copied
  // first (x[i] = old x[i-1]), whatever the layout or thread count.
  for (bool strided : {false, true}) {
    CAPTURE(strided);
    int64_t n = 10, step = strided ? 2 : 1;
    Tensor x = arange(n).to(DType::f32);
    std::vector<float> old = x.to_vector<float>();
    Tensor dst = x.slice(0, step, n, step), src = x.slice(0, 0, n - step, step);
    dst.copy_(src);
    std::vector<float> want = old;
    for (int64_t i = step; i < n; i += step)
      want[static_cast<size_t>(i)] = old[static_cast<size_t>(i - step)];
    CHECK(x.to_vector<float>() == want);
    Tensor y = arange(n).to(DType::f32);
    y.slice(0, step, n, step).add_(y.slice(0, 0, n - step, step));
    std::vector<float> want_add = old;
    for (int64_t i = step; i < n; i += step) {
      want_add[static_cast<size_t>(i)] =
          old[static_cast<size_t>(i)] + old[static_cast<size_t>(i - step)];
    }
    CHECK(y.to_vector<float>() == want_add);
  }
  Tensor a = arange(4).to(DType::f32);
  a.add_(a);  // same view: elementwise, always fine
  CHECK(a.to_vector<float>() == std::vector<float>{0, 2, 4, 6});
}

TEST_CASE("in-place writes into a tensor whose elements share memory are refused") {
  Tensor e = zeros({1}).expand({3});
  SL_CHECK_THROWS(e.add_(ones({3})), ValueError,
                  "add_: unsupported operation: more than one element of the written-to tensor "
                  "refers to a single memory location");
  SL_CHECK_THROWS(e.copy_(tensor({1.f, 2.f, 3.f})), ValueError, "copy_: unsupported operation");
  SL_CHECK_THROWS(e.relu_(), ValueError, "relu_: unsupported operation");
  e.fill_(2);  // every element gets the same value: allowed, as in PyTorch
  CHECK(e.to_vector<float>() == std::vector<float>{2, 2, 2});
}
