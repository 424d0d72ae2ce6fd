// poisson_nll_loss and gaussian_nll_loss (nn/loss_likelihood.h) against PyTorch 1.13 (fixture:
// loss_likelihood, made by tools/gen_loss_fixtures.py with the configurations named here),
// gradchecks in float64, module forms and error paths.
#include "loss_fixture_case.h"
#include "nn/loss_likelihood.h"

using namespace sl;
using sl::testing::check_loss_case;
using sl::testing::Fixture;
namespace F = sl::nn::functional;
using nn::Reduction;

namespace {
const char* kSuffixes[] = {"", "_f64"};  // the float32 and float64 cases
}  // namespace

TEST_CASE("poisson_nll_loss matches PyTorch (log input, rate input, Stirling's term)") {
  Fixture fx("loss_likelihood");
  for (std::string s : kSuffixes) {
    for (auto red : {Reduction::mean, Reduction::sum, Reduction::none}) {
      check_loss_case(fx, std::string("poisson_log_") + nn::reduction_name(red) + s, 2,
                      [&](const TensorList& in) {
                        return F::poisson_nll_loss(in[0], in[1], true, false, 1e-8, red);
                      });
    }
    check_loss_case(fx, "poisson_rate" + s, 2, [&](const TensorList& in) {
      return F::poisson_nll_loss(in[0], in[1], false, false, 1e-4);
    });
    const Tensor t = fx.get("poisson_full" + s + ".target");
    CHECK(t.eq(0).any().item<bool>());  // the masked entries at target 0 and 1 are exercised
    check_loss_case(fx, "poisson_full" + s, 1, [&](const TensorList& in) {
      return F::poisson_nll_loss(in[0], t, true, true, 1e-8, Reduction::none);
    });
  }
}

TEST_CASE("gaussian_nll_loss matches PyTorch (clamped var, var shapes, full, broadcast target)") {
  Fixture fx("loss_likelihood");
  for (std::string s : kSuffixes) {
    for (auto red : {Reduction::mean, Reduction::sum, Reduction::none}) {
      check_loss_case(fx, std::string("gaussian_") + nn::reduction_name(red) + s, 3,
                      [&](const TensorList& in) {
                        return F::gaussian_nll_loss(in[0], in[1], in[2], false, 1e-6, red);
                      });
    }
    check_loss_case(fx, "gaussian_full_eps" + s, 3, [&](const TensorList& in) {
      return F::gaussian_nll_loss(in[0], in[1], in[2], true, 1e-3);
    });
    for (const char* c : {"gaussian_var_short", "gaussian_var_one", "gaussian_target_bcast"}) {
      check_loss_case(fx, c + s, 3, [&](const TensorList& in) {
        return F::gaussian_nll_loss(in[0], in[1], in[2], false, 1e-6, Reduction::none);
      });
    }
  }
}

TEST_CASE("likelihood losses gradcheck in float64") {
  manual_seed(41);
  TensorOptions f64{.dtype = DType::f64};
  Tensor x = randn({3, 4}, f64).requires_grad_();
  Tensor t = (rand({3, 4}, f64) * 4).requires_grad_();
  CHECK(gradcheck([](const TensorList& in) { return F::poisson_nll_loss(in[0], in[1]); }, {x, t}));
  Tensor rate = (rand({3, 4}, f64) + 0.5).requires_grad_();
  Tensor big = (rand({3, 4}, f64) * 3 + 1.5).requires_grad_();  // all > 1: Stirling everywhere
  CHECK(gradcheck(
      [](const TensorList& in) { return F::poisson_nll_loss(in[0], in[1], false, true, 1e-8); },
      {rate, big}));
  Tensor y = randn({3, 4}, f64).requires_grad_();
  Tensor var = (rand({3, 4}, f64) + 0.1).requires_grad_();  // above eps: no clamp
  CHECK(gradcheck(
      [](const TensorList& in) { return F::gaussian_nll_loss(in[0], in[1], in[2], true); },
      {x, y, var}));
  Tensor var_short = (rand({3}, f64) + 0.1).requires_grad_();
  CHECK(gradcheck(
      [](const TensorList& in) {
        return F::gaussian_nll_loss(in[0], in[1], in[2], false, 1e-6, Reduction::sum);
      },
      {x, y, var_short}));
}

TEST_CASE("likelihood loss modules and error paths") {
  manual_seed(42);
  Tensor x = randn({3, 4}), t = rand({3, 4}) * 3, v = rand({3, 4}) + 0.1;
  nn::PoissonNLLLoss pn(false, true, 1e-3, Reduction::sum);
  Tensor r = rand({3, 4}) + 0.1;
  SL_CHECK_CLOSE(pn.forward(r, t), F::poisson_nll_loss(r, t, false, true, 1e-3, Reduction::sum), 0,
                 0);
  nn::GaussianNLLLoss gn(true, 1e-2, Reduction::none);
  SL_CHECK_CLOSE(gn.forward(x, t, v), F::gaussian_nll_loss(x, t, v, true, 1e-2, Reduction::none), 0,
                 0);
  CHECK(gn.state_dict().keys().empty());
  SL_CHECK_THROWS(gn.forward(x), ValueError, "");
  SL_CHECK_THROWS(F::poisson_nll_loss(x, rand({4})), ShapeError,
                  "poisson_nll_loss: input shape [3, 4] and target shape [4] must be equal");
  SL_CHECK_THROWS(F::poisson_nll_loss(x, ones({3, 4}, {.dtype = DType::i64})), DTypeError,
                  "poisson_nll_loss: target must be floating point, got int64");
  SL_CHECK_THROWS(F::gaussian_nll_loss(x, t, rand({3, 2})), ValueError,
                  "gaussian_nll_loss: var is of incorrect size: [3, 2] for input [3, 4]");
  SL_CHECK_THROWS(F::gaussian_nll_loss(x, t, rand({4})), ValueError, "var is of incorrect size");
  Tensor neg = v.clone();
  neg.select(0, 1).select(0, 2).fill_(-0.5);
  SL_CHECK_THROWS(F::gaussian_nll_loss(x, t, neg), ValueError,
                  "gaussian_nll_loss: var has negative entry/entries");
  SL_CHECK_THROWS(F::gaussian_nll_loss(x, rand({2, 4}), v), ShapeError,
                  "gaussian_nll_loss: target of shape [2, 4] must broadcast to the input's shape "
                  "[3, 4]");
  SL_CHECK_THROWS(F::gaussian_nll_loss(x, t, ones({3, 4}, {.dtype = DType::i64})), DTypeError,
                  "gaussian_nll_loss: var must be floating point, got int64");
}
