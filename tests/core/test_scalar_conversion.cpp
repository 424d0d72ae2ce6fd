// A Scalar converted to an integer tensor's dtype, as PyTorch's checked conversion ("value cannot
// be converted to type int64_t without overflow"): NaN, +-inf and out-of-range values throw
// ValueError naming the op and the value, in fill_, full, masked_fill, where, scatter, clamp and
// the arithmetic and comparison ops with a scalar; values in range convert (floating ones
// truncated toward zero, as PyTorch: 2.7 fills 2). float32/float16/bfloat16 tensors refuse a
// finite value beyond their range where the value is stored (fill_, full, masked_fill, where,
// scatter, clamp) and take NaN and +-inf; arithmetic with such a scalar rounds to inf, as
// PyTorch. float64 and bool tensors take any value.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/testing.h"

using namespace sl;

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
const int64_t kP40 = int64_t{1} << 40;
}  // namespace

TEST_CASE("fill_ and full refuse NaN, inf and out-of-range values for integer dtypes") {
  Tensor a = arange(3);
  SL_CHECK_THROWS(a.fill_(1e30), ValueError,
                  "fill_: value 1e+30 cannot be converted to int64 without overflow");
  SL_CHECK_THROWS(a.fill_(kNaN), ValueError,
                  "fill_: value nan cannot be converted to int64 without overflow");
  SL_CHECK_THROWS(a.fill_(-kInf), ValueError, "fill_: value -inf cannot be converted to int64");
  SL_CHECK_THROWS(a.fill_(0x1p63), ValueError, "cannot be converted to int64");  // 2^63
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2});                // untouched
  // the extremes fit; floating values truncate toward zero
  a.fill_(-0x1p63);
  CHECK(a.to_vector<int64_t>()[0] == std::numeric_limits<int64_t>::min());
  a.fill_(std::numeric_limits<int64_t>::max());
  CHECK(a.to_vector<int64_t>()[0] == std::numeric_limits<int64_t>::max());
  a.fill_(2.7);
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{2, 2, 2});
  a.fill_(-2.7);
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{-2, -2, -2});
  // int32: [-2^31, 2^31 - 1], a float down to -2^31 - 0.5 truncating into it
  Tensor b = zeros({2}, {.dtype = DType::i32});
  SL_CHECK_THROWS(b.fill_(int64_t{1} << 31), ValueError,
                  "fill_: value 2147483648 cannot be converted to int32 without overflow");
  SL_CHECK_THROWS(b.fill_(3e9), ValueError, "fill_: value 3e+09 cannot be converted to int32");
  SL_CHECK_THROWS(b.fill_(-2147483649.0), ValueError, "cannot be converted to int32");
  b.fill_(-2147483648.5);
  CHECK(b.to_vector<int32_t>()[0] == std::numeric_limits<int32_t>::min());
  b.fill_(-(int64_t{1} << 31));
  CHECK(b.to_vector<int32_t>()[0] == std::numeric_limits<int32_t>::min());
  SL_CHECK_THROWS(full({2}, 1e30, {.dtype = DType::i64}), ValueError,
                  "full: value 1e+30 cannot be converted to int64 without overflow");
  SL_CHECK_THROWS(full({2}, kP40, {.dtype = DType::i32}), ValueError,
                  "full: value 1099511627776 cannot be converted to int32 without overflow");
  SL_CHECK_THROWS(zeros({2}, {.dtype = DType::i64}).zero_().fill_(kInf), ValueError, "fill_");
  // floating tensors take inf and NaN (values there); bool tensors take anything
  CHECK(std::isnan(full({1}, kNaN).item<float>()));
  CHECK(std::isinf(full({1}, kInf, {.dtype = DType::f32}).item<float>()));
  CHECK(full({1}, kNaN, {.dtype = DType::b8}).item<bool>());
}

TEST_CASE("scalar ops on integer tensors refuse a scalar that does not fit, naming the op") {
  Tensor i32 = arange(Scalar(0), Scalar(3), Scalar(1), {.dtype = DType::i32});
  SL_CHECK_THROWS(i32 + kP40, ValueError,
                  "add: value 1099511627776 cannot be converted to int32 without overflow");
  SL_CHECK_THROWS(i32 * kP40, ValueError, "mul: value 1099511627776 cannot be converted");
  SL_CHECK_THROWS(eq(i32, kP40), ValueError, "eq: value 1099511627776 cannot be converted");
  Tensor c = i32.clone();
  SL_CHECK_THROWS(c.add_(kP40), ValueError, "add_: value 1099511627776 cannot be converted");
  SL_CHECK_THROWS(c.mul_(kP40), ValueError, "mul_: value 1099511627776 cannot be converted");
  CHECK(c.to_vector<int32_t>() == std::vector<int32_t>{0, 1, 2});
  // in range: the int32 result; a floating scalar promotes instead (no conversion to int)
  CHECK((i32 + 5).to_vector<int32_t>() == std::vector<int32_t>{5, 6, 7});
  CHECK((arange(3) + 1e30).dtype() == kDefaultFloat);
  CHECK_FALSE(lt(arange(3), 1e30).logical_not().any().item<bool>());
  // masked_fill, where and scatter convert to the tensor's dtype
  Tensor mask = tensor({1.0, 0.0, 1.0}).to(DType::b8);
  SL_CHECK_THROWS(arange(3).masked_fill(mask, 1e30), ValueError,
                  "masked_fill: value 1e+30 cannot be converted to int64");
  SL_CHECK_THROWS(where(mask, i32, Scalar(kP40)), ValueError,
                  "where: value 1099511627776 cannot be converted to int32");
  SL_CHECK_THROWS(scatter(arange(3), 0, tensor({int64_t{1}}), Scalar(kNaN)), ValueError,
                  "scatter: value nan cannot be converted to int64");
  CHECK(arange(3).masked_fill(mask, 2.5).to_vector<int64_t>() == std::vector<int64_t>{2, 1, 2});
}

TEST_CASE(
    "clamp on integer tensors: a bound that does not fit throws, a float bound in place too") {
  Tensor i32 = arange(Scalar(0), Scalar(3), Scalar(1), {.dtype = DType::i32});
  SL_CHECK_THROWS(i32.clamp(0, kP40), ValueError,
                  "clamp: value 1099511627776 cannot be converted to int32 without overflow");
  Tensor c = i32.clone();
  SL_CHECK_THROWS(c.clamp_(std::nullopt, kP40), ValueError,
                  "clamp_: value 1099511627776 cannot be converted to int32");
  // a floating bound: out of place computes in float; in place cannot store it (as PyTorch)
  CHECK(arange(3).clamp(0, 1e30).to_vector<float>() == std::vector<float>{0, 1, 2});
  Tensor d = arange(3);
  SL_CHECK_THROWS(d.clamp_(0, 1.5), DTypeError,
                  "clamp_: result type float32 cannot be cast to the in-place output's int64");
  CHECK(d.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2});
  d.clamp_(1, 1);
  CHECK(d.to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1});
}

TEST_CASE("float32, float16 and bfloat16 tensors refuse a stored value beyond their range") {
  // PyTorch 1.13: torch.ones(1).fill_(1e300), .fill_(3.4028236e38) (just above FLT_MAX, which
  // round-to-nearest would bring back to FLT_MAX), half .fill_(65519), bfloat16 .fill_(3.39e38),
  // full, masked_fill, where, scatter and clamp with such a value raise "value cannot be
  // converted to type float without overflow"; inf, nan, 1e-50 (underflow to 0) and float64
  // 1e308 convert.
  const double flt_max = std::numeric_limits<float>::max();
  Tensor f = ones({2});
  SL_CHECK_THROWS(f.fill_(1e300), ValueError,
                  "fill_: value 1e+300 cannot be converted to float32 without overflow");
  SL_CHECK_THROWS(f.fill_(-1e39), ValueError, "fill_: value -1e+39 cannot be converted");
  SL_CHECK_THROWS(f.fill_(std::nextafter(flt_max, kInf)), ValueError, "to float32");
  CHECK(f.to_vector<float>() == std::vector<float>{1, 1});  // untouched
  f.fill_(-flt_max);
  CHECK(f.to_vector<float>()[0] == -std::numeric_limits<float>::max());
  f.fill_(1e-50);
  CHECK(f.to_vector<float>()[0] == 0.f);
  f.fill_(-kInf);
  CHECK(std::isinf(f.to_vector<float>()[0]));

  Tensor h = zeros({1}, {.dtype = DType::f16});
  SL_CHECK_THROWS(h.fill_(70000), ValueError,
                  "fill_: value 70000 cannot be converted to float16 without overflow");
  SL_CHECK_THROWS(h.fill_(65519.0), ValueError, "cannot be converted to float16");
  h.fill_(-65504);
  CHECK(h.item<float>() == -65504.f);
  Tensor bf = zeros({1}, {.dtype = DType::bf16});
  SL_CHECK_THROWS(bf.fill_(3.39e38), ValueError, "cannot be converted to bfloat16");
  bf.fill_(0x1.fep127);  // the largest bfloat16
  CHECK(bf.item<float>() == 0x1.fep127f);
  Tensor d = zeros({1}, {.dtype = DType::f64});
  d.fill_(1e308);
  CHECK(d.item<double>() == 1e308);

  Tensor mask = tensor({1.0, 0.0}).to(DType::b8);
  SL_CHECK_THROWS(full({2}, 1e300), ValueError, "full: value 1e+300 cannot be converted");
  SL_CHECK_THROWS(ones({2}).masked_fill(mask, 1e300), ValueError, "masked_fill: value 1e+300");
  SL_CHECK_THROWS(where(mask, ones({2}), Scalar(1e300)), ValueError, "where: value 1e+300");
  SL_CHECK_THROWS(scatter(ones({2}), 0, tensor({int64_t{1}}), Scalar(-1e300)), ValueError,
                  "scatter: value -1e+300");
  SL_CHECK_THROWS(ones({2}).clamp(std::nullopt, 1e300), ValueError, "clamp: value 1e+300");
  SL_CHECK_THROWS(zeros({1}, {.dtype = DType::f16}).masked_fill(tensor({1.0}).to(DType::b8), 1e5),
                  ValueError, "masked_fill: value 100000 cannot be converted to float16");
}

TEST_CASE("arithmetic with a floating scalar beyond the tensor's range rounds to inf") {
  // PyTorch 1.13: torch.ones(1) + 1e300 is inf, half + 70000 is inf (no error: the arithmetic
  // result is rounded, as it would be for a tensor operand)
  CHECK(std::isinf((ones({1}) + 1e300).item<float>()));
  CHECK((ones({1}) * -1e300).item<float>() == -std::numeric_limits<float>::infinity());
  CHECK(std::isinf((ones({1}, {.dtype = DType::f16}) + 70000).item<float>()));
  Tensor f = ones({2});
  f.mul_(1e300);
  CHECK(std::isinf(f.to_vector<float>()[1]));
  CHECK((1e300 - ones({1})).item<float>() == std::numeric_limits<float>::infinity());
}

// add/sub's alpha, as PyTorch's alpha_check. Values printed by torch 1.13 (/usr/bin/python3):
//   a = [2**53 + 1, 2**62 + 5], b = [1, 1]: torch.sub(a, b, alpha=3) and torch.add(a, b, alpha=-3)
//   are [9007199254740990, 4611686018427387906]; alpha=2.5 (add), 0.5 (sub), 2.0 (add_) raise
//   "For integral input tensors, argument alpha must not be a floating point number"; alpha=True
//   with int64 tensors raises "Boolean alpha only supported for Boolean results"; bool + bool with
//   alpha=2 is [True, True] for [True, False] + [True, True]; for x = [1, 2], y = [3, 4] (float32),
//   z = torch.sub(x, y, alpha=3) is [-8, -10] and z.backward([1, 2]) gives x.grad [1, 2],
//   y.grad [-3, -6] (SubBackward0).
TEST_CASE("add and sub: alpha follows PyTorch's rules, integer alpha stays exact") {
  Tensor a = from_vector<int64_t>({(int64_t{1} << 53) + 1, (int64_t{1} << 62) + 5});
  Tensor b = from_vector<int64_t>({1, 1});
  const std::vector<int64_t> want{9007199254740990, 4611686018427387906};
  CHECK(sub(a, b, 3).to_vector<int64_t>() == want);
  CHECK(add(a, b, -3).to_vector<int64_t>() == want);
  Tensor c = a.clone();
  c.sub_(b, 3);
  CHECK(c.to_vector<int64_t>() == want);
  SL_CHECK_THROWS(add(a, b, 2.5), DTypeError, "add: alpha 2.5 is a floating-point number");
  SL_CHECK_THROWS(sub(a, b, 0.5), DTypeError, "sub: alpha 0.5 is a floating-point number");
  SL_CHECK_THROWS(a.clone().add_(b, 2.0), DTypeError, "add_: alpha 2 is a floating-point number");
  SL_CHECK_THROWS(add(a, b, true), DTypeError,
                  "add: a bool alpha (1) is only supported for a bool");
  Tensor t = from_vector<bool>({true, false}), u = from_vector<bool>({true, true});
  CHECK(add(t, u, 2).to_vector<bool>() == std::vector<bool>{true, true});
  // a floating alpha with floating tensors, and sub's gradient
  Tensor x = from_vector<float>({1, 2}).requires_grad_(),
         y = from_vector<float>({3, 4}).requires_grad_();
  Tensor z = sub(x, y, 3);
  CHECK(std::string(z.grad_fn()->name()) == "SubBackward");
  CHECK(z.detach().to_vector<float>() == std::vector<float>{-8, -10});
  z.backward(from_vector<float>({1, 2}));
  CHECK(x.grad().to_vector<float>() == std::vector<float>{1, 2});
  CHECK(y.grad().to_vector<float>() == std::vector<float>{-3, -6});
}
