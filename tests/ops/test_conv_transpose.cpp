// conv_transpose1d / conv_transpose2d: outputs and all three gradients against the definition
// (a direct scatter loop in double, independent of the conv kernels the op reuses), the adjoint
// identity with conv2d, gradcheck in f64, unbatched and 1-d forms, 16-bit inputs, and every
// refusal. PyTorch parity (fixtures) is in tests/nn/test_layers_kernels.cpp.
#include <cmath>

#include "autograd/ops/conv.h"
#include "support/testing.h"

using namespace sl;

namespace {

const TensorOptions kF64{.dtype = DType::f64};

struct TGeo {
  int64_t N, C, H, W, O, G, kh, kw, sh, sw, ph, pw, oph, opw, dh, dw;
  int64_t out_h() const { return (H - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1; }
  int64_t out_w() const { return (W - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1; }
};

/// y, grad_x, grad_w, grad_b of the transposed convolution by its definition (each input
/// element x[n, c, h, w] scatters x * W[c, o, i, j] to y[n, grp * Og + o, h * sh - ph + i * dh,
/// w * sw - pw + j * dw] where that lies inside the output), in double, with each value's sum
/// of term magnitudes for a rounding bound.
struct TRef {
  std::vector<double> y, gx, gw, gb, y_abs, gx_abs, gw_abs, gb_abs;
};

TRef direct_transpose(const TGeo& q, const std::vector<double>& x, const std::vector<double>& w,
                      const std::vector<double>& b, const std::vector<double>& gy) {
  const int64_t Ho = q.out_h(), Wo = q.out_w(), Cg = q.C / q.G, Og = q.O / q.G;
  TRef r;
  r.y.assign(static_cast<size_t>(q.N * q.O * Ho * Wo), 0.0);
  r.y_abs = r.y;
  r.gx.assign(x.size(), 0.0);
  r.gx_abs = r.gx;
  r.gw.assign(w.size(), 0.0);
  r.gw_abs = r.gw;
  r.gb.assign(static_cast<size_t>(q.O), 0.0);
  r.gb_abs = r.gb;
  for (int64_t n = 0; n < q.N; ++n)
    for (int64_t o = 0; o < q.O; ++o)
      for (int64_t k = 0; k < Ho * Wo; ++k) {
        const auto yi = static_cast<size_t>((n * q.O + o) * Ho * Wo + k);
        r.y[yi] = b[static_cast<size_t>(o)];
        r.y_abs[yi] = std::abs(b[static_cast<size_t>(o)]);
        r.gb[static_cast<size_t>(o)] += gy[yi];
        r.gb_abs[static_cast<size_t>(o)] += std::abs(gy[yi]);
      }
  for (int64_t n = 0; n < q.N; ++n)
    for (int64_t c = 0; c < q.C; ++c)
      for (int64_t h = 0; h < q.H; ++h)
        for (int64_t v = 0; v < q.W; ++v) {
          const auto xi = static_cast<size_t>(((n * q.C + c) * q.H + h) * q.W + v);
          const int64_t grp = c / Cg;
          for (int64_t ol = 0; ol < Og; ++ol)
            for (int64_t i = 0; i < q.kh; ++i)
              for (int64_t j = 0; j < q.kw; ++j) {
                const int64_t oh = h * q.sh - q.ph + i * q.dh, ow = v * q.sw - q.pw + j * q.dw;
                if (oh < 0 || oh >= Ho || ow < 0 || ow >= Wo) continue;
                const int64_t o = grp * Og + ol;
                const auto yi = static_cast<size_t>(((n * q.O + o) * Ho + oh) * Wo + ow);
                const auto wi = static_cast<size_t>(((c * Og + ol) * q.kh + i) * q.kw + j);
                r.y[yi] += x[xi] * w[wi];
                r.y_abs[yi] += std::abs(x[xi] * w[wi]);
                r.gx[xi] += gy[yi] * w[wi];
                r.gx_abs[xi] += std::abs(gy[yi] * w[wi]);
                r.gw[wi] += gy[yi] * x[xi];
                r.gw_abs[wi] += std::abs(gy[yi] * x[xi]);
              }
        }
  return r;
}

/// |got - ref| <= gamma_n * abs_sum per value: the rounding bound of any order of summing n
/// terms (n * u / (1 - n * u), u the unit roundoff of got's dtype).
void check_bound(const Tensor& got, const std::vector<double>& ref,
                 const std::vector<double>& abs_sum, int64_t n, double u, const char* what) {
  CAPTURE(what);
  const std::vector<double> g = got.to(DType::f64).contiguous().to_vector<double>();
  REQUIRE(g.size() == ref.size());
  const double gamma = static_cast<double>(n) * u / (1.0 - static_cast<double>(n) * u);
  int64_t bad = 0;
  double worst = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    const double err = std::abs(g[k] - ref[k]), tol = gamma * abs_sum[k] + 1e-300;
    if (err > tol) ++bad;
    worst = std::max(worst, err / tol);
  }
  CAPTURE(worst);
  CHECK(bad == 0);
}

/// Random data for q in f64 and f32 (the f32 run uses the f64 values rounded, the reference
/// those rounded values), forward with bias, backward with a random grad_y; checks y and the
/// three gradients against the definition.
void check_transpose_geometry(const TGeo& q) {
  CAPTURE(q.H);
  CAPTURE(q.W);
  CAPTURE(q.sh);
  CAPTURE(q.oph);
  CAPTURE(q.opw);
  CAPTURE(q.dh);
  CAPTURE(q.G);
  const Tensor x64 = randn({q.N, q.C, q.H, q.W}, kF64);
  const Tensor w64 = randn({q.C, q.O / q.G, q.kh, q.kw}, kF64);
  const Tensor b64 = randn({q.O}, kF64);
  const Tensor gy64 = randn({q.N, q.O, q.out_h(), q.out_w()}, kF64);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dtype_name(dt));
    // detached: to(f64) returns the f64 tensor itself, which must stay a plain leaf
    Tensor x = x64.to(dt).detach().requires_grad_(), w = w64.to(dt).detach().requires_grad_();
    Tensor b = b64.to(dt).detach().requires_grad_(), gy = gy64.to(dt);
    auto vals = [](const Tensor& t) { return t.to(DType::f64).to_vector<double>(); };
    const TRef r = direct_transpose(q, vals(x), vals(w), vals(b), vals(gy));
    Tensor y =
        conv_transpose2d(x, w, b, {q.sh, q.sw}, {q.ph, q.pw}, {q.oph, q.opw}, q.G, {q.dh, q.dw});
    REQUIRE(y.sizes() == Shape{q.N, q.O, q.out_h(), q.out_w()});
    y.backward(gy);
    const double u = dt == DType::f64 ? 0x1p-53 : 0x1p-24;
    const int64_t taps = q.kh * q.kw;
    // terms per value (+2: the bias, and the rounding of each product)
    check_bound(y, r.y, r.y_abs, q.C / q.G * taps + 2, u, "y");
    check_bound(x.grad(), r.gx, r.gx_abs, q.O / q.G * taps + 1, u, "grad_x");
    check_bound(w.grad(), r.gw, r.gw_abs, q.N * q.H * q.W + 1, u, "grad_w");
    check_bound(b.grad(), r.gb, r.gb_abs, q.N * q.out_h() * q.out_w(), u, "grad_b");
  }
}

}  // namespace

TEST_CASE("conv_transpose2d: f64 and f32 match the definition, outputs and all gradients") {
  // N, C, H, W, O, G, kh, kw, sh, sw, ph, pw, oph, opw, dh, dw
  const TGeo geos[] = {
      {2, 3, 5, 4, 4, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},  // stride 2, output_padding 1 (floor)
      {2, 4, 5, 6, 6, 2, 3, 2, 1, 2, 2, 0, 0, 1, 2, 2},  // groups, dilation, padding > k/2
      // output_padding >= stride, allowed by dilation (the padded-input path), both axes
      {2, 2, 4, 5, 3, 1, 3, 3, 1, 2, 0, 1, 1, 2, 2, 3},
      {1, 2, 3, 3, 2, 1, 2, 2, 1, 1, 0, 0, 3, 0, 4, 1},  // output_padding 3 (stride 1): 3 extra
      {3, 4, 3, 3, 4, 4, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1},  // depthwise, 3x3 stride 1
      {2, 3, 6, 7, 5, 1, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1},  // 3x3 stride 1, one group (Winograd)
      {2, 2, 4, 4, 3, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},  // 1x1 (pointwise kernel path)
      {2, 2, 3, 4, 2, 1, 4, 3, 3, 2, 2, 1, 2, 1, 1, 1},  // stride 3, output_padding 2
      {1, 2, 2, 2, 2, 1, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1},  // padding crops to a 1x1 output
      {0, 2, 3, 3, 2, 1, 2, 2, 2, 2, 0, 0, 1, 1, 1, 1},  // empty batch
  };
  manual_seed(31);
  for (const TGeo& q : geos) check_transpose_geometry(q);
}

TEST_CASE("conv_transpose2d: the adjoint of conv2d w.r.t. its input") {
  // <conv2d(z, W), x> = <z, conv_transpose2d(x, W)> for every z of the transposed output's
  // shape: the defining property, checked against the independently written conv2d. f64 sums
  // of ~10^3 O(1) products: rtol 1e-12.
  manual_seed(32);
  Tensor x = randn({2, 4, 5, 6}, kF64), w = randn({4, 3, 3, 2}, kF64);
  const ExpandingArray<2> s{2, 3}, p{1, 0}, d{2, 1};
  Tensor y = conv_transpose2d(x, w, Tensor(), s, p, {1, 2}, 2, d);
  Tensor z = randn(y.sizes(), kF64);
  Tensor cz = conv2d(z, w, Tensor(), s, ConvPadding<2>(p), d, 2);
  REQUIRE(cz.sizes() == x.sizes());
  const double lhs = (cz * x).sum().item<double>(), rhs = (z * y).sum().item<double>();
  CHECK(lhs == doctest::Approx(rhs).epsilon(1e-12));
}

TEST_CASE("conv_transpose2d / conv_transpose1d: gradcheck (f64) of input, weight and bias") {
  manual_seed(33);
  struct Case {
    Shape x, w;
    ExpandingArray<2> s, p, op;
    int64_t g;
    ExpandingArray<2> d;
  };
  const Case cases[] = {
      {{2, 2, 3, 2}, {2, 2, 3, 3}, 2, 1, 1, 1, 1},
      {{1, 4, 3, 4}, {4, 1, 2, 3}, {1, 2}, {0, 1}, {0, 1}, 2, {2, 1}},
      {{1, 2, 3, 3}, {2, 2, 2, 2}, 1, 0, {1, 2}, 1, 3},  // output_padding >= stride
  };
  for (const Case& c : cases) {
    Tensor x = randn(c.x, kF64).requires_grad_();
    Tensor w = randn(c.w, kF64).requires_grad_();
    Tensor b = randn({c.w[1] * c.g}, kF64).requires_grad_();
    CHECK(gradcheck(
        [&](const TensorList& in) {
          return conv_transpose2d(in[0], in[1], in[2], c.s, c.p, c.op, c.g, c.d);
        },
        {x, w, b}));
  }
  Tensor x1 = randn({2, 2, 4}, kF64).requires_grad_();
  Tensor w1 = randn({2, 3, 3}, kF64).requires_grad_();
  Tensor b1 = randn({3}, kF64).requires_grad_();
  CHECK(gradcheck(
      [&](const TensorList& in) { return conv_transpose1d(in[0], in[1], in[2], 2, 1, 1); },
      {x1, w1, b1}));
  // unbatched, no bias
  Tensor x2 = randn({2, 3, 2}, kF64).requires_grad_();
  Tensor w2 = randn({2, 1, 2, 2}, kF64).requires_grad_();
  CHECK(gradcheck(
      [&](const TensorList& in) { return conv_transpose2d(in[0], in[1], Tensor(), 2, 0, 1); },
      {x2, w2}));
}

TEST_CASE("conv_transpose: unbatched and 1-d forms equal the batched 2-d op") {
  manual_seed(34);
  Tensor x = randn({3, 4, 5}), w = randn({3, 2, 3, 2}), b = randn({2});
  Tensor y = conv_transpose2d(x, w, b, 2, {1, 0}, 1);
  CHECK(y.sizes() == Shape{2, 8, 11});
  SL_CHECK_CLOSE(y, conv_transpose2d(x.unsqueeze(0), w, b, 2, {1, 0}, 1).squeeze(0), 0, 0);
  Tensor x1 = randn({2, 4, 7}), w1 = randn({4, 3, 3}), b1 = randn({6});
  Tensor y1 = conv_transpose1d(x1, w1, b1, 3, 1, 2, 2, 2);
  // L_out = (7 - 1) * 3 - 2 + 2 * 2 + 2 + 1 = 23
  CHECK(y1.sizes() == Shape{2, 6, 23});
  SL_CHECK_CLOSE(
      y1,
      conv_transpose2d(x1.unsqueeze(2), w1.unsqueeze(2), b1, {1, 3}, {0, 1}, {0, 2}, 2, {1, 2})
          .squeeze(2),
      0, 0);
  SL_CHECK_CLOSE(conv_transpose1d(x1[0], w1, b1, 3, 1, 2, 2, 2), y1[0], 0, 0);
}

TEST_CASE("conv_transpose2d: f16 and bf16 are computed in float32") {
  // The conv family computes 16-bit inputs in float32 and rounds the result once, so the
  // result is bit for bit the float32 op on the same (16-bit representable) values, rounded.
  manual_seed(35);
  for (DType dt : {DType::f16, DType::bf16}) {
    CAPTURE(dtype_name(dt));
    Tensor x = randn({2, 2, 3, 3}).to(dt).requires_grad_(), w = randn({2, 3, 2, 2}).to(dt);
    w.requires_grad_();
    Tensor b = randn({3}).to(dt).requires_grad_();
    Tensor y = conv_transpose2d(x, w, b, 2, 0, 1);
    CHECK(y.dtype() == dt);
    Tensor x32 = x.detach().to(DType::f32).requires_grad_();
    Tensor w32 = w.detach().to(DType::f32).requires_grad_();
    Tensor b32 = b.detach().to(DType::f32).requires_grad_();
    Tensor y32 = conv_transpose2d(x32, w32, b32, 2, 0, 1);
    // the bias is added after the rounding in 16-bit: compare without it, and the bias
    // separately through its gradient
    SL_CHECK_CLOSE(conv_transpose2d(x, w, Tensor(), 2, 0, 1),
                   conv_transpose2d(x32, w32, Tensor(), 2, 0, 1).to(dt), 0, 0);
    Tensor gy = randn(y.sizes()).to(dt);
    y.backward(gy);
    y32.backward(gy.to(DType::f32));
    SL_CHECK_CLOSE(x.grad(), x32.grad().to(dt), 0, 0);
    SL_CHECK_CLOSE(w.grad(), w32.grad().to(dt), 0, 0);
  }
}

TEST_CASE("conv_transpose: error paths") {
  Tensor x = randn({2, 4, 5, 5}), w = randn({4, 3, 3, 3});
  SL_CHECK_THROWS(conv_transpose2d(randn({5, 5}), w), ShapeError,
                  "conv_transpose2d: expected a 3-d (unbatched) or 4-d input, got [5, 5]");
  SL_CHECK_THROWS(conv_transpose2d(x, randn({4, 3, 3})), ShapeError,
                  "conv_transpose2d: expected a 4-d weight [in, out / groups, kh, kw], got "
                  "[4, 3, 3]");
  SL_CHECK_THROWS(conv_transpose2d(x, randn({5, 3, 3, 3})), ShapeError,
                  "conv_transpose2d: input has 4 channels but weight of shape [5, 3, 3, 3] ([in, "
                  "out / groups, kh, kw]) expects 5");
  SL_CHECK_THROWS(conv_transpose2d(x, w, Tensor(), 1, 0, 0, 3), ShapeError,
                  "conv_transpose2d: weight of shape [4, 3, 3, 3] has 4 input channels (dim 0), "
                  "which must be a positive multiple of groups (3)");
  SL_CHECK_THROWS(conv_transpose2d(x, w, randn({4})), ShapeError,
                  "conv_transpose2d: bias of shape [4] does not match 3 output channels");
  // groups 2: 3 * 2 = 6 output channels
  SL_CHECK_THROWS(conv_transpose2d(x, w, randn({3}), 1, 0, 0, 2), ShapeError,
                  "bias of shape [3] does not match 6 output channels");
  SL_CHECK_THROWS(conv_transpose2d(x, w, Tensor(), 2, 0, 2), ValueError,
                  "conv_transpose2d: output_padding must be smaller than either stride or "
                  "dilation, got output_padding [2, 2], stride [2, 2], dilation [1, 1]");
  SL_CHECK_THROWS(conv_transpose2d(x, w, Tensor(), {1, 2}, 0, {2, 1}, 1, {2, 1}), ValueError,
                  "output_padding [2, 1], stride [1, 2], dilation [2, 1]");
  SL_CHECK_THROWS(conv_transpose2d(x, w, Tensor(), 0), ValueError,
                  "conv_transpose2d: stride must be positive, got 0");
  SL_CHECK_THROWS(conv_transpose2d(x, w, Tensor(), 1, 0, 0, 1, {1, 0}), ValueError,
                  "conv_transpose2d: dilation must be positive, got 0");
  SL_CHECK_THROWS(conv_transpose2d(x, w, Tensor(), 1, -1), ValueError,
                  "conv_transpose2d: padding must be non-negative, got -1");
  SL_CHECK_THROWS(conv_transpose2d(x, w, Tensor(), 1, 0, -1), ValueError,
                  "conv_transpose2d: output_padding must be non-negative, got -1");
  SL_CHECK_THROWS(conv_transpose2d(x, w, Tensor(), 1, 0, 0, 0), ValueError,
                  "conv_transpose2d: groups must be positive, got 0");
  SL_CHECK_THROWS(conv_transpose2d(x, randn({4, 3, 0, 3})), ShapeError,
                  "conv_transpose2d: kernel size must be positive, got weight of shape "
                  "[4, 3, 0, 3]");
  // (5 - 1) - 2 * 5 + 2 + 1 = -3, as PyTorch ("Output size is too small"); 0 is refused too
  SL_CHECK_THROWS(conv_transpose2d(x, w, Tensor(), 1, 5), ShapeError,
                  "conv_transpose2d: the output size [-3, -3] computed for an input of spatial "
                  "size [5, 5] is too small (must be positive)");
  SL_CHECK_THROWS(conv_transpose2d(randn({1, 4, 1, 5}), randn({4, 3, 2, 2}), Tensor(), 1, 1),
                  ShapeError, "the output size [0, 4]");
  SL_CHECK_THROWS(conv_transpose2d(randn({1, 4, 0, 3}), w), ShapeError,
                  "conv_transpose2d: expected non-empty spatial dims, got input of shape "
                  "[1, 4, 0, 3]");
  SL_CHECK_THROWS(conv_transpose2d(x, w.to(DType::f64)), DTypeError,
                  "conv_transpose2d: input, weight and bias must have the same dtype");
  SL_CHECK_THROWS(conv_transpose2d(x.to(DType::i64), w.to(DType::i64)), DTypeError,
                  "conv_transpose2d: expected a floating input, got int64");
  SL_CHECK_THROWS(conv_transpose2d(Tensor(), w), ValueError, "conv_transpose2d");
  SL_CHECK_THROWS(conv_transpose1d(randn({2, 3, 4, 5}), randn({3, 2, 3})), ShapeError,
                  "conv_transpose1d: expected a 2-d (unbatched) or 3-d input");
  SL_CHECK_THROWS(conv_transpose1d(randn({2, 3, 5}), randn({3, 2, 3, 3})), ShapeError,
                  "conv_transpose1d: expected a 3-d weight [in, out / groups, k], got "
                  "[3, 2, 3, 3]");
  SL_CHECK_THROWS(conv_transpose1d(randn({2, 3, 5}), randn({4, 2, 3})), ShapeError,
                  "conv_transpose1d: input has 3 channels but weight of shape [4, 2, 3]");
  SL_CHECK_THROWS(conv_transpose1d(randn({2, 3, 5}), randn({3, 2, 0})), ShapeError,
                  "conv_transpose1d: kernel size must be positive, got weight of shape [3, 2, 0]");
  SL_CHECK_THROWS(conv_transpose1d(randn({2, 3, 5}), randn({3, 2, 3}), Tensor(), 2, 0, 2),
                  ValueError,
                  "conv_transpose1d: output_padding must be smaller than either stride or "
                  "dilation, got output_padding 2, stride 2, dilation 1");
}
