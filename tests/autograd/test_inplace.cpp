// Version counters and in-place rules, detach, NoGradGuard / EnableGradGuard.
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "support/testing.h"

using namespace sl;

TEST_CASE("modifying a saved tensor in place makes backward fail with a clear error") {
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  Tensor x = tensor({3.0, 4.0});
  Tensor y = (w * x).sum();  // MulBackward saves x for w's gradient
  uint32_t v0 = x.version();
  x.add_(1);
  std::string want =
      "MulBackward: one of the tensors needed for gradient computation (shape [2], "
      "float64) has been modified by an in-place operation: it was saved at version " +
      std::to_string(v0) + " and is now at version " + std::to_string(v0 + 1);
  SL_CHECK_THROWS(y.backward(), AutogradError, want.c_str());
}

TEST_CASE("an op's saved output modified in place is detected too") {
  Tensor x = tensor({0.5, 1.0}).requires_grad_();
  Tensor y = x.sigmoid();  // saves its output
  y.mul_(2);               // recorded in place on a non-leaf: bumps y's version
  SL_CHECK_THROWS(y.sum().backward(), AutogradError,
                  "SigmoidBackward: one of the tensors needed for gradient computation");
}

TEST_CASE("views share the version counter with their base") {
  Tensor x = tensor({1.0, 2.0, 3.0});
  Tensor v = x.narrow(0, 1, 2);
  uint32_t before = x.version();
  v.mul_(2);
  CHECK(x.version() == before + 1);
  Tensor w = tensor({1.0, 1.0}).requires_grad_();
  Tensor y = (w * v).sum();  // saves v
  x.zero_();                 // writes the base
  SL_CHECK_THROWS(y.backward(), AutogradError, "has been modified by an in-place operation");
}

TEST_CASE("in-place ops on leaves that require grad, or their views, are refused while recording") {
  Tensor w = ones({3}).requires_grad_();
  SL_CHECK_THROWS(w.add_(1.0), AutogradError,
                  "add_: a leaf tensor that requires grad is being used in an in-place operation");
  SL_CHECK_THROWS(w.narrow(0, 0, 2).mul_(2), AutogradError,
                  "mul_: a view of a leaf tensor that requires grad is being used in an in-place "
                  "operation");
  {
    NoGradGuard ng;  // an optimizer step
    w.add_(1.0);
    w.narrow(0, 0, 2).mul_(2);
  }
  CHECK(w.to_vector<float>() == std::vector<float>{4, 4, 2});
}

TEST_CASE("in-place ops on non-leaves are recorded") {
  Tensor x = tensor({1.0, -2.0, 3.0}).requires_grad_();
  Tensor y = x * 2;
  y.mul_(tensor({1.0, 1.0, 3.0}));
  y.relu_();  // saves its result, so it comes last: a later in-place write would be refused
  y.sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 0, 6});
}

TEST_CASE("detach cuts the graph but shares storage and the version counter") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = x * 3;
  Tensor d = y.detach();
  CHECK(!d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.is_same_storage(y));
  Tensor z = (y * y).sum();  // saves y
  d.add_(1);                 // same storage as y
  SL_CHECK_THROWS(z.backward(), AutogradError, "has been modified by an in-place operation");
  Tensor e = (x * 2).detach_();
  CHECK(!e.requires_grad());
}

TEST_CASE("NoGradGuard stops recording and nests; EnableGradGuard re-enables") {
  Tensor x = ones({2}).requires_grad_();
  {
    NoGradGuard a;
    Tensor y = x * 2;
    CHECK(!y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    {
      NoGradGuard b;
      CHECK(!GradMode::is_enabled());
      EnableGradGuard e;
      CHECK((x * 2).requires_grad());
    }
    CHECK(!GradMode::is_enabled());
    CHECK(!softmax(x, 0).requires_grad());
    CHECK(!cat({x, x}).requires_grad());
  }
  CHECK(GradMode::is_enabled());
  CHECK((x * 2).requires_grad());
}

TEST_CASE("fill_, zero_, copy_ and random fills follow the in-place rules") {
  Tensor w = ones({2}).requires_grad_();
  SL_CHECK_THROWS(w.zero_(), AutogradError,
                  "fill_: a leaf tensor that requires grad is being used in an in-place operation");
  SL_CHECK_THROWS(w.copy_(zeros({2})), AutogradError, "copy_: a leaf tensor that requires grad");
  SL_CHECK_THROWS(w.normal_(), AutogradError, "normal_: a leaf tensor that requires grad");
  // overwriting a non-leaf cuts its old history: no gradient reaches w through it
  Tensor y = w * 2;
  y.fill_(3);
  (y * w).sum().backward();  // = sum(3 * w): only the second factor depends on w
  CHECK(w.grad().to_vector<float>() == std::vector<float>{3, 3});
  // copy_ sends the gradient to its source, summed over broadcast dims, in the source's dtype
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor buf = zeros({2, 2});
  buf.copy_(x * 3);
  CHECK(buf.requires_grad());
  buf.sum().backward();
  CHECK(x.grad().dtype() == DType::f64);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{6, 6});
}

TEST_CASE("in-place methods on an undefined tensor throw instead of crashing") {
  SL_CHECK_THROWS(Tensor().add_(1.0), ValueError, "add_: input is an undefined tensor");
  SL_CHECK_THROWS(Tensor().copy_(ones({1})), ValueError, "copy_: input is an undefined tensor");
  SL_CHECK_THROWS(Tensor().bernoulli_(0.5), ValueError, "bernoulli_: input is an undefined tensor");
  SL_CHECK_THROWS(Tensor().relu_(), ValueError, "relu_: input is an undefined tensor");
}

TEST_CASE("in-place unary ops record their backward and guard what they save") {
  Tensor x = tensor({0.5, 1.5}).requires_grad_();
  Tensor y = x * 2;
  y.exp_();  // saves its result y = exp(2x)
  y.sum().backward(Tensor(), /*retain_graph=*/true);
  std::vector<double> g = x.grad().to_vector<double>();
  CHECK(g[0] == doctest::Approx(2 * std::exp(1.0)).epsilon(1e-14));
  CHECK(g[1] == doctest::Approx(2 * std::exp(3.0)).epsilon(1e-14));
  y.add_(1);  // changes the saved result: a second backward must refuse
  SL_CHECK_THROWS(y.sum().backward(), AutogradError,
                  "ExpBackward: one of the tensors needed for gradient computation");
  // an op that saves its input copies it first: later writes to self do not disturb it
  Tensor z = x * 1;
  z.sin_();
  z.mul_(3);                 // MulBackward by a scalar saves nothing
  Tensor(x.grad()).zero_();  // a handle to the same .grad storage
  z.sum().backward();
  std::vector<double> gz = x.grad().to_vector<double>();
  CHECK(gz[0] == doctest::Approx(3 * std::cos(0.5)).epsilon(1e-14));
  CHECK(gz[1] == doctest::Approx(3 * std::cos(1.5)).epsilon(1e-14));
}

TEST_CASE("in-place unary ops follow the leaf rule and refuse results they cannot store") {
  Tensor w = ones({2}).requires_grad_();
  SL_CHECK_THROWS(w.exp_(), AutogradError,
                  "exp_: a leaf tensor that requires grad is being used in an in-place operation");
  SL_CHECK_THROWS(arange(3).sqrt_(), DTypeError,
                  "sqrt_: result type float cannot be stored in place in a int64 tensor");
  SL_CHECK_THROWS(arange(3).pow_(0.5), DTypeError, "pow_: result type float32 cannot be cast");
  SL_CHECK_THROWS(ones({2}).to(DType::b8).neg_(), DTypeError,
                  "neg_: negation is not supported for bool tensors; use logical_not");
  SL_CHECK_THROWS(ones({3}).pow_(ones({2})), ShapeError,
                  "pow_: shapes [3] and [2] do not broadcast (dim -1: 3 vs 2)");
  SL_CHECK_THROWS(ones({3}).pow_(ones({2, 3})), ShapeError,
                  "pow_: output of shape [3] does not match the broadcast shape [2, 3]");
  SL_CHECK_THROWS(Tensor().tanh_(), ValueError, "tanh_");
  // a floor_ (zero gradient almost everywhere) cuts self's history from the gradient
  Tensor x = tensor({1.25, -0.5}).requires_grad_();
  Tensor y = x * 2;
  y.floor_();
  (y * x).sum().backward();  // only the direct x path: d/dx (floor(2x) * x) = floor(2x)
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, -1});
}

TEST_CASE(
    "div_ by a scalar is a true division: x /= s gives the bits of x / s, correctly rounded") {
  // every 65537th float32 bit pattern that is finite (about 65000 values of every binade), / 3:
  // multiplying by a rounded 1/3 instead is 1 ulp off for about a third of them
  std::vector<float> v;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 65537) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(b));
    if (std::isfinite(f)) v.push_back(f);
  }
  for (double s : {3.0, 10.0, 0.1, -7.0}) {
    CAPTURE(s);
    Tensor x = from_vector(v);
    Tensor in_place = x.clone();
    in_place.div_(s);
    CHECK(sl::testing::bits_equal(in_place, x / s));
    // float division rounded once: the double quotient of two floats rounded to float is it
    const auto got = in_place.to_vector<float>();
    const float sf = static_cast<float>(s);
    size_t wrong = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const float want = static_cast<float>(static_cast<double>(v[i]) / static_cast<double>(sf));
      if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want)) ++wrong;
    }
    CHECK(wrong == 0);
  }
  // float64 by a subnormal divisor: 1/s overflows to inf, the quotient does not
  Tensor d = tensor({1e-10, -2e-10}, {.dtype = DType::f64});
  d.div_(1e-310);
  CHECK(d.to_vector<double>() == std::vector<double>{1e-10 / 1e-310, -2e-10 / 1e-310});
  CHECK(std::isfinite(d.to_vector<double>()[0]));
  // errors name div_, and an integer tensor cannot hold the float quotient (as PyTorch)
  Tensor i = arange(3);
  SL_CHECK_THROWS(i.div_(2), DTypeError,
                  "div_: result type float32 cannot be cast to the in-place output's int64");
  Tensor leaf = ones({2}).requires_grad_();
  SL_CHECK_THROWS(leaf.div_(2), AutogradError, "div_");
  // the gradient is g / s
  Tensor y = leaf * 1;
  y.div_(4);
  y.sum().backward();
  CHECK(leaf.grad().to_vector<float>() == std::vector<float>{0.25f, 0.25f});
}
