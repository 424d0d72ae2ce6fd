// conv1d / conv2d: PyTorch parity (fixtures from tools/gen_op_fixtures.py), gradcheck in f64
// for every option combination of the fixture table, and the error paths.
#include "ops/fixtures.h"
#include "support/testing.h"

using namespace sl;
using sl::testing::Fixture;

namespace {

template <size_t D>
ExpandingArray<D> arr(const std::vector<int64_t>& v) {
  ExpandingArray<D> a(0);
  for (size_t i = 0; i < D; ++i) a.v[i] = v[i];
  return a;
}

template <size_t D>
ConvPadding<D> padding_of(const std::vector<int64_t>& v) {
  if (v[0] == 1) return ConvPadding<D>("same");
  if (v[0] == 2) return ConvPadding<D>("valid");
  return ConvPadding<D>(arr<D>({v.begin() + 1, v.end()}));
}

/// Runs the fixture case's convolution on (x, w, b).
Tensor run_case(const Fixture& fx, const std::string& c, const Tensor& x, const Tensor& w,
                const Tensor& b) {
  auto s = fx.ints(c, "stride"), d = fx.ints(c, "dilation"), p = fx.ints(c, "padding");
  int64_t groups = fx.ints(c, "groups")[0];
  if (c.rfind("c1_", 0) == 0) {
    return conv1d(x, w, b, arr<1>(s), padding_of<1>(p), arr<1>(d), groups);
  }
  return conv2d(x, w, b, arr<2>(s), padding_of<2>(p), arr<2>(d), groups);
}

}  // namespace

TEST_CASE("conv: PyTorch parity of outputs and gradients (f32)") {
  Fixture fx("conv");
  auto cases = fx.cases();
  REQUIRE(cases.size() >= 10);
  for (const auto& c : cases) {
    CAPTURE(c);
    Tensor x = fx.get(c, "x").requires_grad_();
    Tensor w = fx.get(c, "w").requires_grad_();
    Tensor b = fx.has(c, "b") ? fx.get(c, "b").requires_grad_() : Tensor();
    Tensor y = run_case(fx, c, x, w, b);
    SL_CHECK_CLOSE(y, fx.get(c, "y"), 1e-5, 1e-6);
    y.backward(fx.get(c, "gy"));
    SL_CHECK_CLOSE(x.grad(), fx.get(c, "grad_x"), 1e-5, 1e-6);
    // grad_w and grad_b sum N * Ho * Wo (up to 112) products of O(1) values, so two f32
    // summation orders (ours vs oneDNN's) can differ by ~112 * 6e-8 ~ 7e-6 absolute where the
    // sum cancels to near 0 (seen: 2e-6 at a value of -0.045): atol 1e-5.
    SL_CHECK_CLOSE(w.grad(), fx.get(c, "grad_w"), 1e-5, 1e-5);
    if (b.defined()) SL_CHECK_CLOSE(b.grad(), fx.get(c, "grad_b"), 1e-5, 1e-5);
  }
}

TEST_CASE("conv: gradcheck (f64) for every fixture option combination") {
  Fixture fx("conv");
  for (const auto& c : fx.cases()) {
    CAPTURE(c);
    // The fixture shapes, cut to one image to keep the Jacobians small.
    Tensor x = fx.get_f64(c, "x").narrow(0, 0, 1).contiguous().requires_grad_();
    Tensor w = fx.get_f64(c, "w").requires_grad_();
    Tensor b = fx.has(c, "b") ? fx.get_f64(c, "b").requires_grad_() : Tensor();
    CHECK(gradcheck([&](const TensorList& in) { return run_case(fx, c, in[0], in[1], in[2]); },
                    {x, w, b}));
  }
}

TEST_CASE("conv: unbatched input matches the batched result") {
  manual_seed(11);
  Tensor x = randn({3, 6, 5}), w = randn({4, 3, 3, 2}), b = randn({4});
  Tensor y = conv2d(x, w, b, 1, {1, 0});
  Tensor yb = conv2d(x.unsqueeze(0), w, b, 1, {1, 0}).squeeze(0);
  CHECK(y.sizes() == Shape{4, 6, 4});
  SL_CHECK_CLOSE(y, yb, 0, 0);
  Tensor x1 = randn({3, 9}), w1 = randn({2, 3, 4});
  SL_CHECK_CLOSE(conv1d(x1, w1, Tensor(), 2), conv1d(x1.unsqueeze(0), w1, Tensor(), 2).squeeze(0),
                 0, 0);
}

namespace {

struct Geo {
  int64_t N, C, H, W, O, G, kh, kw, sh, sw, ph, pw, dh, dw;
};

/// The convolution by its definition, in double, independent of im2col and the GEMM.
std::vector<double> direct_conv(const Geo& q, const std::vector<double>& xv,
                                const std::vector<double>& wv, const std::vector<double>& bv,
                                int64_t Ho, int64_t Wo) {
  std::vector<double> ref(static_cast<size_t>(q.N * q.O * Ho * Wo));
  const int64_t Cg = q.C / q.G, Og = q.O / q.G;
  for (int64_t n = 0; n < q.N; ++n)
    for (int64_t o = 0; o < q.O; ++o)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double s = bv[static_cast<size_t>(o)];
          const int64_t g = o / Og;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t i = 0; i < q.kh; ++i)
              for (int64_t j = 0; j < q.kw; ++j) {
                const int64_t ih = oh * q.sh - q.ph + i * q.dh, iw = ow * q.sw - q.pw + j * q.dw;
                if (ih < 0 || ih >= q.H || iw < 0 || iw >= q.W) continue;
                const int64_t c = g * Cg + ci;
                s += xv[static_cast<size_t>(((n * q.C + c) * q.H + ih) * q.W + iw)] *
                     wv[static_cast<size_t>(((o * Cg + ci) * q.kh + i) * q.kw + j)];
              }
          ref[static_cast<size_t>(((n * q.O + o) * Ho + oh) * Wo + ow)] = s;
        }
  return ref;
}

}  // namespace

TEST_CASE("conv: float64 matches the definition; gradients satisfy the adjoint identities") {
  // Geometries reaching every kernel path: several images per GEMM (small outputs), one image
  // per GEMM (outputs >= 512), 1x1 stride-1 convolutions read straight from the input (with
  // both), stride-1 grad_input as a convolution of grad_out, and the col2im fallback (stride 2,
  // and a 1x1 convolution padded beyond its kernel).
  const Geo geos[] = {
      {2, 4, 6, 7, 6, 2, 3, 2, 2, 1, 1, 2, 1, 2},    // several images, col2im (stride 2)
      {2, 3, 24, 23, 4, 1, 3, 3, 1, 1, 1, 1, 1, 1},  // one image per GEMM, transposed grad
      {2, 4, 24, 24, 6, 2, 1, 1, 1, 1, 0, 0, 1, 1},  // 1x1 direct, one image per GEMM
      {3, 4, 5, 5, 2, 1, 1, 1, 1, 1, 0, 0, 1, 1},    // 1x1 direct, several images
      {2, 3, 6, 5, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1},    // 1x1 padded by 1: col2im fallback
      {2, 2, 9, 9, 3, 1, 3, 3, 1, 1, 2, 3, 2, 2},    // dilated, transposed grad
  };
  manual_seed(12);
  auto f64 = TensorOptions{.dtype = DType::f64};
  for (const Geo& q : geos) {
    CAPTURE(q.H);
    CAPTURE(q.kh);
    Tensor x = randn({q.N, q.C, q.H, q.W}, f64).requires_grad_();
    Tensor w = randn({q.O, q.C / q.G, q.kh, q.kw}, f64).requires_grad_();
    Tensor b = randn({q.O}, f64);
    Tensor y = conv2d(x, w, b, {q.sh, q.sw}, {q.ph, q.pw}, {q.dh, q.dw}, q.G);
    const int64_t Ho = y.size(2), Wo = y.size(3);
    auto ref =
        direct_conv(q, x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>(), Ho, Wo);
    SL_CHECK_CLOSE(y, from_vector(ref, y.sizes()), 1e-12, 1e-12);
    // y - b is bilinear in (x, w): <y - b, gy> = <x, grad_x> = <w, grad_w>
    Tensor gy = randn(y.sizes(), f64);
    y.backward(gy);
    const double lhs = ((y.detach() - b.view({1, q.O, 1, 1})) * gy).sum().item<double>();
    CHECK((x.detach() * x.grad()).sum().item<double>() == doctest::Approx(lhs).epsilon(1e-10));
    CHECK((w.detach() * w.grad()).sum().item<double>() == doctest::Approx(lhs).epsilon(1e-10));
  }
}

TEST_CASE("conv: error paths") {
  Tensor x = randn({2, 3, 5, 5}), w = randn({4, 3, 3, 3});
  SL_CHECK_THROWS(conv2d(randn({3, 5}), w), ShapeError,
                  "conv2d: expected a 3-d (unbatched) or 4-d input");
  SL_CHECK_THROWS(conv2d(x, randn({4, 3, 3})), ShapeError, "expected a 4-d weight");
  SL_CHECK_THROWS(conv2d(x, randn({4, 2, 3, 3})), ShapeError, "input has 3 channels");
  SL_CHECK_THROWS(conv2d(randn({2, 4, 5, 5}), randn({3, 2, 3, 3}), Tensor(), 1, 0, 1, 2),
                  ShapeError, "out_channels (3) must be divisible by groups (2)");
  SL_CHECK_THROWS(conv2d(x, w, randn({5})), ShapeError, "bias of shape [5]");
  SL_CHECK_THROWS(conv2d(x, randn({4, 3, 7, 3}), Tensor(), 1, 0), ShapeError,
                  "is larger than the padded input");
  SL_CHECK_THROWS(conv2d(x, w, Tensor(), 1, 0, 3), ShapeError, "is larger than the padded input");
  SL_CHECK_THROWS(conv2d(x, w, Tensor(), 2, "same"), ValueError,
                  "padding='same' is not supported for strided convolutions");
  SL_CHECK_THROWS(conv2d(x, w, Tensor(), 0), ValueError, "stride must be positive");
  SL_CHECK_THROWS(conv2d(x, w, Tensor(), 1, -1), ValueError, "padding must be non-negative");
  SL_CHECK_THROWS(conv2d(x, w, Tensor(), 1, 0, 1, 0), ValueError, "groups must be positive");
  SL_CHECK_THROWS(conv2d(x, w.to(DType::f64)), DTypeError, "must have the same dtype");
  SL_CHECK_THROWS(conv2d(x.to(DType::i64), w.to(DType::i64)), DTypeError,
                  "expected a floating input");
  SL_CHECK_THROWS(ConvPadding<2>(std::string("full")), ValueError, "'same' or 'valid', got 'full'");
  SL_CHECK_THROWS(conv1d(randn({2, 3, 4, 5}), randn({2, 3, 3})), ShapeError,
                  "conv1d: expected a 2-d (unbatched) or 3-d input");
  SL_CHECK_THROWS(conv1d(randn({2, 3, 5}), randn({2, 4, 3})), ShapeError,
                  "conv1d: input has 3 channels");
  SL_CHECK_THROWS(conv1d(randn({2, 3, 2}), randn({2, 3, 3})), ShapeError, "conv1d: kernel size");
}
