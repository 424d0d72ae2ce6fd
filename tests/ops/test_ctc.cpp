// ctc_loss: PyTorch parity (fixtures from tools/gen_op_fixtures.py), gradcheck in f64 through
// log_softmax, an independent brute-force check over all alignments, samples without an
// alignment (targets longer than their inputs: Note [CTC impossible samples]), error paths.
//
// f32 tolerances against PyTorch (rtol 1e-5, atol 1e-6): the losses are log-space recursions of
// at most 8 steps over O(1) terms, computed with other exp / log implementations and summation
// orders than PyTorch's, so they differ by a few float ulps (1e-5 relative is ~80 ulps); the
// atol covers gradient entries that cancel (exp(lp) - exp(lcab + nll - lp), and g - softmax *
// sum(g) through log_softmax). Infinities and NaNs must match exactly (testing::compare).
#include <cmath>
#include <functional>
#include <limits>

#include "ops/fixtures.h"
#include "support/testing.h"

using namespace sl;
using sl::testing::Fixture;

namespace {

const char* kReductions[] = {"none", "sum", "mean"};

Tensor run_case(const Fixture& fx, const std::string& c, const Tensor& lp) {
  return ctc_loss(lp, fx.get(c, "targets"), fx.get(c, "input_lengths"), fx.get(c, "target_lengths"),
                  fx.ints(c, "blank")[0], kReductions[fx.ints(c, "reduction")[0]],
                  fx.ints(c, "zero_infinity")[0] != 0);
}

Tensor log_softmax_last(const Tensor& x) {
  return x - x.logsumexp({-1}, true);
}

constexpr double kRtol = 1e-5, kAtol = 1e-6;  // see the file comment

bool starts_with(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}

}  // namespace

TEST_CASE("ctc_loss: PyTorch parity of losses and gradients (f32)") {
  Fixture fx("ctc");
  auto cases = fx.cases();
  REQUIRE(cases.size() == 14);
  REQUIRE(fx.cases("impossible_").size() == 8);
  for (const auto& c : cases) {
    CAPTURE(c);
    Tensor lp = fx.get(c, "log_probs").requires_grad_();
    Tensor y = run_case(fx, c, lp);
    SL_CHECK_CLOSE(y, fx.get(c, "y"), kRtol, kAtol);
    // "infeasible" stores no gradient; the impossible_ cases store PyTorch's, NaN rows included
    if (!fx.has(c, "gy")) continue;
    y.backward(fx.get(c, "gy"));
    SL_CHECK_CLOSE(lp.grad(), fx.get(c, "grad_log_probs"), kRtol, kAtol);
  }
}

TEST_CASE("ctc_loss: targets longer than their inputs, as PyTorch (loss, gradient of the logits)") {
  // Batches mixing possible samples with targets longer than their inputs, every reduction,
  // zero_infinity on and off, padded and concatenated targets, batched and unbatched.
  Fixture fx("ctc");
  for (const auto& c : fx.cases("impossible_")) {
    CAPTURE(c);
    const bool zinf = fx.ints(c, "zero_infinity")[0] != 0;
    const bool none = fx.ints(c, "reduction")[0] == 0;
    Tensor logits = fx.get(c, "logits").requires_grad_();
    Tensor y = run_case(fx, c, log_softmax_last(logits));
    SL_CHECK_CLOSE(y, fx.get(c, "y"), kRtol, kAtol);
    y.backward(fx.get(c, "gy"));
    SL_CHECK_CLOSE(logits.grad(), fx.get(c, "grad_logits"), kRtol, kAtol);
    // the behaviour itself, beyond agreeing with the fixture (Note [CTC impossible samples])
    const bool unbatched = logits.dim() == 2;
    Tensor g = unbatched ? logits.grad().unsqueeze(1) : logits.grad();
    Tensor yn = y.to(DType::f64);
    auto il = fx.get(c, "input_lengths").to_vector<int64_t>();
    auto tl = fx.get(c, "target_lengths").to_vector<int64_t>();
    const int64_t T = g.size(0);
    int64_t impossible = 0;
    for (size_t b = 0; b < il.size(); ++b) {
      if (tl[b] <= il[b]) continue;
      CAPTURE(b);
      ++impossible;
      Tensor gb = g.select(1, static_cast<int64_t>(b));
      if (zinf) {
        // exactly zero: no rounding allowed
        SL_CHECK_CLOSE(gb, zeros_like(gb), 0, 0);
        if (none) CHECK(yn.to_vector<double>()[b] == 0.0);
      } else {
        // NaN for t < input_lengths[b] (exp(-inf + inf)), exactly 0 beyond, and +inf
        CHECK(gb.narrow(0, 0, il[b]).isnan().all().item<bool>());
        SL_CHECK_CLOSE(gb.narrow(0, il[b], T - il[b]), zeros({T - il[b], g.size(2)}), 0, 0);
        const double yb = none ? yn.to_vector<double>()[b] : yn.item<double>();
        CHECK((std::isinf(yb) && yb > 0));
      }
    }
    CHECK(impossible == (unbatched ? 1 : 2));
  }
}

TEST_CASE("ctc_loss: gradcheck (f64) through log_softmax for every fixture case") {
  Fixture fx("ctc");
  for (const auto& c : fx.cases()) {
    if (c == "infeasible") continue;  // infinite loss: no finite derivative
    CAPTURE(c);
    // logits whose log_softmax is the fixture's log_probs (shift invariance)
    Tensor logits = fx.get_f64(c, "log_probs").requires_grad_();
    if (starts_with(c, "impossible_") && fx.ints(c, "zero_infinity")[0] == 0) {
      // The impossible samples have no finite derivative (their loss is +inf): differentiate
      // the possible samples' losses w.r.t. their own logits, in the same batch, the impossible
      // samples' logits held constant (their NaN gradient rows go to those constants).
      if (logits.dim() == 2) continue;  // unbatched: the one sample is impossible
      auto il = fx.get(c, "input_lengths").to_vector<int64_t>();
      auto tl = fx.get(c, "target_lengths").to_vector<int64_t>();
      std::vector<int64_t> possible;
      for (size_t b = 0; b < il.size(); ++b)
        if (tl[b] <= il[b]) possible.push_back(static_cast<int64_t>(b));
      REQUIRE(possible.size() == 2);
      Tensor fixed = logits.detach();
      Tensor free = cat({fixed.narrow(1, possible[0], 1), fixed.narrow(1, possible[1], 1)}, 1)
                        .requires_grad_();
      auto fn = [&](const TensorList& in) {
        TensorList cols;
        size_t k = 0;
        for (int64_t b = 0; b < fixed.size(1); ++b) {
          const bool p = k < possible.size() && possible[k] == b;
          cols.push_back(p ? in[0].narrow(1, static_cast<int64_t>(k++), 1) : fixed.narrow(1, b, 1));
        }
        Tensor y = ctc_loss(log_softmax_last(cat(cols, 1)), fx.get(c, "targets"),
                            fx.get(c, "input_lengths"), fx.get(c, "target_lengths"), 0, "none");
        return index_select(y, 0, from_vector(possible));
      };
      CHECK(std::isfinite(fn({free}).sum().item<double>()));
      CHECK(gradcheck(fn, {free}));
      continue;
    }
    // zero_infinity cases included: the impossible samples contribute a constant 0
    CHECK(gradcheck([&](const TensorList& in) { return run_case(fx, c, log_softmax_last(in[0])); },
                    {logits}));
  }
}

TEST_CASE("ctc_loss: equals -log of the summed probability of all alignments (brute force)") {
  manual_seed(51);
  const int64_t T = 5, C = 3;
  Tensor lp = log_softmax_last(randn({T, 1, C}, {.dtype = DType::f64}));
  auto lpv = lp.to_vector<double>();
  const std::vector<int64_t> target{1, 2, 2};
  // enumerate all C^T paths, collapse repeats then drop blanks (0), sum matching ones
  double total = 0;
  std::vector<int64_t> path(T, 0);
  std::function<void(int64_t)> rec = [&](int64_t t) {
    if (t == T) {
      std::vector<int64_t> out;
      for (int64_t i = 0; i < T; ++i) {
        if (path[i] != 0 && (i == 0 || path[i] != path[i - 1])) out.push_back(path[i]);
      }
      if (out == target) {
        double lsum = 0;
        for (int64_t i = 0; i < T; ++i) lsum += lpv[static_cast<size_t>(i * C + path[i])];
        total += std::exp(lsum);
      }
      return;
    }
    for (int64_t k = 0; k < C; ++k) {
      path[t] = k;
      rec(t + 1);
    }
  };
  rec(0);
  Tensor y = ctc_loss(lp, from_vector(target, {1, 3}), std::vector<int64_t>{T},
                      std::vector<int64_t>{3}, 0, "sum");
  CHECK(y.item<double>() == doctest::Approx(-std::log(total)).epsilon(1e-12));
}

TEST_CASE("ctc_loss: padded and concatenated targets agree; zero_infinity") {
  manual_seed(52);
  Tensor lp = log_softmax_last(randn({6, 2, 4}));
  Tensor padded = from_vector<int64_t>({1, 2, 3, 3, 0, 0}, {2, 3});
  Tensor concat = from_vector<int64_t>({1, 2, 3, 3});
  std::vector<int64_t> il{6, 5}, tl{3, 1};
  SL_CHECK_CLOSE(ctc_loss(lp, padded, il, tl, 0, "none"), ctc_loss(lp, concat, il, tl, 0, "none"),
                 0, 0);
  // [2, 2, 2] needs 5 steps (blanks between repeats): 4 steps is infeasible
  Tensor x = randn({4, 1, 3}).requires_grad_();
  Tensor rep = from_vector<int64_t>({2, 2, 2}, {1, 3});
  Tensor inf = ctc_loss(log_softmax_last(x), rep, std::vector<int64_t>{4}, std::vector<int64_t>{3},
                        0, "sum");
  CHECK(std::isinf(inf.item<float>()));
  Tensor z = ctc_loss(log_softmax_last(x), rep, std::vector<int64_t>{4}, std::vector<int64_t>{3}, 0,
                      "sum", true);
  CHECK(z.item<float>() == 0.0f);
  z.backward();
  SL_CHECK_CLOSE(x.grad(), zeros({4, 1, 3}), 0, 0);
}

TEST_CASE("ctc_loss: empty inputs, and a target longer than its input in both layouts") {
  manual_seed(53);
  // input length 0: loss 0 for an empty target, +inf otherwise; no time step, so a zero
  // gradient with or without zero_infinity (Note [CTC impossible samples])
  Tensor x = randn({4, 3, 5}, {.dtype = DType::f64}).requires_grad_();
  Tensor tg = from_vector<int64_t>({1, 2, 0, 3, 4, 1, 2, 3, 4}, {3, 3});
  std::vector<int64_t> il{0, 0, 4}, tl{0, 2, 3};
  for (bool zinf : {false, true}) {
    CAPTURE(zinf);
    x.set_grad(Tensor());
    Tensor y = ctc_loss(log_softmax_last(x), tg, il, tl, 0, "none", zinf);
    auto yv = y.to_vector<double>();
    CHECK(yv[0] == 0.0);
    CHECK(yv[1] == (zinf ? 0.0 : std::numeric_limits<double>::infinity()));
    CHECK(std::isfinite(yv[2]));
    y.backward(ones({3}, {.dtype = DType::f64}));
    SL_CHECK_CLOSE(x.grad().narrow(1, 0, 2), zeros({4, 2, 5}, {.dtype = DType::f64}), 0, 0);
    CHECK(x.grad().isfinite().all().item<bool>());
  }
  // padded and concatenated targets agree on a batch with a too-long target, NaN rows included
  Tensor lp = log_softmax_last(randn({5, 2, 4}));
  Tensor padded = from_vector<int64_t>({1, 2, 3, 1, 2, 3, 3, 0, 0, 0, 0, 0}, {2, 6});
  Tensor concat = from_vector<int64_t>({1, 2, 3, 1, 2, 3, 3});
  std::vector<int64_t> il2{5, 5}, tl2{6, 1};
  for (const char* red : {"none", "sum", "mean"}) {
    CAPTURE(red);
    Tensor a = lp.detach().requires_grad_(), b = lp.detach().requires_grad_();
    Tensor ya = ctc_loss(a, padded, il2, tl2, 0, red), yb = ctc_loss(b, concat, il2, tl2, 0, red);
    SL_CHECK_CLOSE(ya, yb, 0, 0);
    ya.sum().backward();
    yb.sum().backward();
    SL_CHECK_CLOSE(a.grad(), b.grad(), 0, 0);
    CHECK(a.grad().select(1, 0).isnan().all().item<bool>());
    CHECK(a.grad().select(1, 1).isfinite().all().item<bool>());
  }
}

TEST_CASE("ctc_loss: error paths") {
  Tensor lp = log_softmax_last(randn({5, 2, 4}));
  Tensor tg = from_vector<int64_t>({1, 2, 3, 1}, {2, 2});
  std::vector<int64_t> il{5, 4}, tl{2, 2};
  SL_CHECK_THROWS(ctc_loss(lp.select(2, 0).unsqueeze(0).unsqueeze(0), tg, il, tl), ShapeError,
                  "expected log_probs [T, N, C]");
  SL_CHECK_THROWS(ctc_loss(lp, tg, il, tl, 4), ValueError, "blank must be in [0, 4), got 4");
  SL_CHECK_THROWS(ctc_loss(lp, tg, il, tl, -1), ValueError, "blank must be in [0, 4)");
  SL_CHECK_THROWS(ctc_loss(lp, tg, std::vector<int64_t>{6, 4}, tl), ValueError,
                  "input_lengths[0] = 6 is out of range for log_probs with 5 time steps");
  SL_CHECK_THROWS(
      ctc_loss(lp, tg, std::vector<int64_t>{5, -1}, tl), ValueError,
      "ctc_loss: input_lengths[1] = -1 is out of range for log_probs with 5 time steps");
  // a target longer than its input is valid (+inf), but its labels and lengths are still checked
  Tensor long_tg = from_vector<int64_t>({1, 2, 3, 1, 2, 1}, {2, 3});
  CHECK(std::isinf(
      ctc_loss(lp, long_tg, std::vector<int64_t>{5, 2}, std::vector<int64_t>{2, 3}, 0, "none")
          .to_vector<float>()[1]));
  SL_CHECK_THROWS(ctc_loss(lp, long_tg, std::vector<int64_t>{5, 2}, std::vector<int64_t>{2, 4}),
                  ValueError,
                  "ctc_loss: target_lengths[1] = 4 exceeds the padded targets' length 3");
  SL_CHECK_THROWS(ctc_loss(lp, from_vector<int64_t>({1, 2, 3, 1, 0, 1}, {2, 3}),
                           std::vector<int64_t>{5, 2}, std::vector<int64_t>{2, 3}),
                  ValueError, "ctc_loss: target label 0 (sample 1, position 1) is the blank index");
  SL_CHECK_THROWS(ctc_loss(lp, from_vector<int64_t>({1, 2, 3, 1, 9}), std::vector<int64_t>{5, 2},
                           std::vector<int64_t>{2, 3}),
                  IndexError,
                  "ctc_loss: target label 9 (sample 1, position 2) is out of range for 4 classes");
  SL_CHECK_THROWS(ctc_loss(lp, long_tg, std::vector<int64_t>{5, 6}, std::vector<int64_t>{2, 3}),
                  ValueError, "ctc_loss: input_lengths[1] = 6 is out of range");
  SL_CHECK_THROWS(ctc_loss(lp, tg, il, std::vector<int64_t>{2, 3}), ValueError,
                  "exceeds the padded targets' length 2");
  SL_CHECK_THROWS(ctc_loss(lp, tg, il, std::vector<int64_t>{-1, 2}), ValueError, "is negative");
  SL_CHECK_THROWS(ctc_loss(lp, from_vector<int64_t>({1, 2, 3}), il, tl), ShapeError,
                  "1-d targets hold 3 labels but target_lengths sum to 4");
  SL_CHECK_THROWS(ctc_loss(lp, from_vector<int64_t>({1, 7, 3, 1}, {2, 2}), il, tl), IndexError,
                  "target label 7 (sample 0, position 1) is out of range for 4 classes");
  SL_CHECK_THROWS(ctc_loss(lp, from_vector<int64_t>({1, 0, 3, 1}, {2, 2}), il, tl), ValueError,
                  "is the blank index");
  SL_CHECK_THROWS(ctc_loss(lp, tg, std::vector<int64_t>{5}, tl), ShapeError,
                  "input_lengths must hold one value per sample (2)");
  SL_CHECK_THROWS(ctc_loss(lp, tg, il, tl, 0, "avg"), ValueError, "reduction must be");
  SL_CHECK_THROWS(ctc_loss(lp, tg.to(DType::f32), il, tl), DTypeError,
                  "targets must be an integer");
  SL_CHECK_THROWS(ctc_loss(lp.to(DType::i64), tg, il, tl), DTypeError,
                  "log_probs must be floating");
}
