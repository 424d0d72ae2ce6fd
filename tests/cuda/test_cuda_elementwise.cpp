// Parity of the CUDA elementwise family with the CPU: every unary and binary op for every dtype
// it accepts, broadcasting, non-contiguous and aligned/misaligned operands, in-place forms,
// where, clamp, masked_fill, and the error paths.
#include <string>

#include "core/ops/elementwise.h"
#include "cuda_testing.h"

using namespace sl;
using sl::testing::elementwise_tol;
using sl::testing::kGPU;

namespace {

const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
const DType kAll[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                      DType::i64, DType::i32, DType::b8};

/// Input in the op's domain (positive where log/sqrt/... need it), as float64 on the CPU.
Tensor unary_input(UnaryOp op, const Shape& shape) {
  Tensor x = randn(shape, {.dtype = DType::f64}) * 3;
  switch (op) {
    case UnaryOp::log:
    case UnaryOp::sqrt:
    case UnaryOp::rsqrt:
    case UnaryOp::reciprocal:
      return x.abs() + 0.1;
    case UnaryOp::log1p:
      return x.abs() - 0.5;  // > -1
    default:
      return x;
  }
}

bool unary_accepts(UnaryOp op, DType dt) {
  if (unary_op_needs_float(op) && !is_floating(dt)) return false;
  // neg and the ops PyTorch refuses on bool (Note [Bool inputs]) throw on both devices
  if (dt == DType::b8 && (op == UnaryOp::neg || unary_op_refuses_bool(op))) return false;
  return true;
}

}  // namespace

TEST_CASE("cuda parity: every unary op, every dtype, contiguous and strided" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("unary parity");
  manual_seed(1);
  for (int o = 0; o < static_cast<int>(UnaryOp::count_); ++o) {
    auto op = static_cast<UnaryOp>(o);
    Tensor x64 = unary_input(op, {67, 9});  // odd sizes: vector path plus a tail
    for (DType dt : kAll) {
      if (!unary_accepts(op, dt)) continue;
      CAPTURE(unary_op_name(op));
      CAPTURE(dt);
      Tensor x = x64.to(dt);
      Tensor gx = x.to(kGPU);
      auto tol = elementwise_tol(dt);
      SL_CHECK_CLOSE_TOL(ops::unary(op, gx).cpu(), ops::unary(op, x), tol);
      // transposed (strided) input
      SL_CHECK_CLOSE_TOL(ops::unary(op, gx.t()).cpu(), ops::unary(op, x.t()), tol);
      // misaligned contiguous view (offset 1 element): scalar path
      SL_CHECK_CLOSE_TOL(ops::unary(op, gx.view({-1}).narrow(0, 1, 500)).cpu(),
                         ops::unary(op, x.view({-1}).narrow(0, 1, 500)), tol);
    }
  }
}

TEST_CASE("cuda parity: special values (NaN, inf, signed zero) through unary ops" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("unary special values");
  Tensor x = tensor({0.0, -0.0, 1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0, 2.5, -2.5, 0.5, 1.5},
                    {.dtype = DType::f64});
  for (UnaryOp op : {UnaryOp::abs, UnaryOp::relu, UnaryOp::sign, UnaryOp::round, UnaryOp::floor,
                     UnaryOp::isnan, UnaryOp::isinf, UnaryOp::isfinite, UnaryOp::logical_not,
                     UnaryOp::exp, UnaryOp::tanh, UnaryOp::sigmoid}) {
    for (DType dt : kFloats) {
      CAPTURE(unary_op_name(op));
      CAPTURE(dt);
      Tensor xc = x.to(dt);
      SL_CHECK_CLOSE_TOL(ops::unary(op, xc.to(kGPU)).cpu(), ops::unary(op, xc),
                         elementwise_tol(dt));
    }
  }
}

TEST_CASE("cuda: relu keeps NaN and -0, and relu's gradient passes at NaN, as PyTorch" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("relu NaN");
  // absolute expectations (PyTorch's relu is x < 0 ? 0 : x, its backward y <= 0 ? 0 : g), not a
  // comparison with the CPU, so that both devices are held to them
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = tensor({nan, -1.5, 2.5, -0.0, 0.0, nan, -2.0, 3.0, nan}, {.dtype = DType::f64});
  Tensor want = tensor({nan, 0.0, 2.5, -0.0, 0.0, nan, 0.0, 3.0, nan}, {.dtype = DType::f64});
  Tensor want_g = tensor({7.0, 0.0, 7.0, 0.0, 0.0, 7.0, 0.0, 7.0, 7.0}, {.dtype = DType::f64});
  for (DType dt : kFloats) {
    CAPTURE(dt);
    Tensor gx = x.to(dt).to(kGPU);
    Tensor in_place = gx.clone();
    ops::unary_(UnaryOp::relu, in_place);
    for (const Tensor& y : {ops::unary(UnaryOp::relu, gx), in_place}) {
      SL_CHECK_CLOSE(y.cpu(), want.to(dt), 0, 0);                          // NaNs must match
      CHECK(std::signbit(y.cpu().to(DType::f64).to_vector<double>()[3]));  // -0 stays -0
    }
    Tensor g =
        ops::binary(BinaryOp::relu_backward, full({9}, 7.0, {.dtype = dt, .device = kGPU}), gx);
    SL_CHECK_CLOSE(g.cpu(), want_g.to(dt), 0, 0);
  }
}

namespace {

/// Operands for a binary op in its domain: b nonzero for div/fmod/remainder; a positive for pow.
std::pair<Tensor, Tensor> binary_inputs(BinaryOp op, const Shape& sa, const Shape& sb) {
  Tensor a = randn(sa, {.dtype = DType::f64}) * 4;
  Tensor b = randn(sb, {.dtype = DType::f64}) * 4;
  if (op == BinaryOp::div || op == BinaryOp::fmod || op == BinaryOp::remainder) {
    b = b.abs() + 1;
    b = ops::where(ops::binary(BinaryOp::lt, randn(sb, {.dtype = DType::f64}), Scalar(0)), b,
                   ops::unary(UnaryOp::neg, b));
  }
  if (op == BinaryOp::pow) {
    a = a.abs() + 0.5;
    b = b * 0.5;
  }
  return {a, b};
}

bool binary_accepts(BinaryOp op, DType dt) {
  bool needs_float = op == BinaryOp::div || op == BinaryOp::atan2 || op >= BinaryOp::relu_backward;
  if (needs_float && !is_floating(dt)) return false;
  if (dt == DType::b8 && (op == BinaryOp::sub || op == BinaryOp::fmod || op == BinaryOp::pow ||
                          op == BinaryOp::remainder || op == BinaryOp::atan2)) {
    return false;
  }
  if (op == BinaryOp::pow && is_integral(dt)) return false;  // negative exponents tested below
  return true;
}

}  // namespace

TEST_CASE("cuda parity: every binary op, every dtype, with broadcasting" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("binary parity");
  manual_seed(2);
  struct Shapes {
    Shape a, b;
  };
  // the last three take the rows path of loops.cuh (Note [Broadcast rows]): a bias row, a
  // column, both against rows of 32 (a multiple of every dtype's vector width)
  const Shapes cases[] = {{{40, 17}, {40, 17}}, {{3, 1, 17}, {5, 17}}, {{40, 17}, {}},
                          {{1, 33}, {29, 1}},   {{7, 32}, {32}},       {{9, 1}, {9, 32}},
                          {{5, 3, 32}, {3, 1}}};
  for (int o = 0; o < static_cast<int>(BinaryOp::count_); ++o) {
    auto op = static_cast<BinaryOp>(o);
    for (const Shapes& sh : cases) {
      auto [a64, b64] = binary_inputs(op, sh.a, sh.b);
      for (DType dt : kAll) {
        if (!binary_accepts(op, dt)) continue;
        CAPTURE(std::string(binary_op_name(op)));
        CAPTURE(dt);
        CAPTURE(shape_str(sh.a));
        CAPTURE(shape_str(sh.b));
        Tensor a = a64.to(dt), b = b64.to(dt);
        Tensor ga = a.to(kGPU), gb = b.to(kGPU);
        auto tol = elementwise_tol(dt);
        SL_CHECK_CLOSE_TOL(ops::binary(op, ga, gb).cpu(), ops::binary(op, a, b), tol);
        if (op == BinaryOp::add || op == BinaryOp::sub) {
          SL_CHECK_CLOSE_TOL(ops::binary(op, ga, gb, Scalar(3)).cpu(),
                             ops::binary(op, a, b, Scalar(3)), tol);
        }
      }
    }
  }
}

TEST_CASE("cuda parity: integer pow, fmod and remainder with negative operands" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("integer binary parity");
  Tensor a = from_vector<int64_t>({7, -7, 7, -7, 0, 3, -2, 1, -1, 5});
  Tensor b = from_vector<int64_t>({3, 3, -3, -3, 5, 0, 3, -4, -3, 2});
  for (DType dt : {DType::i64, DType::i32}) {
    CAPTURE(dt);
    Tensor x = a.to(dt), y = b.to(dt);
    SL_CHECK_CLOSE(ops::binary(BinaryOp::pow, x.to(kGPU), y.to(kGPU)).cpu(),
                   ops::binary(BinaryOp::pow, x, y), 0, 0);
    Tensor nz = ops::binary(BinaryOp::add, y, ops::binary(BinaryOp::eq, y, Scalar(0)).to(dt));
    for (BinaryOp op : {BinaryOp::fmod, BinaryOp::remainder}) {
      SL_CHECK_CLOSE(ops::binary(op, x.to(kGPU), nz.to(kGPU)).cpu(), ops::binary(op, x, nz), 0, 0);
    }
    SL_CHECK_THROWS(ops::binary(BinaryOp::fmod, x.to(kGPU), y.to(kGPU)), ValueError,
                    "fmod: integer division by zero");
    SL_CHECK_THROWS(ops::binary(BinaryOp::remainder, x.to(kGPU), y.to(kGPU)), ValueError,
                    "remainder: integer division by zero");
  }
}

TEST_CASE("cuda parity: in-place ops, where, clamp, masked_fill" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("in-place, where, clamp");
  manual_seed(3);
  for (DType dt : kAll) {
    CAPTURE(dt);
    auto tol = elementwise_tol(dt);
    Tensor x = (randn({31, 8}) * 5).to(dt);
    Tensor y = (randn({8}) * 5).to(dt);
    Tensor cond = randn({31, 1}).gt(0);
    Tensor gx = x.to(kGPU), gy = y.to(kGPU), gc = cond.to(kGPU);
    SL_CHECK_CLOSE_TOL(ops::where(gc, gx, gy).cpu(), ops::where(cond, x, y), tol);
    if (dt != DType::b8) {
      SL_CHECK_CLOSE_TOL(ops::clamp(gx, Scalar(-2), Scalar(3)).cpu(),
                         ops::clamp(x, Scalar(-2), Scalar(3)), tol);
      SL_CHECK_CLOSE_TOL(ops::clamp(gx, std::nullopt, Scalar(1)).cpu(),
                         ops::clamp(x, std::nullopt, Scalar(1)), tol);
      SL_CHECK_CLOSE_TOL(ops::clamp(gx.t(), Scalar(0), std::nullopt).cpu(),
                         ops::clamp(x.t(), Scalar(0), std::nullopt), tol);
      Tensor gi = gx.clone(), ci = x.clone();
      ops::binary_(BinaryOp::mul, gi, gy);
      ops::binary_(BinaryOp::mul, ci, y);
      SL_CHECK_CLOSE_TOL(gi.cpu(), ci, tol);
      ops::clamp_(gi, Scalar(-1), Scalar(1));
      ops::clamp_(ci, Scalar(-1), Scalar(1));
      SL_CHECK_CLOSE_TOL(gi.cpu(), ci, tol);
    } else {
      // integer bounds clamp a bool tensor in int64, as PyTorch 1.13; bool bounds are refused
      Tensor gb = ops::clamp(gx, Scalar(0), Scalar(1));
      CHECK(gb.dtype() == DType::i64);
      SL_CHECK_CLOSE_TOL(gb.cpu(), ops::clamp(x, Scalar(0), Scalar(1)), tol);
      SL_CHECK_THROWS(ops::clamp(gx, Scalar(false), Scalar(true)), DTypeError,
                      "clamp: not supported for bool tensors with bool bounds");
    }
    SL_CHECK_CLOSE_TOL(ops::masked_fill(gx, gc, Scalar(1)).cpu(),
                       ops::masked_fill(x, cond, Scalar(1)), tol);
  }
  Tensor nan = tensor({0.0f / 0.0f, 1.0f, -5.0f}).to(kGPU);
  CHECK(std::isnan(ops::clamp(nan, Scalar(0), Scalar(2)).cpu().to_vector<float>()[0]));
  Tensor f = randn({4, 4}).to(kGPU);
  ops::unary_(UnaryOp::exp, f);
  CHECK(f.min().item<float>() > 0);
}

TEST_CASE("cuda: elementwise errors name the op" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("elementwise errors");
  Tensor i = from_vector<int64_t>({1, 2}).to(kGPU);
  SL_CHECK_THROWS(ops::unary_(UnaryOp::exp, i), DTypeError,
                  "exp_: result type float cannot be stored in place in a int64 tensor");
  SL_CHECK_THROWS(ops::binary(BinaryOp::sub, ones({2}, {.dtype = DType::b8, .device = kGPU}),
                              ones({2}, {.dtype = DType::b8, .device = kGPU})),
                  DTypeError, "sub");
  // Note [Bool inputs]: the ops PyTorch refuses on bool refuse on the GPU too
  const Tensor b = ones({2}, {.dtype = DType::b8, .device = kGPU});
  SL_CHECK_THROWS(ops::unary(UnaryOp::abs, b), DTypeError, "abs: not supported for bool tensors");
  SL_CHECK_THROWS(ops::binary(BinaryOp::pow, b, b), DTypeError,
                  "pow: not supported for bool tensors");
  CHECK(ops::unary(UnaryOp::square, b).dtype() == DType::i64);
  SL_CHECK_THROWS(ones({2}).to(kGPU) + ones({3}).to(kGPU), ShapeError,
                  "add: shapes [2] and [3] do not broadcast");
  SL_CHECK_THROWS(ones({2}).to(kGPU) + ones({2}), DeviceError,
                  "expected all tensors on the same device");
  // a 0-d CPU tensor mixes with a GPU tensor as a scalar, as in PyTorch
  Tensor s = scalar_tensor(2.0f);
  SL_CHECK_CLOSE((ones({3}).to(kGPU) * s).cpu(), full({3}, 2.0f), 0, 0);
}
