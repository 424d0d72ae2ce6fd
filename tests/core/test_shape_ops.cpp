// Shape family: split/chunk views and their gradient, error paths with messages, dtype rules.
#include "support/testing.h"

using namespace sl;

TEST_CASE("split pieces are views; gradients of unused pieces are zero") {
  Tensor x = arange(6).to(DType::f64).requires_grad_();
  std::vector<Tensor> p = split(x, 2);
  REQUIRE(p.size() == 3);
  for (const Tensor& t : p) CHECK(t.is_same_storage(x));
  (p[1] * 2).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0, 2, 2, 0, 0});
  // in-place on a piece is refused while recording: a view of a leaf that requires grad, or
  // (of a non-leaf) one of several views made by one op
  Tensor q = chunk(x, 2)[0];
  SL_CHECK_THROWS(q.mul_(2), AutogradError,
                  "mul_: a view of a leaf tensor that requires grad is being used in an in-place "
                  "operation");
  SL_CHECK_THROWS(chunk(x * 1, 2)[1].mul_(2), AutogradError,
                  "mul_: this tensor is one of several views returned by one op (SplitBackward)");
}

TEST_CASE("chunk and split sizes follow PyTorch") {
  auto sizes = [](const std::vector<Tensor>& v) {
    std::vector<int64_t> s;
    for (const Tensor& t : v) s.push_back(t.size(0));
    return s;
  };
  CHECK(sizes(chunk(ones({7}), 3)) == std::vector<int64_t>{3, 3, 1});
  CHECK(sizes(chunk(ones({6}), 4)) == std::vector<int64_t>{2, 2, 2});
  CHECK(sizes(chunk(ones({0}), 3)) == std::vector<int64_t>{0, 0, 0});
  CHECK(sizes(split(ones({5}), 5)) == std::vector<int64_t>{5});
  CHECK(sizes(split_with_sizes(ones({5}), {0, 5, 0})) == std::vector<int64_t>{0, 5, 0});
}

TEST_CASE("shape op errors name the op and the values") {
  SL_CHECK_THROWS(cat({}, 0), ValueError, "cat: expected a non-empty list of tensors");
  SL_CHECK_THROWS(cat({ones({}), ones({})}), ShapeError,
                  "cat: zero-dimensional tensor (at position 0) cannot be concatenated");
  SL_CHECK_THROWS(cat({ones({2, 3}), ones({2, 4})}, 0), ShapeError,
                  "cat: sizes of tensors must match except in dim 0; tensor 1 has shape [2, 4] but "
                  "tensor 0 has shape [2, 3]");
  SL_CHECK_THROWS(
      cat({ones({2}), ones({2}, {.device = Device("cpu:1")})}), DeviceError,
      "cat: expected all tensors on the same device, got cpu (tensor 0) and cpu:1 (tensor 1)");
  SL_CHECK_THROWS(cat({ones({2})}, 1), IndexError, "cat: dim 1 out of range");
  SL_CHECK_THROWS(
      stack({ones({2}), ones({3})}), ShapeError,
      "stack: expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1");
  SL_CHECK_THROWS(split(ones({4}), 0), ValueError, "split: split_size must be positive, got 0");
  SL_CHECK_THROWS(
      split(ones({4}), std::vector<int64_t>{1, 2}), ShapeError,
      "split: split sizes [1, 2] add up to 3 but dim 0 of the input (shape [4]) has size 4");
  SL_CHECK_THROWS(split(ones({}), 1), ShapeError, "split: expects a tensor with at least 1 dim");
  SL_CHECK_THROWS(chunk(ones({4}), 0), ValueError,
                  "chunk: number of chunks must be positive, got 0");
  SL_CHECK_THROWS(pad(ones({2, 3}), {1}), ValueError,
                  "pad: the pad list must have an even length, got 1");
  SL_CHECK_THROWS(pad(ones({3}), {1, 1, 1, 1}), ValueError,
                  "pad: 2 (left, right) pairs given for a 1-d tensor");
  SL_CHECK_THROWS(pad(ones({3}), {1, 1}, "circular"), ValueError,
                  "pad: mode must be 'constant', 'reflect' or 'replicate', got 'circular'");
  SL_CHECK_THROWS(pad(ones({3}), {3, 0}, "reflect"), ValueError,
                  "pad: reflect padding (3, 0) must be less than the size 3 of dim 0");
  // a negative replicate pad crops (as PyTorch) but must leave an element
  SL_CHECK_THROWS(pad(ones({3}), {-1, -2}, "replicate"), ValueError,
                  "pad: replicate padding (-1, -2) of dim 0 (size 3) leaves 0 elements");
  SL_CHECK_THROWS(pad(ones({3}), {-2, -2}), ValueError,
                  "pad: padding (-2, -2) of dim 0 (size 3) gives a negative size");
  SL_CHECK_THROWS(tril(ones({3})), ShapeError,
                  "tril: expects a tensor with at least 2 dims, got shape [3]");
  SL_CHECK_THROWS(triu(ones({})), ShapeError, "triu: expects a tensor with at least 2 dims");
  SL_CHECK_THROWS(repeat(ones({2, 3}), {2}), ShapeError,
                  "repeat: number of repeat dims (1) can not be smaller than the number of dims of "
                  "the tensor (2)");
  SL_CHECK_THROWS(repeat(ones({2}), {-1}), ValueError,
                  "repeat: repeats must be non-negative, got [-1]");
  SL_CHECK_THROWS(flip(ones({2, 2}), {0, -2}), ValueError, "flip: dim -2 appears more than once");
  SL_CHECK_THROWS(flip(ones({2, 2}), {2}), IndexError, "flip: dim 2 out of range");
}

TEST_CASE("cat promotes dtypes and returns each input's gradient in its own dtype") {
  Tensor a = ones({2}, {.dtype = DType::f32, .requires_grad = true});
  Tensor b = ones({3}, {.dtype = DType::f64, .requires_grad = true});
  Tensor c = cat({a, b});
  CHECK(c.dtype() == DType::f64);
  (c * arange(5).to(DType::f64)).sum().backward();
  CHECK(a.grad().dtype() == DType::f32);
  CHECK(a.grad().to_vector<float>() == std::vector<float>{0, 1});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{2, 3, 4});
  CHECK(cat({ones({2}, {.dtype = DType::i32}), ones({1}, {.dtype = DType::b8})}).dtype() ==
        DType::i32);
}

TEST_CASE("repeat and pad always return new storage") {
  Tensor x = ones({2, 2});
  CHECK(!repeat(x, {1, 1}).is_same_storage(x));
  CHECK(!pad(x, {0, 0}).is_same_storage(x));
  CHECK(!pad(x, {0, 0}, "reflect").is_same_storage(x));
  CHECK(!flip(x, {}).is_same_storage(x));
}
