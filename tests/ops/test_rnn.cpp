// LSTM / GRU cells and sequences: PyTorch parity (fixtures from tools/gen_op_fixtures.py: nn
// modules, pack_padded_sequence for lengths), gradcheck in f64, variable-length semantics
// against independent per-sequence runs, dropout between layers, error paths.
#include "ops/fixtures.h"
#include "support/testing.h"

using namespace sl;
using sl::testing::Fixture;

namespace {

/// "<prefix><i>" (a helper: GCC 12 warns falsely on "literal" + std::to_string(i)).
std::string indexed(const char* prefix, size_t i) {
  std::string s(prefix);
  s.append(std::to_string(i));
  return s;
}

/// Parameters in PyTorch's _flat_weights order for a fixture case.
TensorList flat_params(const Fixture& fx, const std::string& c, int64_t L, bool bidi, bool bias,
                       bool grad, DType dt = DType::f32) {
  TensorList p;
  for (int64_t l = 0; l < L; ++l) {
    for (int d = 0; d < (bidi ? 2 : 1); ++d) {
      std::string sfx = "_l" + std::to_string(l) + (d ? "_reverse" : "");
      for (const char* n : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
        if (!bias && n[0] == 'b') continue;
        Tensor t = fx.get(c, n + sfx).to(dt, true);
        p.push_back(grad ? t.requires_grad_() : t);
      }
    }
  }
  return p;
}

std::vector<std::string> param_names(int64_t L, bool bidi, bool bias) {
  std::vector<std::string> names;
  for (int64_t l = 0; l < L; ++l)
    for (int d = 0; d < (bidi ? 2 : 1); ++d)
      for (const char* n : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
        if (!bias && n[0] == 'b') continue;
        names.push_back(n + ("_l" + std::to_string(l)) + (d ? "_reverse" : ""));
      }
  return names;
}

TensorList run_seq(bool lstm, const Tensor& x, const Tensor& h0, const Tensor& c0,
                   const TensorList& params, bool bias, int64_t L, bool bidi, bool bf,
                   const Tensor& lengths, double dropout = 0.0, bool train = false,
                   Generator* gen = nullptr) {
  if (lstm) {
    auto [y, h, c] = sl::lstm(x, h0, c0, params, bias, L, dropout, train, bidi, bf, lengths, gen);
    return {y, h, c};
  }
  auto [y, h] = sl::gru(x, h0, params, bias, L, dropout, train, bidi, bf, lengths, gen);
  return {y, h};
}

}  // namespace

TEST_CASE("rnn cells: PyTorch parity of outputs and gradients (f32)") {
  Fixture fx("rnn");
  auto cases = fx.cases("gru_cell");
  for (const auto& c : fx.cases("lstm_cell")) cases.push_back(c);
  REQUIRE(cases.size() == 4);
  for (const auto& c : cases) {
    CAPTURE(c);
    const bool lstm = c.rfind("lstm", 0) == 0;
    std::map<std::string, Tensor> in;
    for (const char* n : {"x", "h", "c", "weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
      if (fx.has(c, n)) in[n] = fx.get(c, n).requires_grad_();
    }
    TensorList outs;
    if (lstm) {
      auto [h1, c1] = lstm_cell(in["x"], in["h"], in["c"], in["weight_ih"], in["weight_hh"],
                                in["bias_ih"], in["bias_hh"]);
      outs = {h1, c1};
    } else {
      outs = {gru_cell(in["x"], in["h"], in["weight_ih"], in["weight_hh"], in["bias_ih"],
                       in["bias_hh"])};
    }
    TensorList gys;
    for (size_t i = 0; i < outs.size(); ++i) {
      SL_CHECK_CLOSE(outs[i], fx.get(c, indexed("y", i)), 1e-5, 1e-6);
      gys.push_back(fx.get(c, indexed("gy", i)));
    }
    run_backward(outs, gys, false);
    for (auto& [name, t] : in) {
      if (!t.defined()) continue;  // absent bias
      CAPTURE(name);
      SL_CHECK_CLOSE(t.grad(), fx.get(c, "grad_" + name), 1e-5, 1e-6);
    }
  }
}

TEST_CASE("rnn sequences: PyTorch parity of outputs, final states and gradients (f32)") {
  Fixture fx("rnn");
  std::vector<std::string> cases;
  for (const auto& c : fx.cases()) {
    if (c.find("_cell") == std::string::npos) cases.push_back(c);
  }
  REQUIRE(cases.size() == 7);
  for (const auto& c : cases) {
    CAPTURE(c);
    const bool lstm = c.rfind("lstm", 0) == 0;
    auto cfg = fx.ints(c, "config");
    const int64_t L = cfg[0];
    const bool bidi = cfg[1] != 0, bf = cfg[2] != 0, bias = cfg[3] != 0;
    Tensor x = fx.get(c, "x").requires_grad_();
    TensorList params = flat_params(fx, c, L, bidi, bias, true);
    Tensor h0 = fx.has(c, "h0") ? fx.get(c, "h0").requires_grad_() : Tensor();
    Tensor c0 = fx.has(c, "c0") ? fx.get(c, "c0").requires_grad_() : Tensor();
    Tensor lengths = fx.has(c, "lengths") ? fx.get(c, "lengths") : Tensor();
    TensorList outs = run_seq(lstm, x, h0, c0, params, bias, L, bidi, bf, lengths);
    TensorList gys;
    for (size_t i = 0; i < outs.size(); ++i) {
      CAPTURE(i);
      SL_CHECK_CLOSE(outs[i], fx.get(c, indexed("y", i)), 1e-5, 1e-6);
      gys.push_back(fx.get(c, indexed("gy", i)));
    }
    run_backward(outs, gys, false);
    SL_CHECK_CLOSE(x.grad(), fx.get(c, "grad_x"), 1e-5, 1e-6);
    if (h0.defined()) SL_CHECK_CLOSE(h0.grad(), fx.get(c, "grad_h0"), 1e-5, 1e-6);
    if (c0.defined()) SL_CHECK_CLOSE(c0.grad(), fx.get(c, "grad_c0"), 1e-5, 1e-6);
    auto names = param_names(L, bidi, bias);
    for (size_t i = 0; i < names.size(); ++i) {
      CAPTURE(names[i]);
      // weight gradients sum T * N (<= 24) products per entry: f32 summation order effects
      // stay within the default tolerances here
      SL_CHECK_CLOSE(params[i].grad(), fx.get(c, "grad_" + names[i]), 1e-5, 1e-6);
    }
  }
}

TEST_CASE("rnn: gradcheck (f64) of cells and of multi-layer bidirectional sequences") {
  manual_seed(41);
  auto f64 = TensorOptions{.dtype = DType::f64};
  Tensor x = randn({3, 2}, f64).requires_grad_(), h = randn({3, 3}, f64).requires_grad_();
  Tensor c = randn({3, 3}, f64).requires_grad_();
  for (bool lstm : {true, false}) {
    int64_t G = lstm ? 4 : 3;
    Tensor wi = randn({G * 3, 2}, f64).requires_grad_(),
           wh = randn({G * 3, 3}, f64).requires_grad_();
    Tensor bi = randn({G * 3}, f64).requires_grad_(), bh = randn({G * 3}, f64).requires_grad_();
    for (int out = 0; out < (lstm ? 2 : 1); ++out) {
      CAPTURE(lstm);
      CAPTURE(out);
      CHECK(gradcheck(
          [&](const TensorList& in) {
            if (!lstm) return gru_cell(in[0], in[1], in[3], in[4], in[5], in[6]);
            auto r = lstm_cell(in[0], in[1], in[2], in[3], in[4], in[5], in[6]);
            return out == 0 ? r.first : r.second;
          },
          {x, h, c, wi, wh, bi, bh}));
    }
  }
  // sequences: 2 layers, bidirectional, lengths, initial states; every output checked
  const int64_t T = 4, N = 3, I = 2, H = 2, L = 2, D = 2;
  Tensor xs = randn({T, N, I}, f64).requires_grad_();
  Tensor lengths = from_vector<int64_t>({4, 1, 3});
  for (bool lstm : {true, false}) {
    const int64_t G = lstm ? 4 : 3;
    TensorList params;
    for (int64_t l = 0; l < L; ++l)
      for (int64_t d = 0; d < D; ++d) {
        params.push_back((randn({G * H, l == 0 ? I : D * H}, f64) * 0.7).requires_grad_());
        params.push_back((randn({G * H, H}, f64) * 0.7).requires_grad_());
        params.push_back(randn({G * H}, f64).requires_grad_());
        params.push_back(randn({G * H}, f64).requires_grad_());
      }
    Tensor h0 = randn({L * D, N, H}, f64).requires_grad_();
    Tensor c0 = randn({L * D, N, H}, f64).requires_grad_();
    TensorList all{xs, h0, c0};
    all.insert(all.end(), params.begin(), params.end());
    for (size_t out = 0; out < (lstm ? 3u : 2u); ++out) {
      CAPTURE(lstm);
      CAPTURE(out);
      CHECK(gradcheck(
          [&](const TensorList& in) {
            TensorList p(in.begin() + 3, in.end());
            return run_seq(lstm, in[0], in[1], in[2], p, true, L, true, false, lengths)[out];
          },
          all));
    }
  }
}

TEST_CASE("rnn: padded steps reach neither outputs, final states nor gradients") {
  manual_seed(42);
  const int64_t T = 6, N = 3, I = 3, H = 4;
  std::vector<int64_t> lens{6, 2, 4};
  for (bool lstm : {true, false}) {
    CAPTURE(lstm);
    const int64_t G = lstm ? 4 : 3;
    TensorList params;
    for (int d = 0; d < 2; ++d) {
      params.push_back(randn({G * H, I}) * 0.5);
      params.push_back(randn({G * H, H}) * 0.5);
      params.push_back(randn({G * H}));
      params.push_back(randn({G * H}));
    }
    Tensor x = randn({N, T, I}).requires_grad_();  // batch_first
    Tensor h0 = randn({2, N, H}), c0 = randn({2, N, H});
    TensorList out = run_seq(lstm, x, h0, c0, params, true, 1, true, true, from_vector(lens));
    // each sequence alone, cut to its length, gives the same valid outputs and final states
    for (int64_t b = 0; b < N; ++b) {
      CAPTURE(b);
      int64_t len = lens[static_cast<size_t>(b)];
      Tensor xb = x.detach().narrow(0, b, 1).narrow(1, 0, len);
      TensorList ref = run_seq(lstm, xb, h0.narrow(1, b, 1), c0.narrow(1, b, 1), params, true, 1,
                               true, true, Tensor());
      SL_CHECK_CLOSE(out[0].detach().narrow(0, b, 1).narrow(1, 0, len), ref[0], 1e-6, 1e-7);
      if (len < T) {
        SL_CHECK_CLOSE(out[0].detach().narrow(0, b, 1).narrow(1, len, T - len),
                       zeros({1, T - len, 2 * H}), 0, 0);
      }
      SL_CHECK_CLOSE(out[1].detach().narrow(1, b, 1), ref[1], 1e-6, 1e-7);
      if (lstm) SL_CHECK_CLOSE(out[2].detach().narrow(1, b, 1), ref[2], 1e-6, 1e-7);
    }
    // gradients never reach the padded inputs
    Tensor loss = out[0].sum() + out[1].sum() + (lstm ? out[2].sum() : zeros({}));
    loss.backward();
    for (int64_t b = 0; b < N; ++b) {
      int64_t len = lens[static_cast<size_t>(b)];
      if (len < T) {
        SL_CHECK_CLOSE(x.grad().narrow(0, b, 1).narrow(1, len, T - len), zeros({1, T - len, I}), 0,
                       0);
      }
    }
  }
}

TEST_CASE("rnn: dropout between layers only when training; unbatched input") {
  manual_seed(43);
  const int64_t T = 5, N = 2, I = 3, H = 4, L = 3;
  TensorList params;
  for (int64_t l = 0; l < L; ++l) {
    params.push_back(randn({3 * H, l == 0 ? I : H}));
    params.push_back(randn({3 * H, H}));
  }
  Tensor x = randn({T, N, I});
  auto eval = sl::gru(x, Tensor(), params, false, L, 0.5, false, false, false);
  auto none = sl::gru(x, Tensor(), params, false, L, 0.0, true, false, false);
  SL_CHECK_CLOSE(eval.first, none.first, 0, 0);
  Generator a(5), b(5);
  auto d1 = sl::gru(x, Tensor(), params, false, L, 0.5, true, false, false, Tensor(), &a);
  auto d2 = sl::gru(x, Tensor(), params, false, L, 0.5, true, false, false, Tensor(), &b);
  SL_CHECK_CLOSE(d1.first, d2.first, 0, 0);
  CHECK(sl::testing::compare(d1.first, none.first, 1e-3, 1e-3) != "");
  // two dropout layers drew ceil(T * N * H / 4) = 10 Philox blocks each
  CHECK(a.state().offset == 20);
  // unbatched [T, I] equals the batch of one
  auto u = sl::gru(x.select(1, 0), Tensor(), params, false, L, 0.0, false, false, false);
  auto ub = sl::gru(x.narrow(1, 0, 1), Tensor(), params, false, L, 0.0, false, false, false);
  SL_CHECK_CLOSE(u.first, ub.first.squeeze(1), 0, 0);
  SL_CHECK_CLOSE(u.second, ub.second.squeeze(1), 0, 0);
}

TEST_CASE("rnn: 16-bit sequences (bf16, f16) agree with float32 on the same rounded inputs") {
  // The 16-bit step kernels widen each row into a float scratch buffer, compute, and round back
  // (core/cpu/rnn.cpp). Reference: the float32 run on the same inputs rounded to the 16-bit
  // type, so the only differences are the roundings of the gate GEMMs, gates and states inside
  // the 16-bit run: relative 2^-8 (bf16) or 2^-11 (f16) per rounding, a handful of roundings per
  // step, 4 steps, sensitivities O(1) at this 0.3 weight scale. Tolerances: 8 bf16 ulps (3e-2)
  // and 8 f16 ulps (4e-3) relative, the same absolute for values near 0. The backward runs the
  // per-row scratch layout too (the LSTM one once overflowed its buffer; ASan watches it in CI),
  // with lengths so the padded-row branch runs as well.
  manual_seed(21);
  const int64_t T = 4, N = 3, I = 3, H = 5;
  for (bool lstm : {true, false}) {
    for (DType dt : {DType::bf16, DType::f16}) {
      CAPTURE(lstm);
      CAPTURE(dtype_name(dt));
      const double tol = dt == DType::bf16 ? 3e-2 : 4e-3;
      const int64_t G = lstm ? 4 : 3;
      const auto rounded = [&](const Tensor& t) { return t.to(dt).to(DType::f32); };
      Tensor x = rounded(randn({T, N, I}));
      Tensor h0 = rounded(randn({2, N, H})), c0 = rounded(randn({2, N, H}));
      TensorList p32, p16;
      for (int d = 0; d < 2; ++d) {
        for (Shape s : {Shape{G * H, I}, Shape{G * H, H}, Shape{G * H}, Shape{G * H}}) {
          Tensor w = rounded(mul(randn(s), 0.3));
          p32.push_back(w.clone().requires_grad_());
          p16.push_back(w.to(dt).requires_grad_());
        }
      }
      Tensor len = from_vector(std::vector<int64_t>{4, 2, 3});
      Tensor x32 = x.clone().requires_grad_(), x16 = x.to(dt).requires_grad_();
      TensorList r32 = run_seq(lstm, x32, h0, c0, p32, true, 1, true, false, len);
      TensorList r16 = run_seq(lstm, x16, h0.to(dt), c0.to(dt), p16, true, 1, true, false, len);
      for (size_t k = 0; k < r32.size(); ++k) {
        CHECK(r16[k].dtype() == dt);
        SL_CHECK_CLOSE(r16[k].to(DType::f32), r32[k], tol, tol);
      }
      // a loss that weights every output element differently, so each gradient path matters
      const auto loss = [&](const TensorList& r) {
        Tensor w = linspace(-1.0, 1.0, r[0].numel()).reshape(r[0].sizes());
        Tensor l = mul(r[0].to(DType::f32), w).sum();
        for (size_t k = 1; k < r.size(); ++k) l = add(l, r[k].to(DType::f32).sum());
        return l;
      };
      loss(r32).backward();
      loss(r16).backward();
      SL_CHECK_CLOSE(x16.grad().to(DType::f32), x32.grad(), tol, tol);
      for (size_t k = 0; k < p32.size(); ++k) {
        CAPTURE(k);
        REQUIRE(p16[k].grad().dtype() == dt);
        // parameter gradients sum over T * N rows: 12 roundings' worth of error can add up
        SL_CHECK_CLOSE(p16[k].grad().to(DType::f32), p32[k].grad(), 2 * tol, 2 * tol);
      }
    }
  }
}

TEST_CASE("rnn: error paths") {
  const int64_t H = 4;
  Tensor x = randn({5, 2, 3});
  TensorList p{randn({4 * H, 3}), randn({4 * H, H}), randn({4 * H}), randn({4 * H})};
  auto run = [&](const Tensor& in, const TensorList& ps, const Tensor& h0, const Tensor& lengths,
                 int64_t layers = 1, double dropout = 0.0) {
    return sl::lstm(in, h0, Tensor(), ps, true, layers, dropout, true, false, false, lengths);
  };
  SL_CHECK_THROWS(run(randn({5}), p, Tensor(), Tensor()), ShapeError,
                  "lstm: expected input [T, N, I]");
  SL_CHECK_THROWS(run(x, {p[0], p[1]}, Tensor(), Tensor()), ShapeError, "expected 4 parameters");
  SL_CHECK_THROWS(run(x, {randn({4 * H, 2}), p[1], p[2], p[3]}, Tensor(), Tensor()), ShapeError,
                  "weight_ih_l0 has shape [16, 2], expected [16, 3]");
  SL_CHECK_THROWS(run(x, {p[0], p[1], randn({3}), p[3]}, Tensor(), Tensor()), ShapeError,
                  "bias_ih_l0 has shape [3]");
  SL_CHECK_THROWS(run(x, p, randn({1, 3, H}), Tensor()), ShapeError, "h0 has shape [1, 3, 4]");
  SL_CHECK_THROWS(run(x, p, Tensor(), from_vector<int64_t>({5, 6})), ValueError,
                  "lstm: lengths[1] = 6 is longer than the sequence (5 steps)");
  SL_CHECK_THROWS(run(x, p, Tensor(), from_vector<int64_t>({0, 2})), ValueError,
                  "lengths[0] = 0 must be at least 1");
  SL_CHECK_THROWS(run(x, p, Tensor(), from_vector<int64_t>({1, 2, 3})), ShapeError,
                  "one entry per sequence (2)");
  SL_CHECK_THROWS(run(x, p, Tensor(), tensor({1.0f, 2.0f})), DTypeError, "integer tensor");
  SL_CHECK_THROWS(run(x, p, Tensor(), Tensor(), 0), ValueError, "num_layers must be at least 1");
  SL_CHECK_THROWS(run(x, p, Tensor(), Tensor(), 1, 1.5), ValueError, "dropout must be in [0, 1]");
  SL_CHECK_THROWS(run(x.to(DType::f64), p, Tensor(), Tensor()), DTypeError, "has dtype float32");
  SL_CHECK_THROWS(lstm_cell(randn({2, 3}), Tensor(), Tensor(), p[0], randn({4 * H, 3})), ShapeError,
                  "lstm_cell: weight_hh must be [4 * H, H]");
  SL_CHECK_THROWS(gru_cell(randn({2, 5}), Tensor(), randn({12, 3}), randn({12, 4})), ShapeError,
                  "gru_cell: weight_ih has shape [12, 3], expected [12, 5]");
  SL_CHECK_THROWS(gru_cell(randn({2, 3}), randn({3, 4}), randn({12, 3}), randn({12, 4})),
                  ShapeError, "gru_cell: hx has shape [3, 4], expected [2, 4]");
}

// PyTorch 1.13 runs GRU / LSTM on an empty batch: nn.GRU(3, 4, num_layers=2,
// bidirectional=True)(zeros(5, 0, 3)) gives output [5, 0, 8] and h_n [4, 0, 4];
// nn.LSTM(3, 4, batch_first=True)(zeros(0, 5, 3)) gives [0, 5, 4], [1, 0, 4], [1, 0, 4]; after
// backward every weight gradient is defined and zero (a sum over no rows), the input's is empty.
// A sequence with no steps (T = 0) stays refused, as PyTorch does.
TEST_CASE("rnn: an empty batch gives empty outputs and zero weight gradients") {
  manual_seed(43);
  const int64_t T = 5, I = 3, H = 4;
  for (bool lstm : {true, false}) {
    for (bool bidi : {false, true}) {
      for (bool bf : {false, true}) {
        CAPTURE(lstm);
        CAPTURE(bidi);
        CAPTURE(bf);
        const int64_t G = lstm ? 4 : 3, L = 2, D = bidi ? 2 : 1;
        TensorList params;
        for (int64_t l = 0; l < L; ++l)
          for (int64_t d = 0; d < D; ++d) {
            params.push_back(randn({G * H, l == 0 ? I : D * H}).requires_grad_());
            params.push_back(randn({G * H, H}).requires_grad_());
            params.push_back(randn({G * H}).requires_grad_());
            params.push_back(randn({G * H}).requires_grad_());
          }
        Tensor x = randn(bf ? Shape{0, T, I} : Shape{T, 0, I}).requires_grad_();
        Tensor h0 = randn({L * D, 0, H}).requires_grad_();
        // with and without (empty) lengths
        Tensor lengths = bf ? from_vector<int64_t>(std::vector<int64_t>{}) : Tensor();
        TensorList r = run_seq(lstm, x, h0, Tensor(), params, true, L, bidi, bf, lengths);
        CHECK(r[0].sizes() == (bf ? Shape{0, T, D * H} : Shape{T, 0, D * H}));
        for (size_t i = 1; i < r.size(); ++i) CHECK(r[i].sizes() == Shape{L * D, 0, H});
        Tensor total = r[0].sum();
        for (size_t i = 1; i < r.size(); ++i) total = total + r[i].sum();
        total.backward();
        REQUIRE(x.grad().defined());
        CHECK(x.grad().sizes() == x.sizes());
        REQUIRE(h0.grad().defined());
        CHECK(h0.grad().sizes() == h0.sizes());
        for (const Tensor& p : params) {
          REQUIRE(p.grad().defined());
          CHECK(p.grad().sizes() == p.sizes());
          CHECK(p.grad().abs().max().item<double>() == 0.0);
        }
      }
    }
  }
  TensorList p{randn({4 * H, I}), randn({4 * H, H}), randn({4 * H}), randn({4 * H})};
  SL_CHECK_THROWS(
      sl::lstm(randn({0, 2, I}), Tensor(), Tensor(), p, true, 1, 0.0, false, false, false),
      ShapeError, "lstm: expected a non-empty sequence (T > 0), got input [0, 2, 3]");
}
