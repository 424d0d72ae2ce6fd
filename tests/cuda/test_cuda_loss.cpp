// Parity of every nn loss (nn/loss.h) on CUDA with the CPU, forward and backward (gradients
// w.r.t. every floating input: logits, probability targets, regression targets, BCE targets),
// in float64 and float32, for each reduction and each option that changes the work the kernels
// do: cross_entropy with class indices [N, C] / [N, C, d1, d2] / unbatched [C], weight,
// ignore_index hits (default -100 and a custom one), label smoothing, probability targets;
// nll_loss with weight + ignore_index; mse / l1 (with exact ties, l1's subgradient at 0);
// bce_with_logits with weight, pos_weight and large |logits|; binary_cross_entropy with
// probabilities at 0 and 1 and a weight; smooth_l1 / huber with beta 0 and differences on their
// kinks; kl_div with every reduction, a zero target and log targets; ctc_loss with padded and
// concatenated targets, unequal lengths, an empty input, a non-zero blank, zero_infinity on
// and off around infeasible samples (repeats needing more steps, targets longer than inputs). The
// module forms (CrossEntropyLoss, ..., with their weight buffers moved by to(kGPU)) run once each.
//
// Index, length and weight tensors are passed to check_gpu_parity as inputs without
// requires_grad, so they are moved to the GPU with the floating inputs and get no gradient.
//
// Tolerances: float64 runs show both devices compute the same function (1e-10 relative: the same
// math in different summation orders and with CUDA's libm, a few ulps per op); float32 runs
// allow a few hundred float ulps (5e-5 relative) for sums of up to ~100 log_softmax terms in
// different orders, and atol 1e-6 for gradient entries that cancel (g - softmax * sum(g)).
// CTC's float32 tolerance is wider (2e-4, 1e-5): its gradient is exp(lcab + nll - lp), where
// nll (~20 here) is a log-space sum over T steps whose absolute error (~20 * few ulp) becomes
// a relative error of the gradient.
#include <cmath>

#include "autograd/ops/softmax.h"
#include "cuda_testing.h"
#include "nn/loss.h"

using namespace sl;
using sl::testing::check_gpu_parity;
using sl::testing::kGPU;
using sl::testing::Tol;
namespace F = sl::nn::functional;
using nn::Reduction;

namespace {

/// cross_entropy / nll / mse / l1 / bce / smooth_l1 / huber / kl_div (see the file comment).
Tol loss_tol(DType dt) {
  return dt == DType::f64 ? Tol{1e-10, 1e-12} : Tol{5e-5, 1e-6};
}
/// ctc_loss (see the file comment).
Tol ctc_tol(DType dt) {
  return dt == DType::f64 ? Tol{1e-10, 1e-12} : Tol{2e-4, 1e-5};
}

constexpr Reduction kReductions[] = {Reduction::none, Reduction::mean, Reduction::sum};

Tensor rnd(const Shape& s, DType dt, double scale = 1.0, bool grad = true) {
  Tensor t = randn(s, {.dtype = dt}) * scale;
  if (grad) t.requires_grad_();
  return t;
}
Tensor i64s(const std::vector<int64_t>& v, const Shape& s = {}) {
  return from_vector(v, s);
}
/// Positive per-class weights (no gradient).
Tensor class_weight(int64_t C, DType dt) {
  return rand({C}, {.dtype = dt}) + 0.5;
}

}  // namespace

TEST_CASE("cuda parity: cross_entropy with class indices, weight, ignore_index, smoothing" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("cross_entropy parity");
  manual_seed(31);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    const Tol tol = loss_tol(dt);
    const int64_t C = 5;
    // [N, C] with two default-ignored (-100) targets, or with three hits of the custom
    // ignore_index 2 (a valid class); [N, C, d1, d2] whose targets hit 2 six times or more
    Tensor t2 = i64s({0, 4, -100, 2, 1, -100, 3, 2}, {8});
    Tensor t2c = i64s({0, 4, 2, 2, 1, 2, 3, 0}, {8});
    Tensor t4 = randint(0, C, {3, 3, 2});
    t4.select(0, 0).fill_(2);  // six hits of ignore_index 2 (plus any random ones)
    Tensor w = class_weight(C, dt);
    struct Opt {
      bool weight;
      bool custom_ignore;
      double smoothing;
    };
    for (Opt o : {Opt{false, false, 0.0}, Opt{true, false, 0.0}, Opt{false, true, 0.0},
                  Opt{true, true, 0.0}, Opt{false, false, 0.2}, Opt{true, true, 0.1}}) {
      for (Reduction red : kReductions) {
        CAPTURE(o.weight);
        CAPTURE(o.custom_ignore);
        CAPTURE(o.smoothing);
        const std::string reduction = nn::reduction_name(red);
        CAPTURE(reduction);
        auto fn = [&](const TensorList& t) {
          F::CrossEntropyOptions opts{.reduction = red, .label_smoothing = o.smoothing};
          if (o.weight) opts.weight = t[2];
          if (o.custom_ignore) opts.ignore_index = 2;
          return F::cross_entropy(t[0], t[1], opts);
        };
        check_gpu_parity(fn, {rnd({8, C}, dt, 2.0), o.custom_ignore ? t2c : t2, w}, tol.rtol,
                         tol.atol);
        check_gpu_parity(fn, {rnd({3, C, 3, 2}, dt, 2.0), t4, w}, tol.rtol, tol.atol);
      }
    }
    // unbatched: logits [C], a 0-d target (a hit and a miss of ignore_index; the hit's mean
    // divides by a zero weight sum: NaN loss and gradient on both devices, as in PyTorch, and
    // compare() requires the NaNs to match)
    for (Reduction red : kReductions) {
      const std::string reduction = nn::reduction_name(red);
      CAPTURE(reduction);
      for (int64_t target : {3, 2}) {
        CAPTURE(target);
        check_gpu_parity(
            [&](const TensorList& t) {
              return F::cross_entropy(
                  t[0], t[1],
                  {.weight = t[2], .ignore_index = 2, .reduction = red, .label_smoothing = 0.1});
            },
            {rnd({C}, dt, 2.0), full({}, target, {.dtype = DType::i64}), w}, tol.rtol, tol.atol);
      }
    }
  }
}

TEST_CASE("cuda parity: cross_entropy with probability targets" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("cross_entropy probability-target parity");
  manual_seed(32);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    const Tol tol = loss_tol(dt);
    const int64_t C = 6;
    Tensor w = class_weight(C, dt);
    for (Reduction red : kReductions) {
      for (bool weight : {false, true}) {
        for (double smoothing : {0.0, 0.15}) {
          const std::string reduction = nn::reduction_name(red);
          CAPTURE(reduction);
          CAPTURE(weight);
          CAPTURE(smoothing);
          auto fn = [&](const TensorList& t) {
            F::CrossEntropyOptions opts{.reduction = red, .label_smoothing = smoothing};
            if (weight) opts.weight = t[2];
            return F::cross_entropy(t[0], t[1], opts);
          };
          // the targets are differentiable too (PyTorch's cross_entropy is, for soft labels)
          auto probs = [&](const Shape& s) {
            return softmax(randn(s, {.dtype = dt}), s.size() == 1 ? 0 : 1).requires_grad_();
          };
          check_gpu_parity(fn, {rnd({7, C}, dt, 2.0), probs({7, C}), w}, tol.rtol, tol.atol);
          check_gpu_parity(fn, {rnd({2, C, 4, 3}, dt, 2.0), probs({2, C, 4, 3}), w}, tol.rtol,
                           tol.atol);
          check_gpu_parity(fn, {rnd({C}, dt, 2.0), probs({C}), w}, tol.rtol, tol.atol);
        }
      }
    }
  }
}

TEST_CASE("cuda parity: nll_loss with weight and ignore_index" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("nll_loss parity");
  manual_seed(33);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    const Tol tol = loss_tol(dt);
    const int64_t C = 4;
    Tensor w = class_weight(C, dt);
    Tensor t2 = i64s({1, 3, 0, 3, 2, 3, 0}, {7});                    // ignore_index 3: three hits
    Tensor t3 = i64s({0, -100, 2, 1, -100, 3, 1, 1, 0, 2}, {2, 5});  // default -100: two hits
    for (Reduction red : kReductions) {
      const std::string reduction = nn::reduction_name(red);
      CAPTURE(reduction);
      check_gpu_parity(
          [&](const TensorList& t) {
            // log-probabilities from log_softmax inside fn: its backward is in the parity too
            return F::nll_loss(log_softmax(t[0], 1), t[1],
                               {.weight = t[2], .ignore_index = 3, .reduction = red});
          },
          {rnd({7, C}, dt, 2.0), t2, w}, tol.rtol, tol.atol);
      check_gpu_parity(
          [&](const TensorList& t) {
            return F::nll_loss(log_softmax(t[0], 1), t[1], {.weight = t[2], .reduction = red});
          },
          {rnd({2, C, 5}, dt, 2.0), t3, w}, tol.rtol, tol.atol);
      // plain (no weight) and raw inputs (nll_loss does not require normalised log-probs)
      check_gpu_parity(
          [&](const TensorList& t) { return F::nll_loss(t[0], t[1], {.reduction = red}); },
          {rnd({5, C}, dt), i64s({0, 1, 2, 3, 1}, {5})}, tol.rtol, tol.atol);
    }
  }
}

TEST_CASE("cuda parity: mse_loss and l1_loss, with exact ties" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("mse / l1 parity");
  manual_seed(34);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    const Tol tol = loss_tol(dt);
    Tensor x = randn({6, 9}, {.dtype = dt});
    Tensor y = randn({6, 9}, {.dtype = dt});
    // exact ties input == target in a whole row and on a diagonal: l1's subgradient at 0
    y.select(0, 2).copy_(x.select(0, 2));
    for (int64_t i = 0; i < 6; ++i) y.select(0, i).select(0, i).copy_(x.select(0, i).select(0, i));
    for (Reduction red : kReductions) {
      const std::string reduction = nn::reduction_name(red);
      CAPTURE(reduction);
      TensorList in = {x.clone().requires_grad_(), y.clone().requires_grad_()};
      check_gpu_parity([&](const TensorList& t) { return F::mse_loss(t[0], t[1], red); }, in,
                       tol.rtol, tol.atol);
      check_gpu_parity([&](const TensorList& t) { return F::l1_loss(t[0], t[1], red); }, in,
                       tol.rtol, tol.atol);
      // 1-d and 0-d inputs
      check_gpu_parity([&](const TensorList& t) { return F::l1_loss(t[0], t[1], red); },
                       {rnd({13}, dt), rnd({13}, dt)}, tol.rtol, tol.atol);
      check_gpu_parity([&](const TensorList& t) { return F::mse_loss(t[0], t[1], red); },
                       {rnd({}, dt), rnd({}, dt)}, tol.rtol, tol.atol);
    }
  }
}

TEST_CASE("cuda parity: binary_cross_entropy_with_logits with weight, pos_weight, large logits" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("bce_with_logits parity");
  manual_seed(35);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    const Tol tol = loss_tol(dt);
    const int64_t N = 5, C = 8;
    // logits of every size, including |x| = 30, 100, 1000 (exp(-|x|) underflows: the stable
    // form must give x * (1 - t) and its gradient on both devices) and exact 0
    Tensor x = randn({N, C}, {.dtype = dt}) * 3;
    x.select(0, 0).copy_(from_vector<double>({30, -30, 100, -100, 1000, -1000, 0, 17}).to(dt));
    Tensor target = rand({N, C}, {.dtype = dt});
    target.select(0, 1).fill_(1.0);
    target.select(0, 2).fill_(0.0);
    Tensor weight = rand({N, C}, {.dtype = dt}) + 0.5;
    Tensor weight_row = rand({C}, {.dtype = dt}) + 0.5;  // broadcast over N
    Tensor pos_weight = rand({C}, {.dtype = dt}) * 3 + 0.2;
    for (Reduction red : kReductions) {
      for (int variant = 0; variant < 4; ++variant) {
        const std::string reduction = nn::reduction_name(red);
        CAPTURE(reduction);
        CAPTURE(variant);  // 0 plain, 1 weight, 2 pos_weight, 3 row weight and pos_weight
        check_gpu_parity(
            [&](const TensorList& t) {
              Tensor w = variant == 1 ? t[2] : variant == 3 ? t[3] : Tensor();
              Tensor pw = variant >= 2 ? t[4] : Tensor();
              return F::binary_cross_entropy_with_logits(t[0], t[1], w, pw, red);
            },
            {x.clone().requires_grad_(), target.clone().requires_grad_(), weight, weight_row,
             pos_weight},
            tol.rtol, tol.atol);
      }
    }
  }
}

TEST_CASE("cuda parity: ctc_loss, padded and concatenated targets, blank, zero_infinity" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("ctc_loss parity");
  manual_seed(36);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    const Tol tol = ctc_tol(dt);
    const int64_t T = 12, N = 4, C = 6;
    // unequal input and target lengths; sample 3 has an empty input (and target): loss 0
    Tensor il = i64s({12, 9, 10, 0}, {N});
    Tensor tl = i64s({5, 3, 4, 0}, {N});
    for (int64_t blank : {int64_t{0}, int64_t{3}}) {
      // labels in [0, C) without the blank, with repeats (1, 1) that need a blank between them
      std::vector<int64_t> rows[4] = {{1, 1, 2, 4, 5}, {5, 2, 2}, {4, 1, 5, 4}, {}};
      if (blank != 0) {
        for (auto& r : rows)
          for (auto& l : r)
            if (l == blank) l = 0;
      }
      std::vector<int64_t> padded(N * 5, blank == 0 ? 1 : 0), concat;  // padding is never read
      for (int64_t b = 0; b < N; ++b) {
        for (size_t s = 0; s < rows[b].size(); ++s) padded[b * 5 + s] = rows[b][s];
        concat.insert(concat.end(), rows[b].begin(), rows[b].end());
      }
      Tensor tpad = i64s(padded, {N, 5});
      Tensor tcat = i64s(concat, {static_cast<int64_t>(concat.size())});
      for (Reduction red : kReductions) {
        for (bool zero_inf : {false, true}) {
          CAPTURE(blank);
          const std::string reduction = nn::reduction_name(red);
          CAPTURE(reduction);
          CAPTURE(zero_inf);
          // the gradient through log_softmax (Note [CTC gradient]: the kernels return the
          // gradient w.r.t. the logits under a log_softmax)
          auto fn = [&](const TensorList& t) {
            return F::ctc_loss(log_softmax(t[0], 2), t[1], t[2], t[3], blank, red, zero_inf);
          };
          Tensor x = rnd({T, N, C}, dt, 2.0);
          check_gpu_parity(fn, {x, tpad, il, tl}, tol.rtol, tol.atol);
          check_gpu_parity(fn, {x, tcat, il, tl}, tol.rtol, tol.atol);
        }
      }
    }
  }
}

TEST_CASE("cuda parity: ctc_loss with infeasible alignments, zero_infinity on and off" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("ctc_loss zero_infinity parity");
  manual_seed(37);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    const Tol tol = ctc_tol(dt);
    const int64_t T = 6, N = 5, C = 5;
    // No alignment, nll = +inf (Note [CTC impossible samples]): sample 1's target [2, 2, 2]
    // needs 5 steps (blanks between the repeats), its input has 4; sample 3's target has 4
    // labels for an input of 2 steps (longer than its input: 9 extended states against 2 rows
    // of alpha / beta, rows t >= 2 of its gradient stay 0); sample 4's 6 labels fit its 6 steps
    // but hold a repeat (4, 4), so they need 7. Samples 0 and 2 are feasible.
    const std::vector<std::vector<int64_t>> rows = {
        {1, 3, 4}, {2, 2, 2}, {4, 4}, {1, 2, 3, 4}, {3, 1, 4, 4, 2, 3}};
    const std::vector<int64_t> ilv{6, 4, 5, 2, 6};
    Tensor il = i64s(ilv, {N});
    Tensor tl = i64s({3, 3, 2, 4, 6}, {N});
    for (int64_t blank : {int64_t{0}, int64_t{1}}) {
      std::vector<int64_t> padded(N * 6, 3), concat;  // padding (3) is never read
      for (int64_t b = 0; b < N; ++b) {
        for (size_t s = 0; s < rows[b].size(); ++s) {
          const int64_t l = rows[b][s] == blank ? 0 : rows[b][s];  // blank 1: label 1 -> 0
          padded[b * 6 + s] = l;
          concat.push_back(l);
        }
      }
      Tensor tpad = i64s(padded, {N, 6});
      Tensor tcat = i64s(concat, {static_cast<int64_t>(concat.size())});
      for (Reduction red : kReductions) {
        for (const Tensor& tg : {tpad, tcat}) {
          CAPTURE(blank);
          const std::string reduction = nn::reduction_name(red);
          CAPTURE(reduction);
          const bool concatenated = tg.dim() == 1;
          CAPTURE(concatenated);
          Tensor x = rnd({T, N, C}, dt);
          // zero_infinity: the infeasible losses and their gradients are 0 on both devices
          auto on = [&](const TensorList& t) {
            return F::ctc_loss(log_softmax(t[0], 2), t[1], t[2], t[3], blank, red, true);
          };
          check_gpu_parity(on, {x.detach().clone().requires_grad_(), tg, il, tl}, tol.rtol,
                           tol.atol);
          // off: +inf on both devices (the NaN gradient rows t < input_lengths[b] of those
          // samples must match too: exp(-inf + inf) in both kernels, as PyTorch; the other
          // samples' gradients stay finite)
          auto off = [&](const TensorList& t) {
            return F::ctc_loss(log_softmax(t[0], 2), t[1], t[2], t[3], blank, red, false);
          };
          check_gpu_parity(off, {x.detach().clone().requires_grad_(), tg, il, tl}, tol.rtol,
                           tol.atol);
          // and the GPU's values themselves, not only their agreement with the CPU
          for (bool zinf : {false, true}) {
            CAPTURE(zinf);
            Tensor xg = x.detach().to(kGPU).requires_grad_();
            const TensorList in{xg, tg.to(kGPU), il.to(kGPU), tl.to(kGPU)};
            Tensor lg = zinf ? on(in) : off(in);
            lg.sum().backward();
            Tensor l = lg.cpu().to(DType::f64), g = xg.grad().cpu().to(DType::f64);
            for (int64_t b : {int64_t{1}, int64_t{3}, int64_t{4}}) {
              CAPTURE(b);
              Tensor gb = g.select(1, b);
              if (zinf) {
                SL_CHECK_CLOSE(gb, zeros({T, C}, {.dtype = DType::f64}), 0, 0);
              } else {
                CHECK(gb.narrow(0, 0, ilv[b]).isnan().all().item<bool>());
                SL_CHECK_CLOSE(gb.narrow(0, ilv[b], T - ilv[b]),
                               zeros({T - ilv[b], C}, {.dtype = DType::f64}), 0, 0);
              }
              if (red == Reduction::none) {
                const double lb = l.to_vector<double>()[b];
                CHECK(zinf ? lb == 0.0 : (std::isinf(lb) && lb > 0));
              }
            }
            for (int64_t b : {int64_t{0}, int64_t{2}}) {
              CAPTURE(b);
              CHECK(g.select(1, b).isfinite().all().item<bool>());
              if (red == Reduction::none) CHECK(std::isfinite(l.to_vector<double>()[b]));
            }
            if (red != Reduction::none) {
              CHECK(zinf ? std::isfinite(l.item<double>()) : std::isinf(l.item<double>()));
            }
          }
        }
      }
    }
    // unbatched [T, C]: a target of 4 labels for an input of 3 of the 6 steps
    for (bool zinf : {false, true}) {
      CAPTURE(zinf);
      check_gpu_parity(
          [&](const TensorList& t) {
            return F::ctc_loss(log_softmax(t[0], 1), t[1], t[2], t[3], 0, Reduction::mean, zinf);
          },
          {rnd({T, C}, dt), i64s({1, 2, 3, 4}, {4}), i64s({3}).squeeze(0), i64s({4}).squeeze(0)},
          tol.rtol, tol.atol);
    }
  }
}

TEST_CASE("cuda parity: loss modules with their weight buffers moved by to()" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("loss module parity");
  manual_seed(38);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    const Tol tol = loss_tol(dt);
    const int64_t C = 4;
    Tensor w = class_weight(C, dt);
    Tensor target = i64s({0, 3, -1, 2, 1, -1}, {6});
    // each module is built on the CPU, a second identical one moved with to(kGPU): forward
    // picks the module whose buffers live on the input's device
    auto pair = [](auto make) {
      manual_seed(5);
      auto c = make();
      manual_seed(5);
      auto g = make();
      g->to(kGPU);
      return std::pair{c, g};
    };
    auto [ce_c, ce_g] = pair([&] {
      return std::make_shared<nn::CrossEntropyLoss>(
          F::CrossEntropyOptions{.weight = w.clone(), .ignore_index = -1, .label_smoothing = 0.05});
    });
    CHECK(ce_g->options.weight.device() == kGPU);
    check_gpu_parity(
        [&](const TensorList& t) {
          return (t[0].device() == kGPU ? ce_g : ce_c)->forward(t[0], t[1]);
        },
        {rnd({6, C}, dt, 2.0), target}, tol.rtol, tol.atol);
    auto [nll_c, nll_g] = pair([&] {
      return std::make_shared<nn::NLLLoss>(
          F::CrossEntropyOptions{.weight = w.clone(), .ignore_index = -1});
    });
    check_gpu_parity(
        [&](const TensorList& t) {
          return (t[0].device() == kGPU ? nll_g : nll_c)->forward(log_softmax(t[0], 1), t[1]);
        },
        {rnd({6, C}, dt, 2.0), target}, tol.rtol, tol.atol);
    auto [bce_c, bce_g] = pair([&] {
      return std::make_shared<nn::BCEWithLogitsLoss>(
          rand({C}, {.dtype = dt}) + 0.5, rand({C}, {.dtype = dt}) + 0.5, Reduction::sum);
    });
    SL_CHECK_CLOSE(bce_g->pos_weight.cpu(), bce_c->pos_weight, 0, 0);  // same draws (seeded)
    check_gpu_parity(
        [&](const TensorList& t) {
          return (t[0].device() == kGPU ? bce_g : bce_c)->forward(t[0], t[1]);
        },
        {rnd({3, C}, dt, 4.0), rand({3, C}, {.dtype = dt})}, tol.rtol, tol.atol);
    nn::MSELoss mse(Reduction::sum);
    nn::L1Loss l1;
    check_gpu_parity(
        [&](const TensorList& t) { return mse.forward(t[0], t[1]) + l1.forward(t[0], t[1]); },
        {rnd({3, 5}, dt), rnd({3, 5}, dt)}, tol.rtol, tol.atol);
    nn::CTCLoss ctc(2, Reduction::sum, true);
    check_gpu_parity(
        [&](const TensorList& t) { return ctc.forward(log_softmax(t[0], 2), t[1], t[2], t[3]); },
        {rnd({7, 2, C}, dt), i64s({1, 3, 1, 0, 3, 0}, {2, 3}), i64s({7, 5}, {2}),
         i64s({3, 2}, {2})},
        ctc_tol(dt).rtol, ctc_tol(dt).atol);
  }
}

TEST_CASE("cuda parity: binary_cross_entropy, smooth_l1, huber and kl_div" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("bce / smooth_l1 / huber / kl_div parity");
  manual_seed(37);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    const Tol tol = loss_tol(dt);
    // probabilities with exact 0 and 1 (the clamped logs and the 1e-12 floor of the gradient)
    Tensor p = rand({4, 6}, {.dtype = dt});
    p.select(0, 0).copy_(from_vector<double>({0, 1, 0, 1, 0.5, 0.25}).to(dt));
    Tensor t = rand({4, 6}, {.dtype = dt});
    Tensor w = rand({6}, {.dtype = dt}) + 0.5;
    // differences exactly on the kinks: 0, +-beta (0.5), +-delta (2)
    Tensor a = randn({4, 6}, {.dtype = dt}) * 2;
    Tensor b = a.clone();
    b.select(0, 0).sub_(from_vector<double>({0, 0.5, -0.5, 2, -2, 0}).to(dt));
    b.select(0, 1).copy_(randn({6}, {.dtype = dt}));
    Tensor lq = log_softmax(randn({4, 6}, {.dtype = dt}), 1);
    Tensor q = softmax(randn({4, 6}, {.dtype = dt}), 1);
    q.select(0, 2).select(0, 3).fill_(0.0);  // a zero target: t log t = 0
    Tensor lt = log_softmax(randn({4, 6}, {.dtype = dt}), 1);
    for (Reduction red : kReductions) {
      const std::string reduction = nn::reduction_name(red);
      CAPTURE(reduction);
      check_gpu_parity(
          [&](const TensorList& x) { return F::binary_cross_entropy(x[0], x[1], x[2], red); },
          {p.clone().requires_grad_(), t.clone().requires_grad_(), w}, tol.rtol, tol.atol);
      for (double beta : {0.0, 0.5}) {
        check_gpu_parity(
            [&](const TensorList& x) { return F::smooth_l1_loss(x[0], x[1], red, beta); },
            {a.clone().requires_grad_(), b.clone().requires_grad_()}, tol.rtol, tol.atol);
      }
      check_gpu_parity([&](const TensorList& x) { return F::huber_loss(x[0], x[1], red, 2.0); },
                       {a.clone().requires_grad_(), b.clone().requires_grad_()}, tol.rtol,
                       tol.atol);
    }
    for (std::string red : {"none", "sum", "mean", "batchmean"}) {
      CAPTURE(red);
      check_gpu_parity([&](const TensorList& x) { return F::kl_div(x[0], x[1], red); },
                       {lq.clone().requires_grad_(), q.clone().requires_grad_()}, tol.rtol,
                       tol.atol);
      check_gpu_parity([&](const TensorList& x) { return F::kl_div(x[0], x[1], red, true); },
                       {lq.clone().requires_grad_(), lt.clone().requires_grad_()}, tol.rtol,
                       tol.atol);
    }
  }
  // the module forms, their weight buffer moved by to(kGPU)
  nn::BCELoss bce(rand({3}) + 0.5);
  Tensor p = rand({2, 3}), t = rand({2, 3});
  const float cpu = bce.forward(p, t).item<float>();
  bce.to(kGPU);
  CHECK(bce.forward(p.to(kGPU), t.to(kGPU)).item<float>() == doctest::Approx(cpu).epsilon(1e-5));
}
