// layer_norm / batch_norm: PyTorch parity (fixtures from tools/gen_op_fixtures.py), running
// statistics, train vs eval, gradcheck in f64, error paths.
#include "ops/fixtures.h"
#include "support/testing.h"

using namespace sl;
using sl::testing::Fixture;

TEST_CASE("layer_norm: PyTorch parity of outputs and gradients (f32)") {
  Fixture fx("norm");
  auto cases = fx.cases("ln_");
  REQUIRE(cases.size() == 3);
  for (const auto& c : cases) {
    CAPTURE(c);
    Tensor x = fx.get(c, "x").requires_grad_();
    Tensor w = fx.has(c, "w") ? fx.get(c, "w").requires_grad_() : Tensor();
    Tensor b = fx.has(c, "b") ? fx.get(c, "b").requires_grad_() : Tensor();
    Tensor y = layer_norm(x, fx.ints(c, "normalized_shape"), w, b, 1e-5);
    SL_CHECK_CLOSE(y, fx.get(c, "y"), 1e-5, 1e-6);
    y.backward(fx.get(c, "gy"));
    SL_CHECK_CLOSE(x.grad(), fx.get(c, "grad_x"), 1e-5, 1e-6);
    if (w.defined()) {
      SL_CHECK_CLOSE(w.grad(), fx.get(c, "grad_w"), 1e-5, 1e-6);
      SL_CHECK_CLOSE(b.grad(), fx.get(c, "grad_b"), 1e-5, 1e-6);
    }
  }
}

TEST_CASE("layer_norm: f32 rows and row-blocked parameter gradients match an f64 reference") {
  // M = 200 rows: parameter gradients summed over 4 row blocks (64, 64, 64, 8); D = 37 and 80
  // leave a tail after the vectorised row sums. Reference: the formulas in double.
  manual_seed(24);
  const int64_t M = 200;
  for (int64_t D : {37, 80}) {
    CAPTURE(D);
    Tensor x = (randn({M, D}) * 2.0 + 0.5).requires_grad_();
    Tensor w = randn({D}).requires_grad_(), b = randn({D}).requires_grad_();
    Tensor gy = randn({M, D});
    const auto xv = x.detach().to(DType::f64).to_vector<double>();
    const auto wv = w.detach().to(DType::f64).to_vector<double>();
    const auto bv = b.detach().to(DType::f64).to_vector<double>();
    const auto gv = gy.to(DType::f64).to_vector<double>();
    std::vector<double> ry(xv.size()), rdx(xv.size()), rgw(static_cast<size_t>(D), 0.0);
    std::vector<double> rgb(rgw), agw(rgw), agb(rgw);  // agw / agb: sums of |terms|
    for (int64_t m = 0; m < M; ++m) {
      const auto at = [&](int64_t d) { return static_cast<size_t>(m * D + d); };
      double mu = 0, var = 0, sg = 0, sgx = 0;
      for (int64_t d = 0; d < D; ++d) mu += xv[at(d)] / static_cast<double>(D);
      for (int64_t d = 0; d < D; ++d) var += (xv[at(d)] - mu) * (xv[at(d)] - mu) / D;
      const double r = 1.0 / std::sqrt(var + 1e-5);
      for (int64_t d = 0; d < D; ++d) {
        const auto k = static_cast<size_t>(d);
        const double xh = (xv[at(d)] - mu) * r, g = gv[at(d)] * wv[k];
        ry[at(d)] = xh * wv[k] + bv[k];
        sg += g;
        sgx += g * xh;
        rgw[k] += gv[at(d)] * xh;
        agw[k] += std::abs(gv[at(d)] * xh);
        rgb[k] += gv[at(d)];
        agb[k] += std::abs(gv[at(d)]);
      }
      for (int64_t d = 0; d < D; ++d) {
        const double xh = (xv[at(d)] - mu) * r, g = gv[at(d)] * wv[static_cast<size_t>(d)];
        rdx[at(d)] = r * (g - sg / D - xh * sgx / D);
      }
    }
    Tensor y = layer_norm(x, {D}, w, b, 1e-5);
    y.backward(gy);
    // y and dx: row statistics summed in double, then rounded to f32; the f32 arithmetic after
    // them rounds a few times terms up to ~|xhat * w| + |b| <= ~20 (2^-24 each): atol 2e-5.
    SL_CHECK_CLOSE(y, from_vector(ry, y.sizes()).to(DType::f32), 1e-5, 2e-5);
    SL_CHECK_CLOSE(x.grad(), from_vector(rdx, x.sizes()).to(DType::f32), 1e-5, 2e-5);
    // parameter gradients: sums of M rounded terms, in any order within gamma(M + 2) * sum|t|
    // (+2: the rounding of each term and of xhat)
    const double gamma = (M + 2) * 0x1p-24 / (1 - (M + 2) * 0x1p-24);
    const auto gw = w.grad().to(DType::f64).to_vector<double>();
    const auto gb = b.grad().to(DType::f64).to_vector<double>();
    for (size_t k = 0; k < gw.size(); ++k) {
      CAPTURE(k);
      // xhat itself is off by ~D u relative (the statistics): 1e-5 of |gy * xhat| more
      CHECK(std::abs(gw[k] - rgw[k]) <= (gamma + 1e-5) * agw[k]);
      CHECK(std::abs(gb[k] - rgb[k]) <= gamma * agb[k]);
    }
    // the row blocks are fixed: 1 and 2 threads give the same bits
    const int threads = get_num_threads();
    std::vector<Tensor> runs[2];
    for (int t = 1; t <= 2; ++t) {
      set_num_threads(t);
      Tensor xt = x.detach().clone().requires_grad_(), wt = w.detach().clone().requires_grad_();
      Tensor bt = b.detach().clone().requires_grad_();
      Tensor yt = layer_norm(xt, {D}, wt, bt, 1e-5);
      yt.backward(gy);
      runs[t - 1] = {yt.detach(), xt.grad(), wt.grad(), bt.grad()};
    }
    set_num_threads(threads);
    for (size_t i = 0; i < 4; ++i) SL_CHECK_CLOSE(runs[0][i], runs[1][i], 0, 0);
  }
}

TEST_CASE("batch_norm: PyTorch parity of outputs, running stats and gradients (f32)") {
  Fixture fx("norm");
  auto cases = fx.cases("bn");
  REQUIRE(cases.size() == 5);
  for (const auto& c : cases) {
    CAPTURE(c);
    Tensor x = fx.get(c, "x").requires_grad_();
    Tensor w = fx.has(c, "w") ? fx.get(c, "w").requires_grad_() : Tensor();
    Tensor b = fx.has(c, "b") ? fx.get(c, "b").requires_grad_() : Tensor();
    Tensor rm = fx.get(c, "running_mean").clone(), rv = fx.get(c, "running_var").clone();
    bool training = fx.ints(c, "training")[0] != 0;
    Tensor y = batch_norm(x, rm, rv, w, b, training, fx.number(c, "momentum"), 1e-5);
    SL_CHECK_CLOSE(y, fx.get(c, "y"), 1e-5, 1e-6);
    SL_CHECK_CLOSE(rm, fx.get(c, "running_mean_after"), 1e-5, 1e-6);
    SL_CHECK_CLOSE(rv, fx.get(c, "running_var_after"), 1e-5, 1e-6);
    y.backward(fx.get(c, "gy"));
    SL_CHECK_CLOSE(x.grad(), fx.get(c, "grad_x"), 1e-5, 1e-6);
    if (w.defined()) {
      SL_CHECK_CLOSE(w.grad(), fx.get(c, "grad_w"), 1e-5, 1e-6);
      SL_CHECK_CLOSE(b.grad(), fx.get(c, "grad_b"), 1e-5, 1e-6);
    }
  }
}

TEST_CASE("batch_norm: f32 vectorised plane sums match an f64 reference, train and eval") {
  // Plane sizes S = 1, 37 and 69 leave tails after the vectorised per-plane sums (4, 8 or 16
  // lanes); N planes per channel are summed in order. Reference: the formulas in double.
  manual_seed(25);
  struct Sh {
    int64_t N, C, S;
  };
  for (Sh sh : {Sh{5, 3, 1}, Sh{3, 4, 37}, Sh{2, 3, 69}}) {
    for (bool training : {true, false}) {
      CAPTURE(sh.S);
      CAPTURE(training);
      const int64_t N = sh.N, C = sh.C, S = sh.S;
      Tensor x = (randn({N, C, S}) * 2.0 + 0.5).requires_grad_();
      Tensor w = randn({C}).requires_grad_(), b = randn({C}).requires_grad_();
      Tensor rm = randn({C}) * 0.1, rv = rand({C}) + 0.5;
      Tensor gy = randn({N, C, S});
      const auto xv = x.detach().to(DType::f64).to_vector<double>();
      const auto wv = w.detach().to(DType::f64).to_vector<double>();
      const auto bv = b.detach().to(DType::f64).to_vector<double>();
      const auto gv = gy.to(DType::f64).to_vector<double>();
      const auto rmv = rm.to(DType::f64).to_vector<double>();
      const auto rvv = rv.to(DType::f64).to_vector<double>();
      std::vector<double> ry(xv.size()), rdx(xv.size()), rgw(static_cast<size_t>(C)),
          rgb(static_cast<size_t>(C)), rrm(rgw), rrv(rgw);
      const double cnt = static_cast<double>(N * S);
      for (int64_t c = 0; c < C; ++c) {
        const auto k = static_cast<size_t>(c);
        const auto at = [&](int64_t n, int64_t i) {
          return static_cast<size_t>((n * C + c) * S + i);
        };
        double mu = 0, var = 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < S; ++i) mu += xv[at(n, i)] / cnt;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < S; ++i) var += (xv[at(n, i)] - mu) * (xv[at(n, i)] - mu) / cnt;
        rrm[k] = 0.9 * rmv[k] + 0.1 * mu;
        rrv[k] = 0.9 * rvv[k] + 0.1 * var * cnt / (cnt - 1);
        if (!training) {
          mu = rmv[k];
          var = rvv[k];
        }
        const double r = 1.0 / std::sqrt(var + 1e-5);
        double sg = 0, sgx = 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < S; ++i) {
            const double xh = (xv[at(n, i)] - mu) * r;
            ry[at(n, i)] = xh * wv[k] + bv[k];
            sg += gv[at(n, i)];
            sgx += gv[at(n, i)] * xh;
          }
        rgw[k] = sgx;
        rgb[k] = sg;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < S; ++i) {
            const double xh = (xv[at(n, i)] - mu) * r;
            rdx[at(n, i)] = training ? wv[k] * r * (gv[at(n, i)] - sg / cnt - xh * sgx / cnt)
                                     : wv[k] * r * gv[at(n, i)];
          }
      }
      Tensor rm2 = rm.clone(), rv2 = rv.clone();
      Tensor y = batch_norm(x, rm2, rv2, w, b, training, 0.1, 1e-5);
      y.backward(gy);
      // statistics summed in double, then rounded to f32; the f32 arithmetic after them rounds a
      // few times terms up to ~|xhat * w| + |b| <= ~20 (2^-24 each): atol 2e-5. The parameter
      // gradients are sums of at most 138 terms of |gy * xhat| <= ~20 rounded once from double
      // (rtol 1e-5 covers the f32 xhat's error of a few ulp per term, atol the cancellation).
      SL_CHECK_CLOSE(y, from_vector(ry, y.sizes()).to(DType::f32), 1e-5, 2e-5);
      SL_CHECK_CLOSE(x.grad(), from_vector(rdx, x.sizes()).to(DType::f32), 1e-5, 2e-5);
      SL_CHECK_CLOSE(w.grad(), from_vector(rgw, {C}).to(DType::f32), 1e-5, 2e-5);
      SL_CHECK_CLOSE(b.grad(), from_vector(rgb, {C}).to(DType::f32), 1e-5, 2e-5);
      if (training) {
        SL_CHECK_CLOSE(rm2, from_vector(rrm, {C}).to(DType::f32), 1e-6, 1e-7);
        SL_CHECK_CLOSE(rv2, from_vector(rrv, {C}).to(DType::f32), 1e-6, 1e-7);
      }
      // channels are whole tasks: 1 and 2 threads give the same bits
      const int threads = get_num_threads();
      std::vector<Tensor> runs[2];
      for (int t = 1; t <= 2; ++t) {
        set_num_threads(t);
        Tensor xt = x.detach().clone().requires_grad_(), wt = w.detach().clone().requires_grad_();
        Tensor bt = b.detach().clone().requires_grad_();
        Tensor m = rm.clone(), v = rv.clone();
        Tensor yt = batch_norm(xt, m, v, wt, bt, training, 0.1, 1e-5);
        yt.backward(gy);
        runs[t - 1] = {yt.detach(), xt.grad(), wt.grad(), bt.grad(), m, v};
      }
      set_num_threads(threads);
      for (size_t i = 0; i < 6; ++i) SL_CHECK_CLOSE(runs[0][i], runs[1][i], 0, 0);
    }
  }
}

TEST_CASE("norm: gradcheck (f64)") {
  manual_seed(21);
  auto f64 = TensorOptions{.dtype = DType::f64};
  Tensor x = randn({3, 4, 5}, f64).requires_grad_();
  Tensor w = randn({4, 5}, f64).requires_grad_(), b = randn({4, 5}, f64).requires_grad_();
  CHECK(gradcheck(
      [](const TensorList& in) {
        return layer_norm(in[0], {4, 5}, in[1], in[2]);
      },
      {x, w, b}));
  CHECK(gradcheck([](const TensorList& in) { return layer_norm(in[0], {5}); }, {x}));
  Tensor w1 = randn({5}, f64).requires_grad_();
  CHECK(gradcheck([](const TensorList& in) { return layer_norm(in[0], {5}, in[1]); }, {x, w1}));
  for (Shape shape : {Shape{6, 3}, Shape{4, 3, 5}, Shape{2, 3, 3, 2}}) {
    CAPTURE(shape_str(shape));
    Tensor xb = randn(shape, f64).requires_grad_();
    Tensor wb = randn({3}, f64).requires_grad_(), bb = randn({3}, f64).requires_grad_();
    Tensor rm = zeros({3}, f64), rv = ones({3}, f64);
    for (bool training : {true, false}) {
      CAPTURE(training);
      CHECK(gradcheck(
          [&](const TensorList& in) {
            // fresh running stats each call so the eval branch sees the same statistics
            Tensor m = rm.clone(), v = rv.clone();
            return batch_norm(in[0], m, v, in[1], in[2], training, 0.1, 1e-5);
          },
          {xb, wb, bb}));
    }
    CHECK(gradcheck(
        [](const TensorList& in) {
          return batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true);
        },
        {xb}));
  }
}

TEST_CASE("batch_norm: train uses batch statistics, eval the running ones") {
  manual_seed(22);
  Tensor x = randn({16, 3, 4}) * 2.0 + 1.0;
  Tensor rm = zeros({3}), rv = ones({3});
  Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.25);
  // training output has zero mean and unit (biased) variance per channel
  SL_CHECK_CLOSE(y.mean({0, 2}), zeros({3}), 0, 1e-6);
  SL_CHECK_CLOSE(y.var({0, 2}, 0), ones({3}), 1e-4, 1e-4);  // eps = 1e-5 shrinks it by ~1e-5/var
  // running stats moved a quarter of the way to the batch statistics (unbiased variance)
  Tensor xd = x.to(DType::f64);
  SL_CHECK_CLOSE(rm, (xd.mean({0, 2}) * 0.25).to(DType::f32), 1e-5, 1e-6);
  SL_CHECK_CLOSE(rv, (xd.var({0, 2}, 1) * 0.25 + 0.75).to(DType::f32), 1e-5, 1e-6);
  // eval: a fixed affine map with the running statistics, which it leaves alone
  Tensor rm0 = rm.clone(), rv0 = rv.clone();
  Tensor ye = batch_norm(x, rm, rv, Tensor(), Tensor(), false);
  SL_CHECK_CLOSE(rm, rm0, 0, 0);
  SL_CHECK_CLOSE(rv, rv0, 0, 0);
  SL_CHECK_CLOSE(ye, (x - rm.view({1, 3, 1})) / (rv.view({1, 3, 1}) + 1e-5).sqrt(), 1e-5, 1e-6);
  // momentum 0 keeps the running stats; in-place updates bump their versions
  uint32_t v0 = rm.version();
  batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.0);
  SL_CHECK_CLOSE(rm, rm0, 0, 0);
  CHECK(rm.version() > v0);
}

TEST_CASE("norm: float64 and 16-bit inputs") {
  manual_seed(23);
  Tensor x = randn({5, 8}, {.dtype = DType::f64});
  Tensor y = layer_norm(x, {8});
  CHECK(y.dtype() == DType::f64);
  SL_CHECK_CLOSE(y, (x - x.mean({1}, true)) / (x.var({1}, 0, true) + 1e-5).sqrt(), 1e-12, 1e-12);
  Tensor xh = x.to(DType::bf16);
  Tensor yh = layer_norm(xh, {8});
  CHECK(yh.dtype() == DType::bf16);
  SL_CHECK_CLOSE(yh, layer_norm(xh.to(DType::f32), {8}).to(DType::bf16), 0, 0);
}

TEST_CASE("norm: float32 parameters beside a 16-bit input get float32 gradients, unrounded") {
  // Mixed precision: the weight and bias gradients are sums over many rows, computed in float;
  // they must reach the float32 parameters without passing through the input's 16 bits. The
  // references are float64 sums of the same values; rtol 1e-5 allows float32 accumulation of
  // 64 terms and is far below bfloat16's 2^-8 = 3.9e-3 rounding step.
  manual_seed(29);
  Tensor x = randn({64, 8}).to(DType::bf16);
  Tensor g = randn({64, 8}).to(DType::bf16);  // the upstream gradient, in the output's dtype
  Tensor w = randn({8}).requires_grad_(), b = randn({8}).requires_grad_();
  Tensor y = layer_norm(x, {8}, w, b);
  CHECK(y.dtype() == DType::bf16);
  y.backward(g);
  Tensor g64 = g.to(DType::f64), x64 = x.to(DType::f64);
  Tensor xhat = (x64 - x64.mean({1}, true)) / (x64.var({1}, 0, true) + 1e-5).sqrt();
  REQUIRE(b.grad().dtype() == DType::f32);
  REQUIRE(w.grad().dtype() == DType::f32);
  SL_CHECK_CLOSE(b.grad().to(DType::f64), g64.sum({0}), 1e-5, 1e-6);
  SL_CHECK_CLOSE(w.grad().to(DType::f64), (g64 * xhat).sum({0}), 1e-5, 1e-5);

  // batch norm [N, C, S] = [16, 3, 4]: per-channel sums over 64 values
  Tensor xb = randn({16, 3, 4}).to(DType::bf16);
  Tensor gb = randn({16, 3, 4}).to(DType::bf16);
  Tensor wb = randn({3}).requires_grad_(), bb = randn({3}).requires_grad_();
  Tensor yb = batch_norm(xb, Tensor(), Tensor(), wb, bb, true, 0.1, 1e-5);
  CHECK(yb.dtype() == DType::bf16);
  yb.backward(gb);
  REQUIRE(bb.grad().dtype() == DType::f32);
  SL_CHECK_CLOSE(bb.grad().to(DType::f64), gb.to(DType::f64).sum({0, 2}), 1e-5, 1e-6);
}

// PyTorch 1.13 refuses training batch norm only at exactly one value per channel: an empty batch
// gives an empty output and leaves the running statistics as they were.
TEST_CASE("batch_norm of an empty batch in training") {
  Tensor rm = tensor({0.5f, -1.0f, 2.0f}), rv = tensor({1.5f, 0.25f, 3.0f});
  Tensor rm0 = rm.clone(), rv0 = rv.clone();
  Tensor w = ones({3}).requires_grad_(), b = zeros({3}).requires_grad_();
  for (Shape s : {Shape{0, 3}, Shape{0, 3, 5}, Shape{2, 3, 0}}) {
    CAPTURE(shape_str(s));
    Tensor x = zeros(s).requires_grad_();
    Tensor y = batch_norm(x, rm, rv, w, b, true);
    CHECK(y.sizes() == s);
    y.sum().backward();
    SL_CHECK_CLOSE(rm, rm0, 0, 0);
    SL_CHECK_CLOSE(rv, rv0, 0, 0);
    SL_CHECK_CLOSE(w.grad(), zeros({3}), 0, 0);
    SL_CHECK_CLOSE(b.grad(), zeros({3}), 0, 0);
    CHECK(x.grad().sizes() == s);
  }
  SL_CHECK_THROWS(batch_norm(randn({1, 3, 1}), rm, rv, w, b, true), ValueError,
                  "expected more than 1 value per channel when training, got input of shape "
                  "[1, 3, 1]");
}

TEST_CASE("norm: error paths") {
  Tensor x = randn({2, 3, 4});
  SL_CHECK_THROWS(layer_norm(x, {3}), ShapeError, "does not end with normalized_shape [3]");
  SL_CHECK_THROWS(layer_norm(x, {}), ValueError, "normalized_shape must not be empty");
  SL_CHECK_THROWS(layer_norm(x, {4}, randn({3})), ShapeError, "weight of shape [3]");
  SL_CHECK_THROWS(layer_norm(x, {4}, Tensor(), Tensor(), -1.0), ValueError,
                  "eps must be non-negative");
  SL_CHECK_THROWS(layer_norm(x.to(DType::i64), {4}), DTypeError, "expected a floating input");
  SL_CHECK_THROWS(batch_norm(randn({4}), Tensor(), Tensor(), Tensor(), Tensor(), true), ShapeError,
                  "at least 2 dims");
  SL_CHECK_THROWS(batch_norm(x, zeros({4}), ones({4})), ShapeError, "running_mean of shape [4]");
  SL_CHECK_THROWS(batch_norm(x, Tensor(), Tensor()), ValueError,
                  "must be defined in evaluation mode");
  SL_CHECK_THROWS(batch_norm(randn({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                  ValueError, "expected more than 1 value per channel when training");
  SL_CHECK_THROWS(batch_norm(x, zeros({3}), Tensor(), Tensor(), Tensor(), true), ValueError,
                  "must both be given");
  SL_CHECK_THROWS(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 1.5), ValueError,
                  "momentum must be in [0, 1]");
  SL_CHECK_THROWS(batch_norm(x, Tensor(), Tensor(), randn({2}), Tensor(), true), ShapeError,
                  "weight of shape [2]");
}
