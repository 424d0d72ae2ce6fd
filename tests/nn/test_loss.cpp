// Losses against PyTorch (fixture: loss), gradchecks in float64, error paths.
#include <cmath>

#include "autograd/ops/softmax.h"
#include "fixture.h"
#include "nn/loss.h"

using namespace sl;
using sl::testing::Fixture;
namespace F = sl::nn::functional;
using nn::Reduction;

// f32 tolerances: rtol 1e-5, atol 1e-6 (the default). Losses are means/sums of at most
// ~30 terms of size O(1) computed through log_softmax, so rounding differences against PyTorch
// stay near 1e-7 relative.
constexpr double kRtol = 1e-5, kAtol = 1e-6;

namespace {
Tensor idx(std::vector<int64_t> v) {
  return from_vector(v);
}

void check_case(const Fixture& fx, const std::string& name,
                const std::function<Tensor(const TensorList&)>& fn) {
  CAPTURE(name);
  TensorList ins{fx.input(name, 0), fx.input(name, 1)};
  fx.check_backward(name, {fn(ins)}, ins, nullptr, kRtol, kAtol);
}
}  // namespace

TEST_CASE("cross_entropy matches PyTorch") {
  Fixture fx("loss");
  Tensor w = fx.get("ce.weight");
  for (auto red : {Reduction::mean, Reduction::sum, Reduction::none}) {
    std::string r = nn::reduction_name(red);
    check_case(fx, "ce_" + r, [&](const TensorList& in) {
      return F::cross_entropy(in[0], in[1], {.reduction = red});
    });
    check_case(fx, "ce_w_ls_" + r, [&](const TensorList& in) {
      return F::cross_entropy(
          in[0], in[1],
          {.weight = w, .ignore_index = -100, .reduction = red, .label_smoothing = 0.1});
    });
  }
  check_case(fx, "ce_ignore3_ls", [&](const TensorList& in) {
    return F::cross_entropy(in[0], in[1], {.ignore_index = 3, .label_smoothing = 0.2});
  });
  check_case(fx, "ce_spatial_w", [&](const TensorList& in) {
    return F::cross_entropy(in[0], in[1], {.weight = w.narrow(0, 0, 4)});
  });
  check_case(fx, "ce_probs_w_ls", [&](const TensorList& in) {
    return F::cross_entropy(in[0], in[1], {.weight = w, .label_smoothing = 0.15});
  });
  check_case(fx, "ce_probs_sum", [&](const TensorList& in) {
    return F::cross_entropy(in[0], in[1], {.reduction = Reduction::sum});
  });
  check_case(fx, "nll_w",
             [&](const TensorList& in) { return F::nll_loss(in[0], in[1], {.weight = w}); });
  // Ignored rows holding -inf logits, and batches where every target is ignored (the fixture's
  // NaN means must be NaN here too; the gradients are exactly zero in both).
  check_case(fx, "ce_ignored_neginf",
             [&](const TensorList& in) { return F::cross_entropy(in[0], in[1]); });
  for (auto red : {Reduction::mean, Reduction::none}) {
    check_case(fx, std::string("ce_ignored_neginf_ls_") + nn::reduction_name(red),
               [&](const TensorList& in) {
                 return F::cross_entropy(in[0], in[1], {.reduction = red, .label_smoothing = 0.1});
               });
  }
  check_case(fx, "nll_ignored_neginf", [&](const TensorList& in) {
    return F::nll_loss(in[0], in[1], {.reduction = Reduction::none});
  });
  check_case(fx, "ce_all_ignored",
             [&](const TensorList& in) { return F::cross_entropy(in[0], in[1]); });
  check_case(fx, "ce_all_ignored_w_ls", [&](const TensorList& in) {
    return F::cross_entropy(in[0], in[1], {.weight = w.narrow(0, 0, 4), .label_smoothing = 0.2});
  });
  // The module form registers the weight as a buffer, as PyTorch does.
  nn::CrossEntropyLoss ce({.weight = w, .label_smoothing = 0.1});
  CHECK(ce.state_dict().keys() == std::vector<std::string>{"weight"});
  SL_CHECK_CLOSE(ce.forward(fx.get("ce_w_ls_mean.in.0"), fx.get("ce_w_ls_mean.in.1")),
                 fx.get("ce_w_ls_mean.out.0"), kRtol, kAtol);
}

TEST_CASE("mse, l1 and bce_with_logits match PyTorch") {
  Fixture fx("loss");
  for (auto red : {Reduction::mean, Reduction::sum, Reduction::none}) {
    std::string r = nn::reduction_name(red);
    check_case(fx, "mse_" + r,
               [&](const TensorList& in) { return F::mse_loss(in[0], in[1], red); });
    check_case(fx, "l1_" + r, [&](const TensorList& in) { return F::l1_loss(in[0], in[1], red); });
  }
  check_case(fx, "bce_logits", [&](const TensorList& in) {
    return F::binary_cross_entropy_with_logits(in[0], in[1]);
  });
  Tensor pw = fx.get("bce.pos_weight"), bw = fx.get("bce.weight");
  check_case(fx, "bce_logits_pw_w_sum", [&](const TensorList& in) {
    return F::binary_cross_entropy_with_logits(in[0], in[1], bw, pw, Reduction::sum);
  });
  nn::BCEWithLogitsLoss mod(bw, pw, Reduction::sum);
  CHECK(mod.state_dict().keys() == std::vector<std::string>{"weight", "pos_weight"});
}

TEST_CASE("ctc_loss matches PyTorch (mean, sum, none, zero_infinity)") {
  Fixture fx("loss");
  Tensor il = fx.get("ctc.input_lengths"), tl = fx.get("ctc.target_lengths");
  for (auto red : {Reduction::mean, Reduction::sum, Reduction::none}) {
    check_case(fx, std::string("ctc_") + nn::reduction_name(red),
               [&](const TensorList& in) { return F::ctc_loss(in[0], in[1], il, tl, 0, red); });
  }
  Tensor il2 = fx.get("ctc_inf.input_lengths");
  nn::CTCLoss mod(0, Reduction::mean, true);
  check_case(fx, "ctc_zero_inf",
             [&](const TensorList& in) { return mod.forward(in[0], in[1], il2, tl); });
  // A target longer than its input is accepted, as PyTorch does: that sample's loss is +inf, and
  // with zero_infinity 0 with an exactly zero gradient (Note [CTC impossible samples]). Samples
  // 0 and 2 keep the fixture's targets and lengths, so their losses are the fixture's "none"
  // ones; sample 1 gets a third label (3 labels in 2 steps).
  Tensor tg = from_vector<int64_t>({1, 2, 2, 0, 3, 1, 2, 0, 4, 4, 4, 1}, {3, 4});
  SL_CHECK_CLOSE(tg.index_select(0, idx({0, 2})),
                 fx.get("ctc_mean.in.1").index_select(0, idx({0, 2})), 0, 0);
  Tensor ref = fx.get("ctc_none.out.0");
  Tensor il3 = idx({8, 2, 7}), tl3 = idx({3, 3, 4});
  Tensor none = F::ctc_loss(fx.get("ctc_mean.in.0"), tg, il3, tl3, 0, Reduction::none);
  CHECK(std::isinf(none.to_vector<float>()[1]));
  SL_CHECK_CLOSE(none.index_select(0, idx({0, 2})), ref.index_select(0, idx({0, 2})), kRtol, kAtol);
  CHECK(std::isinf(
      F::ctc_loss(fx.get("ctc_mean.in.0"), tg, il3, tl3, 0, Reduction::sum).item<float>()));
  Tensor lp = fx.get("ctc_mean.in.0").requires_grad_();
  nn::CTCLoss zmod(0, Reduction::mean, true);
  Tensor z = zmod.forward(lp, tg, il3, tl3);
  auto r = ref.to_vector<float>();
  CHECK(z.item<float>() == doctest::Approx((r[0] / 3 + 0 + r[2] / 4) / 3).epsilon(1e-6));
  z.backward();
  SL_CHECK_CLOSE(lp.grad().select(1, 1), zeros({lp.size(0), lp.size(2)}), 0, 0);
  CHECK(lp.grad().isfinite().all().item<bool>());
}

TEST_CASE("losses gradcheck in float64") {
  manual_seed(8);
  TensorOptions f64{.dtype = DType::f64};
  Tensor x = randn({4, 3}, f64).requires_grad_();
  Tensor t = idx({0, 2, -100, 1});
  Tensor w = rand({3}, f64) + 0.5;
  CHECK(gradcheck(
      [&](const TensorList& in) {
        return F::cross_entropy(in[0], t, {.weight = w, .label_smoothing = 0.3});
      },
      {x}));
  Tensor p = softmax(randn({4, 3}, f64), 1).requires_grad_();
  CHECK(gradcheck(
      [&](const TensorList& in) {
        return F::cross_entropy(in[0], in[1], {.weight = w, .label_smoothing = 0.1});
      },
      {x, p}));
  Tensor y = randn({4, 3}, f64).requires_grad_();
  CHECK(gradcheck([&](const TensorList& in) { return F::mse_loss(in[0], in[1]); }, {x, y}));
  CHECK(gradcheck([&](const TensorList& in) { return F::l1_loss(in[0], in[1], Reduction::sum); },
                  {x, y}));
  // CTC's gradient is PyTorch's, exact for log-probabilities from log_softmax: check through it.
  Tensor logits = randn({5, 2, 4}, f64).requires_grad_();
  Tensor tg = idx({1, 2, 3, 1});  // concatenated targets
  CHECK(gradcheck(
      [&](const TensorList& in) {
        return F::ctc_loss(log_softmax(in[0], 2), tg, idx({5, 4}), idx({2, 2}));
      },
      {logits}));
  Tensor tb = rand({4, 3}, f64).requires_grad_();
  Tensor pw = tensor({0.5, 2.0, 1.0});
  CHECK(gradcheck(
      [&](const TensorList& in) {
        return F::binary_cross_entropy_with_logits(in[0], in[1], Tensor(), pw);
      },
      {x, tb}));
}

TEST_CASE("log-space losses stay finite for extreme logits") {
  // Logits of +-1000 overflow exp in a naive formula; the stable forms give the exact limits.
  Tensor x = tensor({1000.0f, -1000.0f}).view({1, 2});
  Tensor ce = F::cross_entropy(x, idx({1}));
  CHECK(ce.item<double>() == doctest::Approx(2000.0));
  Tensor xb = tensor({1000.0f, -1000.0f, 0.0f}).requires_grad_();
  Tensor bce = F::binary_cross_entropy_with_logits(xb, tensor({0.0f, 1.0f, 1.0f}), Tensor(),
                                                   Tensor(), Reduction::sum);
  CHECK(bce.item<double>() == doctest::Approx(2000.0 + std::log(2.0)));
  bce.backward();
  // d/dx = sigmoid(x) - t: 1, -1, -0.5 (the tie at 0 is exact).
  SL_CHECK_CLOSE(xb.grad(), tensor({1.0f, -1.0f, -0.5f}), 0, 1e-7);
}

TEST_CASE("loss error paths") {
  Tensor x = randn({4, 3});
  SL_CHECK_THROWS(F::cross_entropy(x, idx({0, 1, 3, 0})), IndexError,
                  "cross_entropy: target 3 is out of bounds for 3 classes");
  SL_CHECK_THROWS(F::cross_entropy(x, idx({0, 1, 2})), ShapeError,
                  "input of shape [4, 3] needs a target of shape [4], got [3]");
  SL_CHECK_THROWS(F::cross_entropy(x, randn({4, 2})), ShapeError,
                  "probability targets must have the input's shape [4, 3], got [4, 2]");
  // PyTorch refuses an ignore_index >= 0 with probability targets; negative ones are accepted.
  Tensor probs = softmax(randn({4, 3}), 1);
  SL_CHECK_THROWS(F::cross_entropy(x, probs, {.ignore_index = 0}), ValueError,
                  "cross_entropy: ignore_index 0 is not supported with class-probability");
  CHECK_NOTHROW(F::cross_entropy(x, probs, {.ignore_index = -1}));
  SL_CHECK_THROWS(F::cross_entropy(x, idx({0, 1, 2, 0}), {.weight = ones({2})}), ShapeError,
                  "weight must have shape [3], got [2]");
  SL_CHECK_THROWS(F::cross_entropy(x, idx({0, 1, 2, 0}), {.label_smoothing = 1.5}), ValueError,
                  "label_smoothing must be in [0, 1], got 1.5");
  SL_CHECK_THROWS(F::cross_entropy(x, idx({0, 1, 2, 0}).to(DType::b8)), DTypeError,
                  "class-index targets must be int64");
  SL_CHECK_THROWS(F::nll_loss(x, idx({0, 1, 2, 0}), {.label_smoothing = 0.1}), ValueError,
                  "label_smoothing is not supported");
  SL_CHECK_THROWS(F::mse_loss(x, randn({4, 1})), ShapeError,
                  "mse_loss: input shape [4, 3] and target shape [4, 1] must be equal");
  SL_CHECK_THROWS(F::l1_loss(idx({1, 2}), idx({1, 2})), DTypeError,
                  "l1_loss: input must be floating point, got int64");
  SL_CHECK_THROWS(nn::parse_reduction("avg", "mse_loss"), ValueError,
                  "mse_loss: reduction must be 'none', 'mean' or 'sum', got 'avg'");
  // bce_with_logits' weight and pos_weight must broadcast TO the input's shape: PyTorch 1.13
  // refuses a [2, 3] weight for a [3] input ("output with shape [3] doesn't match the broadcast
  // shape [2, 3]"), where multiplying would have grown the loss to [2, 3].
  Tensor z3 = zeros({3});
  SL_CHECK_THROWS(F::binary_cross_entropy_with_logits(z3, z3, ones({2, 3})), ShapeError,
                  "binary_cross_entropy_with_logits: weight of shape [2, 3] must broadcast to the "
                  "input's shape [3]");
  SL_CHECK_THROWS(F::binary_cross_entropy_with_logits(z3, z3, Tensor(), ones({2, 3})), ShapeError,
                  "pos_weight of shape [2, 3] must broadcast to the input's shape [3]");
  SL_CHECK_THROWS(
      F::binary_cross_entropy_with_logits(zeros({2, 3}), zeros({2, 3}), Tensor(), ones({2})),
      ShapeError, "pos_weight of shape [2] must broadcast to the input's shape [2, 3]");
}

TEST_CASE("bce_with_logits: weights that broadcast to the input keep the input's shape") {
  // x = 0, t = 1: loss = -w * p * log(sigmoid(0)) = w * p * log 2 exactly (PyTorch 1.13 gives
  // 1.3862943649 for p = 2, w = 1 in float32). Rows get p = 2 and 3 from a [2, 1] pos_weight,
  // columns w = 1, 2, 3 from a [3] weight.
  Tensor l = F::binary_cross_entropy_with_logits(
      zeros({2, 3}, {.dtype = DType::f64}), ones({2, 3}, {.dtype = DType::f64}),
      tensor({1.0, 2.0, 3.0}), tensor({2.0, 3.0}).view({2, 1}), Reduction::none);
  const double ln2 = std::log(2.0);
  // f64 with exact small-integer factors: only the rounding of log(2) and one product remain
  SL_CHECK_CLOSE(l, tensor({2 * ln2, 4 * ln2, 6 * ln2, 3 * ln2, 6 * ln2, 9 * ln2}).view({2, 3}),
                 1e-15, 0);
}

TEST_CASE("bce, smooth_l1, huber and kl_div match PyTorch") {
  Fixture fx("loss");
  Tensor bw = fx.get("bce_probs.weight");
  for (auto red : {Reduction::mean, Reduction::sum, Reduction::none}) {
    const std::string r = nn::reduction_name(red);
    check_case(fx, "bce_probs_" + r, [&](const TensorList& in) {
      return F::binary_cross_entropy(in[0], in[1], Tensor(), red);
    });
  }
  nn::BCELoss bce(bw);
  CHECK(bce.state_dict().keys() == std::vector<std::string>{"weight"});
  check_case(fx, "bce_probs_w", [&](const TensorList& in) { return bce.forward(in[0], in[1]); });
  nn::SmoothL1Loss sl1;
  check_case(fx, "smooth_l1_mean", [&](const TensorList& in) { return sl1.forward(in[0], in[1]); });
  check_case(fx, "smooth_l1_b05_none", [&](const TensorList& in) {
    return F::smooth_l1_loss(in[0], in[1], Reduction::none, 0.5);
  });
  check_case(fx, "smooth_l1_b0_sum", [&](const TensorList& in) {
    return F::smooth_l1_loss(in[0], in[1], Reduction::sum, 0.0);
  });
  nn::HuberLoss huber;
  check_case(fx, "huber_mean", [&](const TensorList& in) { return huber.forward(in[0], in[1]); });
  check_case(fx, "huber_d2_none", [&](const TensorList& in) {
    return F::huber_loss(in[0], in[1], Reduction::none, 2.0);
  });
  for (std::string red : {"batchmean", "sum", "mean", "none"}) {
    nn::KLDivLoss kl(red);
    check_case(fx, "kl_" + red, [&](const TensorList& in) { return kl.forward(in[0], in[1]); });
  }
  check_case(fx, "kl_log_target",
             [&](const TensorList& in) { return F::kl_div(in[0], in[1], "batchmean", true); });
  CHECK(nn::KLDivLoss("batchmean").str() == "KLDivLoss()");  // as torch 1.13 prints it
}

TEST_CASE("binary_cross_entropy at 0 and 1: PyTorch's clamped logs and finite gradients") {
  // PyTorch 1.13 (float32, printed with 10 digits): F.binary_cross_entropy(x, t, reduction=
  // 'none') and the gradients of its sum for x = [0.2, 0.7, 0, 1], t = [1, 0.3, 0.5, 0.5]. The
  // input gradient at 0 and 1 is (x - t) / 1e-12, the target's log(1 - x) - log(x) unclamped.
  Tensor x = tensor({0.2f, 0.7f, 0.f, 1.f}).requires_grad_();
  Tensor t = tensor({1.f, 0.3f, 0.5f, 0.5f}).requires_grad_();
  Tensor l = F::binary_cross_entropy(x, t, Tensor(), Reduction::none);
  l.sum().backward();
  // rtol 1e-6: the printed digits; the same float32 formula as PyTorch's
  SL_CHECK_CLOSE(l, tensor({1.6094379425f, 0.9497834444f, 50.f, 50.f}), 1e-6, 0);
  SL_CHECK_CLOSE(x.grad(),
                 tensor({-4.9999995232f, 1.9047616720f, -4.9999999795e11f, 4.9999999795e11f}), 1e-6,
                 0);
  const auto gt = t.grad().to_vector<float>();
  CHECK(gt[0] == doctest::Approx(1.3862943649).epsilon(1e-6));
  CHECK(gt[1] == doctest::Approx(-0.8472978473).epsilon(1e-6));
  CHECK((std::isinf(gt[2]) && gt[2] > 0));
  CHECK((std::isinf(gt[3]) && gt[3] < 0));
  // x = t = 0 or 1 is a loss of 0; the opposite corners are 100 (both logs clamped at -100)
  Tensor c = tensor({0.f, 1.f, 0.f, 1.f}).requires_grad_();
  Tensor lc = F::binary_cross_entropy(c, tensor({0.f, 1.f, 1.f, 0.f}), Tensor(), Reduction::none);
  lc.sum().backward();
  CHECK(lc.to_vector<float>() == std::vector<float>{0, 0, 100, 100});
  SL_CHECK_CLOSE(c.grad(), tensor({0.f, 0.f, -9.9999999590e11f, 9.9999999590e11f}), 1e-6, 0);
}

TEST_CASE("kl_div and smooth_l1 where PyTorch 1.13's gradients are NaN or a one-sided kink") {
  // F.kl_div(x, t, reduction='none') for x = [-1, -2, -0.5], t = [0, 0.5, 1]: loss [0,
  // 0.6534264088, 0.5], x.grad = -t. t.grad = log t + 1 - x where t > 0 (2.3068528175, 1.5); at
  // t = 0 PyTorch gives NaN (xlogy's derivative there is 0/0) and ours is -x = 1: the t log t
  // term contributes 0 (documented in nn/loss.h).
  Tensor x = tensor({-1.f, -2.f, -0.5f}).requires_grad_();
  Tensor t = tensor({0.f, 0.5f, 1.f}).requires_grad_();
  Tensor l = F::kl_div(x, t, "none");
  l.sum().backward();
  SL_CHECK_CLOSE(l, tensor({0.f, 0.6534264088f, 0.5f}), 1e-6, 0);
  SL_CHECK_CLOSE(x.grad(), tensor({-0.f, -0.5f, -1.f}), 0, 0);
  SL_CHECK_CLOSE(t.grad(), tensor({1.f, 2.3068528175f, 1.5f}), 1e-6, 0);
  // a negative probability gives NaN, as PyTorch's xlogy
  CHECK(std::isnan(F::kl_div(tensor({-1.f}), tensor({-0.5f}), "none").item<float>()));
  // a 0-d batchmean is the sum (PyTorch: 0.1534264088 for kl_div(-1, 0.5))
  CHECK(F::kl_div(scalar_tensor(-1.0), scalar_tensor(0.5), "batchmean").item<float>() ==
        doctest::Approx(0.1534264088).epsilon(1e-6));
  // log_target: F.kl_div(x, t, reduction='none', log_target=True) for t = [-30, -0.5, 0]
  Tensor x2 = tensor({-1.f, -2.f, -0.5f}).requires_grad_();
  Tensor t2 = tensor({-30.f, -0.5f, 0.f}).requires_grad_();
  Tensor l2 = F::kl_div(x2, t2, "none", true);
  l2.sum().backward();
  SL_CHECK_CLOSE(l2, tensor({-2.7137105497e-12f, 0.90979599953f, 0.5f}), 1e-6, 0);
  SL_CHECK_CLOSE(x2.grad(), tensor({-9.3576229122e-14f, -0.60653066635f, -1.f}), 1e-6, 0);
  SL_CHECK_CLOSE(t2.grad(), tensor({-2.6201343612e-12f, 1.5163266659f, 1.5f}), 1e-6, 0);
  // smooth_l1 with beta 0 is l1: the gradient at d = 0 is 0 (PyTorch 1.13's smooth_l1 gives -1
  // there, its l1_loss 0); d = 1 and -2 give 1 and -1 in both
  Tensor a = tensor({0.f, 1.f, -2.f}).requires_grad_();
  Tensor s = F::smooth_l1_loss(a, zeros({3}), Reduction::none, 0.0);
  s.sum().backward();
  CHECK(s.to_vector<float>() == std::vector<float>{0, 1, 2});
  CHECK(a.grad().to_vector<float>() == std::vector<float>{0, 1, -1});
}

TEST_CASE("bce, smooth_l1, huber and kl_div gradcheck in float64") {
  manual_seed(21);
  const TensorOptions f64{.dtype = DType::f64};
  Tensor p = (rand({3, 4}, f64) * 0.9 + 0.05).requires_grad_();
  Tensor t = rand({3, 4}, f64).requires_grad_();
  Tensor w = rand({4}, f64) + 0.5;
  CHECK(gradcheck([&](const TensorList& in) { return F::binary_cross_entropy(in[0], in[1], w); },
                  {p, t}));
  // differences of spread 2 against beta / delta 0.7: none within 1e-3 of a kink (checked)
  Tensor a = (randn({3, 4}, f64) * 2.0).requires_grad_();
  Tensor b = randn({3, 4}, f64).requires_grad_();
  Tensor ad = (a - b).abs().detach();
  CHECK((ad - 0.7).abs().min().item<double>() > 1e-3);
  CHECK(ad.min().item<double>() > 1e-3);
  CHECK(gradcheck(
      [&](const TensorList& in) { return F::smooth_l1_loss(in[0], in[1], Reduction::sum, 0.7); },
      {a, b}));
  CHECK(gradcheck(
      [&](const TensorList& in) { return F::huber_loss(in[0], in[1], Reduction::mean, 0.7); },
      {a, b}));
  Tensor lq = log_softmax(randn({3, 4}, f64), 1).detach().requires_grad_();
  Tensor q = softmax(randn({3, 4}, f64), 1).detach().requires_grad_();
  CHECK(gradcheck([&](const TensorList& in) { return F::kl_div(in[0], in[1], "batchmean"); },
                  {lq, q}));
  CHECK(gradcheck([&](const TensorList& in) { return F::kl_div(in[0], in[1], "sum", true); },
                  {lq, log_softmax(randn({3, 4}, f64), 1).detach().requires_grad_()}));
}

TEST_CASE("bce, smooth_l1, huber and kl_div error paths") {
  Tensor z = zeros({2, 3});
  // PyTorch: "all elements of input should be between 0 and 1" (NaN included)
  SL_CHECK_THROWS(F::binary_cross_entropy(tensor({0.5f, 1.5f}), tensor({1.f, 0.f})), ValueError,
                  "binary_cross_entropy: every input element must lie in [0, 1] (probabilities), "
                  "got min 0.5 and max 1.5");
  SL_CHECK_THROWS(F::binary_cross_entropy(tensor({NAN}), tensor({1.f})), ValueError,
                  "(NaN counts as outside)");
  SL_CHECK_THROWS(F::binary_cross_entropy(z, zeros({3})), ShapeError,
                  "binary_cross_entropy: input shape [2, 3] and target shape [3] must be equal");
  // PyTorch: "output with shape [3] doesn't match the broadcast shape [2, 3]"
  SL_CHECK_THROWS(F::binary_cross_entropy(zeros({3}), zeros({3}), ones({2, 3})), ShapeError,
                  "binary_cross_entropy: weight of shape [2, 3] must broadcast to the input's "
                  "shape [3]");
  // PyTorch: "smooth_l1_loss does not support negative values for beta."
  SL_CHECK_THROWS(F::smooth_l1_loss(z, z, Reduction::mean, -1.0), ValueError,
                  "smooth_l1_loss: beta must be >= 0, got -1");
  SL_CHECK_THROWS(F::smooth_l1_loss(z, z, Reduction::mean, NAN), ValueError,
                  "smooth_l1_loss: beta must be >= 0, got nan");
  SL_CHECK_THROWS(nn::SmoothL1Loss(Reduction::mean, -0.5), ValueError,
                  "SmoothL1Loss: beta must be >= 0, got -0.5");
  // PyTorch: "huber_loss does not support non-positive values for delta."
  SL_CHECK_THROWS(F::huber_loss(z, z, Reduction::mean, 0.0), ValueError,
                  "huber_loss: delta must be > 0, got 0");
  SL_CHECK_THROWS(nn::HuberLoss(Reduction::sum, -1.0), ValueError,
                  "HuberLoss: delta must be > 0, got -1");
  SL_CHECK_THROWS(F::huber_loss(z, zeros({2, 1})), ShapeError,
                  "huber_loss: input shape [2, 3] and target shape [2, 1] must be equal");
  // PyTorch: "bogus is not a valid value for reduction"
  SL_CHECK_THROWS(F::kl_div(z, z, "bogus"), ValueError,
                  "kl_div: reduction must be 'none', 'sum', 'mean' or 'batchmean', got 'bogus'");
  SL_CHECK_THROWS(nn::KLDivLoss("avg"), ValueError,
                  "KLDivLoss: reduction must be 'none', 'sum', 'mean' or 'batchmean', got 'avg'");
  SL_CHECK_THROWS(F::kl_div(z, zeros({3})), ShapeError,
                  "kl_div: input shape [2, 3] and target shape [3] must be equal");
  SL_CHECK_THROWS(F::kl_div(z, ones({2, 3}, {.dtype = DType::i64})), DTypeError,
                  "kl_div: target must be floating point, got int64");
}
