// Error paths of the core ops, one test case per error type: each bad call throws the typed
// error whose message names the op and the offending values.
#include <cmath>

#include "support/testing.h"

using namespace sl;

TEST_CASE("ShapeError: shapes that do not fit together") {
  SL_CHECK_THROWS(ones({2, 3}) + ones({4}), ShapeError,
                  "add: shapes [2, 3] and [4] do not broadcast (dim -1: 3 vs 4)");
  SL_CHECK_THROWS(where(ones({2}).to(DType::b8), ones({3}), ones({1})), ShapeError,
                  "where: shapes [2] and [3] do not broadcast");
  SL_CHECK_THROWS(mm(ones({2, 3}), ones({4, 5})), ShapeError,
                  "mm: shapes [2, 3] and [4, 5] cannot be multiplied (3 vs 4)");
  SL_CHECK_THROWS(mm(ones({2, 3, 1}), ones({1, 5})), ShapeError,
                  "mm: expected 2-d tensors, got [2, 3, 1] and [1, 5]");
  SL_CHECK_THROWS(
      bmm(ones({2, 3, 4}), ones({3, 4, 5})), ShapeError,
      "bmm: shapes [2, 3, 4] and [3, 4, 5] cannot be multiplied (batch 2 vs 3, inner 4 vs 4)");
  SL_CHECK_THROWS(matmul(ones({}), ones({2})), ShapeError,
                  "matmul: both operands need at least 1 dim");
  SL_CHECK_THROWS(matmul(ones({2, 3, 4}), ones({5, 4, 2})), ShapeError,
                  "matmul: shapes [2] and [5] do not broadcast");
  SL_CHECK_THROWS(
      linear(ones({2, 3}), ones({4, 5})), ShapeError,
      "linear: input of shape [2, 3] does not match weight [4, 5] (expected last dim 5)");
  SL_CHECK_THROWS(dot(ones({3}), ones({4})), ShapeError,
                  "dot: expected two 1-d tensors of equal length, got [3] and [4]");
  Tensor t = ones({3});
  SL_CHECK_THROWS(t.add_(ones({2, 3})), ShapeError,
                  "add_: output of shape [3] does not match the broadcast shape [2, 3]");
  SL_CHECK_THROWS(t.copy_(ones({2})), ShapeError, "copy_: shapes [3] and [2] do not broadcast");
  // out of place, self grows to the broadcast shape (as torch.masked_fill); in place it cannot
  SL_CHECK_THROWS(masked_fill(ones({3}), ones({2, 2}).to(DType::b8), 0), ShapeError,
                  "masked_fill: shapes [3] and [2, 2] do not broadcast");
  SL_CHECK_THROWS(ones({3}).masked_fill_(ones({2, 3}).to(DType::b8), 0), ShapeError,
                  "masked_fill_: output of shape [3] does not match the broadcast shape [2, 3] "
                  "(mask of shape [2, 3])");
  SL_CHECK_THROWS(ones({6}).view({4, -1}), ShapeError,
                  "view: shape [4, -1] is invalid for input of size 6");
  SL_CHECK_THROWS(ones({2, 3}).t().view({6}), ShapeError, "use reshape instead");
}

TEST_CASE("DTypeError: dtypes an op cannot take or combine") {
  Tensor b = ones({2}).to(DType::b8);
  SL_CHECK_THROWS(sub(b, b), DTypeError,
                  "sub: subtraction of bool tensors is not supported; use logical_xor");
  Tensor b2 = b.clone();
  SL_CHECK_THROWS(b2.sub_(b), DTypeError, "sub_: subtraction of bool tensors is not supported");
  SL_CHECK_THROWS(b - b, DTypeError, "sub: subtraction of bool tensors");
  SL_CHECK_THROWS(neg(b), DTypeError,
                  "neg: negation is not supported for bool tensors; use logical_not");
  SL_CHECK_THROWS(where(ones({2}), ones({2}), ones({2})), DTypeError,
                  "where: condition must be bool, got float32");
  SL_CHECK_THROWS(mm(ones({2, 2}), ones({2, 2}, {.dtype = DType::f64})), DTypeError,
                  "mm: expected both operands to have the same dtype, got float32 and float64");
  SL_CHECK_THROWS(mm(b.view({1, 2}), b.view({2, 1})), DTypeError,
                  "mm: not supported for bool tensors");
  Tensor i = arange(3);
  SL_CHECK_THROWS(i.add_(ones({3})), DTypeError,
                  "add_: result type float32 cannot be cast to the in-place output's int64");
  SL_CHECK_THROWS(i.mul_(0.5), DTypeError, "mul_: result type float32 cannot be cast");
  SL_CHECK_THROWS(clamp(b, false, true), DTypeError,
                  "clamp: not supported for bool tensors with bool bounds");
  SL_CHECK_THROWS(masked_fill(ones({2}), ones({2}), 0), DTypeError,
                  "masked_fill: mask must be bool, got float32");
  SL_CHECK_THROWS(ones({2}).data_ptr<double>(), DTypeError,
                  "data_ptr: requested float64 but the tensor is float32");
}

TEST_CASE("DTypeError: integer results PyTorch refuses to guess") {
  // PyTorch 1.13 raises for each of these (checked with torch.tensor([2, 3]) and a bool tensor);
  // logsumexp is the one reduction that promotes integers instead.
  Tensor i = arange(2, 4);
  Tensor b = ones({2}).to(DType::b8);
  SL_CHECK_THROWS(pow(i, -1), DTypeError,
                  "pow: integers to negative integer powers are not allowed (int64 tensor, "
                  "exponent -1)");
  SL_CHECK_THROWS(pow(i.to(DType::i32), -2), DTypeError, "(int32 tensor, exponent -2)");
  SL_CHECK_THROWS(pow(b, -1), DTypeError, "pow: integers to negative integer powers");
  Tensor i2 = i.clone();
  SL_CHECK_THROWS(i2.pow_(-1), DTypeError, "pow_: integers to negative integer powers");
  CHECK(i2.data_ptr<int64_t>()[0] == 2);  // refused before anything was written
  SL_CHECK_THROWS(i.mean(), DTypeError, "mean: input dtype must be floating point, got int64");
  SL_CHECK_THROWS(b.mean(), DTypeError, "mean: input dtype must be floating point, got bool");
  SL_CHECK_THROWS(i.var(), DTypeError, "var: input dtype must be floating point, got int64");
  SL_CHECK_THROWS(i.std(), DTypeError, "var: input dtype must be floating point, got int64");
  SL_CHECK_THROWS(b.var(), DTypeError, "var: input dtype must be floating point, got bool");
  SL_CHECK_THROWS(i.norm(), DTypeError, "norm: input dtype must be floating point, got int64");
  // what stays allowed, with the values PyTorch gives for the same calls
  Tensor sq = pow(i, 2);
  CHECK(sq.dtype() == DType::i64);
  CHECK(sq.data_ptr<int64_t>()[1] == 9);
  Tensor inv = pow(i, -1.0);  // a floating exponent promotes: [0.5, 1/3]
  CHECK(inv.dtype() == kDefaultFloat);
  CHECK(inv.data_ptr<float>()[0] == 0.5f);
  Tensor te = pow(i, from_vector<int64_t>({-1, 2}, {2}));  // tensor exponents are not checked
  CHECK(te.data_ptr<int64_t>()[0] == 0);                   // 2^-1 truncates to 0, as in PyTorch
  CHECK(te.data_ptr<int64_t>()[1] == 9);
  Tensor lse = logsumexp(i, {0});
  CHECK(lse.dtype() == kDefaultFloat);
  CHECK(lse.item<double>() ==
        doctest::Approx(std::log(std::exp(2.0) + std::exp(3.0))).epsilon(1e-6));
}

TEST_CASE("DeviceError: tensors on different devices") {
  Tensor a = ones({2});
  Tensor c = ones({2}, {.device = Device("cpu:1")});
  SL_CHECK_THROWS(a + c, DeviceError,
                  "add: expected all tensors on the same device, got cpu and cpu:1");
  SL_CHECK_THROWS(mm(a.view({1, 2}), c.view({2, 1})), DeviceError,
                  "mm: expected all tensors on the same device");
  SL_CHECK_THROWS(where(a.gt(0), a, c), DeviceError,
                  "where: expected all tensors on the same device");
  // a 0-d CPU tensor acts as a scalar with a tensor on another device, as in PyTorch
  CHECK((c * scalar_tensor(2.f)).device() == Device("cpu:1"));
  if (!cuda_is_available()) {
    SL_CHECK_THROWS(ones({1}, {.device = Device("cuda:0")}), DeviceError, "cuda");
  }
}

TEST_CASE("IndexError: dims and indices out of range") {
  Tensor x = ones({2, 3});
  SL_CHECK_THROWS(x.sum({2}), IndexError,
                  "sum: dim 2 out of range for a 2-d tensor (expected -2 <= dim < 2)");
  SL_CHECK_THROWS(x.sum({-3}), IndexError, "sum: dim -3 out of range");
  SL_CHECK_THROWS(x.max(5), IndexError, "max: dim 5 out of range");
  SL_CHECK_THROWS(x.cumsum(2), IndexError, "cumsum: dim 2 out of range");
  SL_CHECK_THROWS(x.select(1, 3), IndexError, "select: index 3 out of range for dim 1 of size 3");
  SL_CHECK_THROWS(x.select(0, -3), IndexError, "select: index -3 out of range for dim 0 of size 2");
  SL_CHECK_THROWS(x.narrow(1, 2, 2), IndexError,
                  "narrow: start 2 and length 2 out of range for dim 1 of size 3");
  SL_CHECK_THROWS(x.transpose(0, 2), IndexError, "transpose: dim 2 out of range");
  SL_CHECK_THROWS(x.unsqueeze(3), IndexError, "unsqueeze: dim 3 out of range for a 3-d tensor");
}

TEST_CASE("ValueError: bad argument values and undefined tensors") {
  SL_CHECK_THROWS(ones({2}).item(), ValueError,
                  "item: expected a tensor with one element, got shape [2] (2 elements)");
  SL_CHECK_THROWS(ones({0, 3}).amax({0}), ValueError,
                  "max: cannot reduce over a zero-size dim (no identity); input shape [0, 3]");
  SL_CHECK_THROWS(ones({0, 3}).max(0), ValueError,
                  "max: cannot reduce over a zero-size dim 0 of shape [0, 3]");
  SL_CHECK_THROWS(ones({3}).norm(std::nan("")), ValueError,
                  "norm: order p must be a number (any real, or +-inf), got nan");
  SL_CHECK_THROWS(ones({2, 3}).sum({1, -1}), ValueError,
                  "sum: dim -1 appears more than once in the dim list");
  SL_CHECK_THROWS(clamp(ones({2}), std::nullopt, std::nullopt), ValueError,
                  "clamp: at least one of min and max must be given");
  SL_CHECK_THROWS(gelu(ones({2}), "fast"), ValueError,
                  "gelu: approximate must be 'none' or 'tanh', got 'fast'");
  SL_CHECK_THROWS(hardtanh(ones({2}), 1, -1), ValueError,
                  "hardtanh: min_val (1) must not exceed max_val (-1)");
  SL_CHECK_THROWS(arange(0, 5, 0), ValueError, "arange: step must be nonzero");
  SL_CHECK_THROWS(zeros({2, -1}), ValueError, "shape: negative size -1 in [2, -1]");
  SL_CHECK_THROWS(set_num_threads(0), ValueError,
                  "set_num_threads: expected a thread count >= 1, got 0");
  SL_CHECK_THROWS(Tensor().dim(), ValueError, "Tensor: operation on an undefined tensor");
  SL_CHECK_THROWS(add(Tensor(), ones({1})), ValueError,
                  "add: first operand is an undefined tensor");
  SL_CHECK_THROWS(mm(ones({1, 1}), Tensor()), ValueError,
                  "mm: second operand is an undefined tensor");
}
