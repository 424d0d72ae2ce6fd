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
  bool same = false;  ///< padding "same" (stride 1): d * (k - 1) split with the odd one at the end
};

/// The convolution and both its gradients by their definitions, in double, independent of
/// im2col, the GEMM and the transposed-convolution rewrite. Beside each value, the sum of the
/// magnitudes of its terms (for a rounding bound).
struct Reference {
  std::vector<double> y, gx, gw, y_abs, gx_abs, gw_abs;
};

Reference direct_conv(const Geo& q, int64_t pad_h, int64_t pad_w, int64_t Ho, int64_t Wo,
                      const std::vector<double>& xv, const std::vector<double>& wv,
                      const std::vector<double>& bv, const std::vector<double>& gyv) {
  Reference r;
  const int64_t Cg = q.C / q.G, Og = q.O / q.G;
  r.y.assign(static_cast<size_t>(q.N * q.O * Ho * Wo), 0.0);
  r.y_abs = r.y;
  r.gx.assign(xv.size(), 0.0);
  r.gx_abs = r.gx;
  r.gw.assign(wv.size(), 0.0);
  r.gw_abs = r.gw;
  for (int64_t n = 0; n < q.N; ++n)
    for (int64_t o = 0; o < q.O; ++o)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const auto yi = static_cast<size_t>(((n * q.O + o) * Ho + oh) * Wo + ow);
          double s = bv[static_cast<size_t>(o)], sa = std::abs(s);
          const double g = gyv[yi];
          const int64_t grp = o / Og;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t i = 0; i < q.kh; ++i)
              for (int64_t j = 0; j < q.kw; ++j) {
                const int64_t ih = oh * q.sh - pad_h + i * q.dh, iw = ow * q.sw - pad_w + j * q.dw;
                if (ih < 0 || ih >= q.H || iw < 0 || iw >= q.W) continue;
                const auto xi =
                    static_cast<size_t>(((n * q.C + grp * Cg + ci) * q.H + ih) * q.W + iw);
                const auto wi = static_cast<size_t>(((o * Cg + ci) * q.kh + i) * q.kw + j);
                s += xv[xi] * wv[wi];
                sa += std::abs(xv[xi] * wv[wi]);
                r.gx[xi] += g * wv[wi];
                r.gx_abs[xi] += std::abs(g * wv[wi]);
                r.gw[wi] += g * xv[xi];
                r.gw_abs[wi] += std::abs(g * xv[xi]);
              }
          r.y[yi] = s;
          r.y_abs[yi] = sa;
        }
  return r;
}

/// Whether the library runs this geometry through Winograd F(2x2, 3x3) (core/cpu/conv_winograd.h:
/// 3x3, stride 1, dilation 1, one group; every geometry in these tests is far below its size
/// limit).
bool takes_winograd(const Geo& q) {
  return q.kh == 3 && q.kw == 3 && q.sh == 1 && q.sw == 1 && q.dh == 1 && q.dw == 1 && q.G == 1;
}

/// Winograd F(2x2, 3x3) computes y = A^T [(G g G^T) .* (B^T d B)] A per 2x2 output tile and its
/// gradients as the adjoints of these steps (Lavin & Gray 2015), with the matrices below. Every
/// rounding it commits is bounded relative to the same bilinear sums taken with the absolute
/// values of the matrices and of the data: coef[a][t][k] = sum_i |A^T[a][i] G[i][t] B^T[i][k]|
/// weights input element k (0..3 of the tile's 4-wide patch) times tap t towards output a (0..1)
/// of the tile, per dimension. (Without the absolute values the sum is 1 where k == a + t and 0
/// elsewhere: the direct convolution; checked below.)
struct WinogradCoef {
  double c[2][3][4] = {};
  WinogradCoef() {
    const double At[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
    const double Gm[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    const double Bt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
    for (int a = 0; a < 2; ++a)
      for (int t = 0; t < 3; ++t)
        for (int k = 0; k < 4; ++k) {
          double exact = 0;
          for (int i = 0; i < 4; ++i) {
            exact += At[a][i] * Gm[i][t] * Bt[i][k];
            c[a][t][k] += std::abs(At[a][i] * Gm[i][t] * Bt[i][k]);
          }
          REQUIRE(exact == (k == a + t ? 1.0 : 0.0));
        }
  }
};

/// The magnitude sums that bound Winograd's rounding (see WinogradCoef) for y, grad_x and
/// grad_w, in r.y_abs / r.gx_abs / r.gw_abs: the sums of |coef * w * x| (+ |bias|), |coef * w *
/// gy| and |coef * gy * x| over every tile term that reaches each value.
void winograd_abs_sums(const Geo& q, int64_t pad_h, int64_t pad_w, int64_t Ho, int64_t Wo,
                       const std::vector<double>& xv, const std::vector<double>& wv,
                       const std::vector<double>& bv, const std::vector<double>& gyv,
                       Reference& r) {
  const WinogradCoef wc;
  const int64_t Cg = q.C / q.G, Og = q.O / q.G, TH = (Ho + 1) / 2, TW = (Wo + 1) / 2;
  std::fill(r.y_abs.begin(), r.y_abs.end(), 0.0);
  std::fill(r.gx_abs.begin(), r.gx_abs.end(), 0.0);
  std::fill(r.gw_abs.begin(), r.gw_abs.end(), 0.0);
  for (int64_t n = 0; n < q.N; ++n)
    for (int64_t o = 0; o < q.O; ++o)
      for (int64_t th = 0; th < TH; ++th)
        for (int64_t tw = 0; tw < TW; ++tw)
          for (int a = 0; a < 2; ++a)
            for (int b = 0; b < 2; ++b) {
              const int64_t oh = 2 * th + a, ow = 2 * tw + b;
              if (oh >= Ho || ow >= Wo) continue;
              const auto yi = static_cast<size_t>(((n * q.O + o) * Ho + oh) * Wo + ow);
              const double g = std::abs(gyv[yi]);
              r.y_abs[yi] += std::abs(bv[static_cast<size_t>(o)]);
              const int64_t grp = o / Og;
              for (int64_t ci = 0; ci < Cg; ++ci)
                for (int ti = 0; ti < 3; ++ti)
                  for (int tj = 0; tj < 3; ++tj)
                    for (int ki = 0; ki < 4; ++ki)
                      for (int kj = 0; kj < 4; ++kj) {
                        const double cf = wc.c[a][ti][ki] * wc.c[b][tj][kj];
                        const int64_t ih = 2 * th - pad_h + ki, iw = 2 * tw - pad_w + kj;
                        if (cf == 0 || ih < 0 || ih >= q.H || iw < 0 || iw >= q.W) continue;
                        const auto xi =
                            static_cast<size_t>(((n * q.C + grp * Cg + ci) * q.H + ih) * q.W + iw);
                        const auto wi = static_cast<size_t>(((o * Cg + ci) * 3 + ti) * 3 + tj);
                        const double ax = std::abs(xv[xi]), aw = std::abs(wv[wi]);
                        r.y_abs[yi] += cf * aw * ax;
                        r.gx_abs[xi] += cf * aw * g;
                        r.gw_abs[wi] += cf * g * ax;
                      }
            }
}

/// CHECKs |got - ref| <= gamma(n) * abs_sum elementwise, gamma(n) = n u / (1 - n u): the bound
/// on the rounding error of any order of summing n rounded products (u: unit roundoff of the
/// dtype), so it holds for every blocking of the GEMMs.
void check_bound(const Tensor& got, const std::vector<double>& ref,
                 const std::vector<double>& abs_sum, int64_t n, double u, const std::string& what) {
  CAPTURE(what);
  const std::vector<double> g = got.to(DType::f64).to_vector<double>();
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

/// Runs the convolution q (random data, f64 then f32) with bias, backward with a random
/// grad_out, and checks y, grad_x and grad_w against the definition in double: the rounding
/// bound of any summation order, or Winograd's bound where the library takes that path.
void check_geometry(const Geo& q) {
  CAPTURE(q.H);
  CAPTURE(q.W);
  CAPTURE(q.kh);
  CAPTURE(q.N);
  const int64_t th = q.dh * (q.kh - 1), tw = q.dw * (q.kw - 1);
  const int64_t pad_h = q.same ? th / 2 : q.ph, pad_w = q.same ? tw / 2 : q.pw;
  const int64_t pad_h_all = q.same ? th : 2 * q.ph, pad_w_all = q.same ? tw : 2 * q.pw;
  const int64_t Ho = (q.H + pad_h_all - th - 1) / q.sh + 1;
  const int64_t Wo = (q.W + pad_w_all - tw - 1) / q.sw + 1;
  Tensor x64 = randn({q.N, q.C, q.H, q.W}, TensorOptions{.dtype = DType::f64});
  Tensor w64 = randn({q.O, q.C / q.G, q.kh, q.kw}, TensorOptions{.dtype = DType::f64});
  Tensor b64 = randn({q.O}, TensorOptions{.dtype = DType::f64});
  Tensor gy64 = randn({q.N, q.O, Ho, Wo}, TensorOptions{.dtype = DType::f64});
  for (DType dt : {DType::f64, DType::f32}) {
    const std::string dtype = dtype_name(dt);
    CAPTURE(dtype);
    // inputs in dt; the reference from exactly those values
    Tensor x = x64.to(dt).detach(), w = w64.to(dt).detach(), b = b64.to(dt).detach();
    Tensor gy = gy64.to(dt);
    const std::vector<double> xv = x.to(DType::f64).to_vector<double>(),
                              wv = w.to(DType::f64).to_vector<double>(),
                              bv = b.to(DType::f64).to_vector<double>(),
                              gyv = gy.to(DType::f64).to_vector<double>();
    Reference r = direct_conv(q, pad_h, pad_w, Ho, Wo, xv, wv, bv, gyv);
    const bool winograd = takes_winograd(q);
    if (winograd) winograd_abs_sums(q, pad_h, pad_w, Ho, Wo, xv, wv, bv, gyv, r);
    x.requires_grad_();
    w.requires_grad_();
    b.requires_grad_();
    Tensor y = q.same ? conv2d(x, w, b, 1, "same", {q.dh, q.dw}, q.G)
                      : conv2d(x, w, b, {q.sh, q.sw}, {q.ph, q.pw}, {q.dh, q.dw}, q.G);
    REQUIRE(y.sizes() == Shape{q.N, q.O, Ho, Wo});
    y.backward(gy);
    const double u = dt == DType::f64 ? 0x1p-53 : 0x1p-24;
    if (winograd) {
      // Roundings any term goes through: the GEMM's sum (C/g, O/g, or N * tiles terms, and one
      // more per chunk of images), its product, and the transforms, at most 16: y: B^T d B 2, G g
      // G^T 4 (the halvings are exact), A^T M A 4, bias 1; grad_x: A gy A^T 1, G g G^T 4, B dV
      // B^T 4, the overlap of 4 tiles 4; grad_w: A gy A^T 1, B^T d B 2, G^T dU G 4.
      const int64_t tiles = ((Ho + 1) / 2) * ((Wo + 1) / 2);
      check_bound(y, r.y, r.y_abs, q.C / q.G + 16, u, "y (Winograd)");
      check_bound(x.grad(), r.gx, r.gx_abs, q.O / q.G + 16, u, "grad_x (Winograd)");
      check_bound(w.grad(), r.gw, r.gw_abs, q.N * (tiles + 1) + 16, u, "grad_w (Winograd)");
    } else {
      const int64_t taps = q.kh * q.kw;
      // terms per value (+1: the rounding of each product)
      check_bound(y, r.y, r.y_abs, q.C / q.G * taps + 2, u, "y");
      check_bound(x.grad(), r.gx, r.gx_abs, q.O / q.G * taps + 1, u, "grad_x");
      check_bound(w.grad(), r.gw, r.gw_abs, q.N * Ho * Wo + 1, u, "grad_w");
    }
    // grad_b[o]: the sum of grad_out over images and positions
    std::vector<double> gb(static_cast<size_t>(q.O), 0.0), gb_abs = gb;
    for (size_t k = 0; k < gyv.size(); ++k) {
      const auto o = static_cast<size_t>(static_cast<int64_t>(k) / (Ho * Wo) % q.O);
      gb[o] += gyv[k];
      gb_abs[o] += std::abs(gyv[k]);
    }
    check_bound(b.grad(), gb, gb_abs, q.N * Ho * Wo, u, "grad_b");
  }
}

}  // namespace

TEST_CASE("conv: f64 and f32 match the definition, outputs and both gradients, on every path") {
  // Geometries reaching every kernel path: several images per GEMM (small outputs, including a
  // last group of fewer images), one image per GEMM (outputs >= 512), 1x1 stride-1 convolutions
  // read straight from the input, stride-1 grad_input as a convolution of grad_out (groups,
  // dilation, the asymmetric padding of "same" with an even kernel), and the col2im route
  // (stride 2 with the vectorised strided rows, a 1x1 convolution padded beyond its kernel).
  // The 3x3 stride-1 ones (2nd, 6th) take the Winograd path (tested at its edges below).
  const Geo geos[] = {
      {2, 4, 6, 7, 6, 2, 3, 2, 2, 1, 1, 2, 1, 2},        // several images, col2im (stride 2)
      {2, 3, 24, 23, 4, 1, 3, 3, 1, 1, 1, 1, 1, 1},      // one image per GEMM, transposed grad
      {2, 4, 24, 24, 6, 2, 1, 1, 1, 1, 0, 0, 1, 1},      // 1x1 direct, one image per GEMM
      {3, 4, 5, 5, 2, 1, 1, 1, 1, 1, 0, 0, 1, 1},        // 1x1 direct, several images
      {3, 4, 16, 16, 6, 1, 1, 1, 1, 1, 0, 0, 1, 1},      // 1x1 direct, 2 images + 1 direct
      {3, 4, 16, 16, 4, 2, 3, 3, 1, 1, 1, 1, 1, 1},      // 2 images + 1, grouped transposed grad
      {2, 3, 6, 5, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1},        // 1x1 padded by 1: col2im fallback
      {2, 2, 9, 9, 3, 1, 3, 3, 1, 1, 2, 3, 2, 2},        // dilated, transposed grad
      {2, 3, 7, 6, 4, 1, 4, 2, 1, 1, 0, 0, 1, 2, true},  // "same", pads (1, 2) x (1, 1)
      {2, 3, 20, 40, 4, 1, 3, 3, 2, 2, 1, 1, 1, 1},      // ResNet downsampling: stride 2, pad 1
      // Note [Conv image lanes] on a 2-core machine: 23x23 outputs, one image per GEMM raised to
      // 2, so chunks {0,1} {2,3} {4} on 2 lanes, the first lane summing 2 chunks' grad_weight
      {5, 2, 46, 46, 3, 1, 3, 3, 2, 2, 1, 1, 1, 1},
      // Note [Conv patch blocks]: patch matrices above 128 Ki elements, one image per GEMM, run
      // in blocks of output rows, the last one shorter. 11x11 stride (2, 1), groups 2: K 121,
      // 24 x 48 outputs (139392 elements), blocks of 22 + 2 rows, col2im per block
      {2, 2, 48, 48, 4, 2, 11, 11, 2, 1, 5, 5, 1, 1},
      // DeepSpeech2-like 7x5 stride (2, 1), 4 channels: K 140, 32 x 40 outputs, 23 + 9 rows
      {2, 4, 64, 40, 5, 1, 7, 5, 2, 1, 3, 2, 1, 1},
      // stride 1: blocks of 31 + 3 rows, and the transposed grad_input (K 3 * 121 = 363) in 3
      // blocks of 10 rows + 4
      {2, 1, 34, 34, 3, 1, 11, 11, 1, 1, 5, 5, 1, 1},
  };
  manual_seed(12);
  for (const Geo& q : geos) check_geometry(q);
}

TEST_CASE("conv: the Winograd path matches the definition at tile edges, f64 and f32") {
  // 3x3 stride-1 convolutions: sizes that are and are not multiples of the 2x2 output tile,
  // down to a 1x1 output; padding 0, 1, 2 and different per dim; batch 1 and several;
  // channel counts that are not multiples of 8 (transform loops with vector remainders);
  // groups and depthwise (which stay on im2col, checked at the same edges); several images per
  // GEMM chunk with a last, smaller chunk (7x7 with
  // 16 tiles: 32 images per chunk) and one image per chunk over several chunks (48 x 46:
  // 552 tiles, grad_w summed over chunks).
  const Geo geos[] = {
      // N, C,  H,  W,  O, G, kh,kw,sh,sw,ph,pw,dh,dw
      {1, 3, 1, 1, 2, 1, 3, 3, 1, 1, 1, 1, 1, 1},     // 1x1 input, 1x1 output
      {2, 3, 2, 2, 5, 1, 3, 3, 1, 1, 1, 1, 1, 1},     // 2x2
      {2, 5, 3, 3, 3, 1, 3, 3, 1, 1, 0, 0, 1, 1},     // 3x3 unpadded: one output
      {3, 5, 5, 7, 9, 1, 3, 3, 1, 1, 0, 0, 1, 1},     // 5x7 -> 3x5 (odd both ways)
      {2, 9, 5, 7, 4, 1, 3, 3, 1, 1, 1, 1, 1, 1},     // 5x7 -> 5x7
      {1, 4, 5, 7, 3, 1, 3, 3, 1, 1, 2, 2, 1, 1},     // padding 2: output larger than input
      {2, 3, 6, 8, 4, 1, 3, 3, 1, 1, 0, 2, 1, 1},     // padding (0, 2), even sizes
      {2, 6, 9, 6, 10, 2, 3, 3, 1, 1, 1, 0, 1, 1},    // groups 2, padding (1, 0)
      {2, 4, 7, 5, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1},     // depthwise
      {35, 17, 7, 7, 11, 1, 3, 3, 1, 1, 1, 1, 1, 1},  // 7x7: chunks of 32 images + 3
      {2, 2, 48, 46, 3, 1, 3, 3, 1, 1, 1, 1, 1, 1},   // 552 tiles: one image per chunk
  };
  manual_seed(13);
  for (const Geo& q : geos) {
    REQUIRE(takes_winograd(q) == (q.G == 1));
    check_geometry(q);
  }
}

TEST_CASE("conv: outputs and gradients give the same bits with 1 or 2 threads") {
  // The Winograd path (3x3 stride 1), the im2col path with grad_input as a convolution (5x5),
  // and col2im (stride 2), at sizes large enough for the loops and GEMMs to split.
  struct Case {
    int64_t C, O, hw, k, stride;
  };
  manual_seed(14);
  // The last one runs one image per GEMM chunk, the chunks on parallel lanes (Note [Conv image
  // lanes]) wherever the machine has more than one core.
  // The last two run in blocks of output rows (Note [Conv patch blocks]): stride 2 (col2im per
  // block) and stride 1 (grad_input as a blocked convolution too).
  for (Case c : {Case{16, 24, 20, 3, 1}, Case{16, 24, 20, 5, 1}, Case{16, 24, 20, 3, 2},
                 Case{8, 12, 46, 3, 2}, Case{2, 4, 48, 11, 2}, Case{1, 3, 34, 11, 1}}) {
    CAPTURE(c.k);
    CAPTURE(c.stride);
    Tensor x = randn({4, c.C, c.hw, c.hw}), w = randn({c.O, c.C, c.k, c.k}), b = randn({c.O});
    Tensor gy = randn({4, c.O, (c.hw - 1) / c.stride + 1, (c.hw - 1) / c.stride + 1});
    const int saved = get_num_threads();
    std::vector<Tensor> runs[2];
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      Tensor xl = x.detach().requires_grad_(), wl = w.detach().requires_grad_();
      Tensor bl = b.detach().requires_grad_();
      Tensor y = conv2d(xl, wl, bl, c.stride, c.k / 2);
      y.backward(gy);
      runs[threads - 1] = {y.detach(), xl.grad(), wl.grad(), bl.grad()};
    }
    set_num_threads(saved);
    for (size_t i = 0; i < 4; ++i) CHECK(equal(runs[0][i], runs[1][i]));
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
  // A zero-size kernel: PyTorch 1.13 refuses it ("kernel size should be greater than zero");
  // unchecked, the output was the bias over an [N, O, H + 1, W] grid.
  SL_CHECK_THROWS(conv2d(x, randn({4, 3, 0, 3})), ShapeError,
                  "conv2d: kernel size must be positive, got weight of shape [4, 3, 0, 3]");
  SL_CHECK_THROWS(conv2d(x, randn({4, 3, 3, 0}), Tensor(), 1, 1), ShapeError,
                  "conv2d: kernel size must be positive");
  SL_CHECK_THROWS(conv1d(randn({2, 3, 5}), randn({2, 3, 0})), ShapeError,
                  "conv1d: kernel size must be positive, got weight of shape [2, 3, 0]");
}
