// Adamax, NAdam and RAdam (optim/adamax.h, optim/nadam.h, optim/radam.h): the kernels against a
// per-operation reference (bit for bit, so a change in the order of operations shows), master
// weights, state and state_dict, and error paths. Parity with PyTorch itself:
// test_optim_parity.cpp (fixture), the round trip: test_optimizer.cpp.
#include <cmath>
#include <vector>

#include "optim_testing.h"

using namespace sl;
using sl::testing::bits_equal;
using sl::testing::make_params;
using sl::testing::set_seeded_grads;
using sl::testing::through_file;
using namespace sl::optim;
using serialize::Json;
using serialize::Section;

namespace {

template <class C>
DType dtype_of() {
  return std::is_same_v<C, double> ? DType::f64 : DType::f32;
}

/// torch.optim.Adamax's single-tensor step (PyTorch 1.13) one operation per statement in compute
/// type C, each rounded once: what the kernels must give bit for bit.
template <class C>
void adamax_reference(std::vector<C>& p, const std::vector<C>& g, std::vector<C>& m,
                      std::vector<C>& u, int64_t step, const AdamaxHyper& h) {
  const double clr = h.lr / (1 - std::pow(h.beta1, static_cast<double>(step)));  // Python floats
  const C b1 = static_cast<C>(h.beta1), omb1 = static_cast<C>(1.0 - h.beta1);
  const C b2 = static_cast<C>(h.beta2), eps = static_cast<C>(h.eps);
  const C wd = static_cast<C>(h.weight_decay), neg_clr = static_cast<C>(-clr);
  for (size_t i = 0; i < p.size(); ++i) {
    C gi = h.maximize ? -g[i] : g[i];
    if (h.weight_decay != 0.0) gi = gi + p[i] * wd;  // grad.add(param, alpha=weight_decay)
    m[i] = m[i] * b1 + gi * omb1;                    // exp_avg.mul_(beta1).add_(grad, 1 - beta1)
    C a = u[i] * b2;                                 // exp_inf.mul_(beta2)
    C b = std::abs(gi) + eps;                        // grad.abs().add_(eps)
    u[i] = std::isnan(a) || a > b ? a : b;           // amax over the two (no NaN here)
    C num = m[i] * neg_clr;                          // param.addcdiv_(exp_avg, exp_inf, value=-clr)
    p[i] = p[i] + num / u[i];
  }
}

/// torch.optim.NAdam's single-tensor step, as adamax_reference; mu_product advanced in float32
/// as PyTorch's 0-d float32 tensor does (`mu_product *= mu`), the coefficients in double.
template <class C>
void nadam_reference(std::vector<C>& p, const std::vector<C>& g, std::vector<C>& m,
                     std::vector<C>& v, float& mu_product, int64_t step, const NadamHyper& h) {
  const double s = static_cast<double>(step);
  const double bc2 = 1 - std::pow(h.beta2, s);
  const double mu = h.beta1 * (1. - 0.5 * std::pow(0.96, s * h.momentum_decay));
  const double mu_next = h.beta1 * (1. - 0.5 * std::pow(0.96, (s + 1) * h.momentum_decay));
  mu_product = mu_product * static_cast<float>(mu);
  const float mu_product_next = mu_product * static_cast<float>(mu) * static_cast<float>(mu_next);
  const C c1 = static_cast<C>(-h.lr * (1. - mu) / (1. - static_cast<double>(mu_product)));
  const C c2 = static_cast<C>(-h.lr * mu_next / (1. - static_cast<double>(mu_product_next)));
  const C b1 = static_cast<C>(h.beta1), omb1 = static_cast<C>(1.0 - h.beta1);
  const C b2 = static_cast<C>(h.beta2), omb2 = static_cast<C>(1.0 - h.beta2);
  const C eps = static_cast<C>(h.eps), wd = static_cast<C>(h.weight_decay);
  for (size_t i = 0; i < p.size(); ++i) {
    C gi = g[i];
    if (h.weight_decay != 0.0) gi = gi + p[i] * wd;
    m[i] = m[i] * b1 + gi * omb1;
    C sq = gi * omb2;  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    v[i] = v[i] * b2 + sq * gi;
    C den = std::sqrt(v[i] / static_cast<C>(bc2)) + eps;  // exp_avg_sq.div(bc2).sqrt().add_(eps)
    C n1 = gi * c1;                                       // param.addcdiv_(grad, denom, c1)
    p[i] = p[i] + n1 / den;
    C n2 = m[i] * c2;  // param.addcdiv_(exp_avg, denom, c2)
    p[i] = p[i] + n2 / den;
  }
}

/// torch.optim.RAdam's single-tensor step, as adamax_reference (the scalars in double as in
/// radam.py, left to right).
template <class C>
void radam_reference(std::vector<C>& p, const std::vector<C>& g, std::vector<C>& m,
                     std::vector<C>& v, int64_t step, const RadamHyper& h, bool& rectified) {
  const double s = static_cast<double>(step);
  const double bc1 = 1 - std::pow(h.beta1, s), bc2 = 1 - std::pow(h.beta2, s);
  const double rho_inf = 2 / (1 - h.beta2) - 1;
  const double rho_t = rho_inf - 2 * s * std::pow(h.beta2, s) / bc2;
  rectified = rho_t > 5.;
  const double rect =
      rectified
          ? std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
          : 0.0;
  const C b1 = static_cast<C>(h.beta1), omb1 = static_cast<C>(1.0 - h.beta1);
  const C b2 = static_cast<C>(h.beta2), omb2 = static_cast<C>(1.0 - h.beta2);
  const C eps = static_cast<C>(h.eps), wd = static_cast<C>(h.weight_decay);
  const C lr = static_cast<C>(h.lr);
  for (size_t i = 0; i < p.size(); ++i) {
    C gi = g[i];
    if (h.weight_decay != 0.0) gi = gi + p[i] * wd;
    m[i] = m[i] * b1 + gi * omb1;
    C sq = gi * omb2;
    v[i] = v[i] * b2 + sq * gi;
    C bce = m[i] / static_cast<C>(bc1);  // exp_avg / bias_correction1
    C upd = bce * lr;
    if (rectified) {
      C den = std::sqrt(v[i]) + eps;  // exp_avg_sq.sqrt().add_(eps)
      C inv = C(1) / den;             // sqrt(bc2) / den is den.reciprocal() * sqrt(bc2)
      C adaptive = inv * static_cast<C>(std::sqrt(bc2));
      upd = upd * adaptive;
      upd = upd * static_cast<C>(rect);
    }
    p[i] = p[i] - upd;  // param.add_(.., alpha=-1.0)
  }
}

/// Gradients over many magnitudes, 2500 elements (chunks of 1024 with a tail), `steps` steps.
template <class C, class Step, class Ref>
void check_bits(int steps, const Step& step, const Ref& ref) {
  const int64_t n = 2500;
  Generator gen(19);
  TensorOptions o{.dtype = dtype_of<C>()};
  Tensor p = randn({n}, o, &gen), a = zeros({n}, o), b = zeros({n}, o);
  std::vector<C> rp = p.to_vector<C>(), ra(n, 0), rb(n, 0);
  for (int64_t s = 1; s <= steps; ++s) {
    Tensor g = (randn({n}, o, &gen) * exp(randn({n}, o, &gen) * 3.0)).contiguous();
    step(p, g, a, b, s);
    ref(rp, g.to_vector<C>(), ra, rb, s);
  }
  CHECK(p.to_vector<C>() == rp);
  CHECK(a.to_vector<C>() == ra);
  CHECK(b.to_vector<C>() == rb);
}

template <class C>
void check_adamax_bits(const AdamaxHyper& h) {
  check_bits<C>(
      4, [&](auto&... t) { ops::adamax_step(t..., h); },
      [&](auto& p, const auto& g, auto& m, auto& u, int64_t s) {
        adamax_reference<C>(p, g, m, u, s, h);
      });
}

template <class C>
void check_nadam_bits(const NadamHyper& h) {
  double mu_product = 1.0;
  float ref_mu_product = 1.0f;
  check_bits<C>(
      4,
      [&](const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, int64_t s) {
        mu_product = nadam_mu_product(h, s, mu_product);
        ops::nadam_step(p, g, m, v, s, mu_product, h);
      },
      [&](auto& p, const auto& g, auto& m, auto& v, int64_t s) {
        nadam_reference<C>(p, g, m, v, ref_mu_product, s, h);
      });
  CHECK(mu_product == static_cast<double>(ref_mu_product));
}

/// 8 steps: for beta2 >= 0.85 rho_t passes 5 at step 6, so both branches run.
template <class C>
void check_radam_bits(const RadamHyper& h) {
  int rectified_steps = 0;
  check_bits<C>(
      8, [&](auto&... t) { ops::radam_step(t..., h); },
      [&](auto& p, const auto& g, auto& m, auto& v, int64_t s) {
        bool rect = false;
        radam_reference<C>(p, g, m, v, s, h, rect);
        rectified_steps += rect;
        CHECK(radam_step_scalars(h, s).rectified == rect);
      });
  CHECK(rectified_steps == 3);  // steps 6, 7, 8
}

}  // namespace

TEST_CASE("adamax_step kernel equals the per-operation reference bit for bit (f32, f64)") {
  for (int variant = 0; variant < 4; ++variant) {
    CAPTURE(variant);
    AdamaxHyper h{.lr = 0.01,
                  .beta1 = variant == 2 ? 0.5 : 0.9,
                  .beta2 = variant == 2 ? 0.8 : 0.999,
                  .eps = variant >= 2 ? 0.1 : 1e-8,
                  .weight_decay = variant == 1 || variant == 3 ? 0.05 : 0.0,
                  .maximize = variant == 3};
    check_adamax_bits<float>(h);
    check_adamax_bits<double>(h);
  }
}

TEST_CASE("nadam_step kernel equals the per-operation reference bit for bit (f32, f64)") {
  for (int variant = 0; variant < 3; ++variant) {
    CAPTURE(variant);
    NadamHyper h{.lr = 0.01,
                 .beta1 = variant == 2 ? 0.6 : 0.9,
                 .eps = variant == 2 ? 0.1 : 1e-8,
                 .weight_decay = variant == 1 ? 0.05 : 0.0,
                 .momentum_decay = variant == 1 ? 0.3 : 4e-3};
    check_nadam_bits<float>(h);
    check_nadam_bits<double>(h);
  }
}

TEST_CASE("radam_step kernel equals the per-operation reference bit for bit (f32, f64)") {
  for (int variant = 0; variant < 3; ++variant) {
    CAPTURE(variant);
    RadamHyper h{.lr = 0.01,
                 .beta2 = variant == 2 ? 0.85 : 0.999,
                 .eps = variant == 2 ? 0.1 : 1e-8,
                 .weight_decay = variant == 1 ? 0.05 : 0.0};
    check_radam_bits<float>(h);
    check_radam_bits<double>(h);
  }
}

TEST_CASE("RAdam's rectification threshold: rho_t by hand") {
  // beta2 = 0.999: rho_inf = 2 / 0.001 - 1 = 1999; step 1: rho_1 = 1999 - 2 * 0.999 / 0.001 = 1
  // (not rectified); step 6: 0.999^6 = exp(6 ln 0.999) = exp(-0.006003002) = 0.99401498, so
  // bc2 = 0.00598502 and rho_6 = 1999 - 12 * 0.99401498 / 0.00598502 = 1999 - 1993.00583 =
  // 5.99417 > 5 (rectified), with rect = sqrt(1.99417 * 3.99417 * 1999 / (1995 * 1997 *
  // 5.99417)) = sqrt(15922.13 / 23880858) = sqrt(6.66731e-4) = 0.0258211
  RadamHyper h;
  CHECK(radam_step_scalars(h, 1).rho_t == doctest::Approx(1.0).epsilon(1e-9));
  CHECK(!radam_step_scalars(h, 5).rectified);
  RadamStepScalars s6 = radam_step_scalars(h, 6);
  CHECK(s6.rectified);
  // the hand values carry 6 digits
  CHECK(s6.rho_t == doctest::Approx(5.99417).epsilon(2e-6));
  CHECK(s6.rect == doctest::Approx(0.0258211).epsilon(2e-6));
}

TEST_CASE("Adamax, NAdam and RAdam defaults are PyTorch 1.13's") {
  AdamaxOptions x;
  CHECK(x.lr == 2e-3);
  CHECK(x.beta1 == 0.9);
  CHECK(x.beta2 == 0.999);
  CHECK(x.eps == 1e-8);
  CHECK(x.weight_decay == 0.0);
  CHECK(!x.maximize);
  NAdamOptions n;
  CHECK(n.lr == 2e-3);
  CHECK(n.beta1 == 0.9);
  CHECK(n.beta2 == 0.999);
  CHECK(n.eps == 1e-8);
  CHECK(n.weight_decay == 0.0);
  CHECK(n.momentum_decay == 4e-3);
  RAdamOptions r;
  CHECK(r.lr == 1e-3);
  CHECK(r.beta1 == 0.9);
  CHECK(r.beta2 == 0.999);
  CHECK(r.eps == 1e-8);
  CHECK(r.weight_decay == 0.0);
}

TEST_CASE("Adamax/NAdam/RAdam state: which tensors, lazily, with PyTorch's keys") {
  Adamax x(make_params());
  NAdam n(make_params());
  RAdam r(make_params());
  for (Optimizer* o : std::initializer_list<Optimizer*>{&x, &n, &r}) {
    CHECK(o->state_tensors(0) == 2);
    CHECK(o->state_dict().tensors.size() == 0);  // nothing before the first step
    CHECK(o->state(0, 0).empty());
    set_seeded_grads(o->params(0), 1);
    o->step();
    o->step();
  }
  Section a = x.state_dict(), b = n.state_dict(), c = r.state_dict();
  CHECK(a.tensors.keys() == std::vector<std::string>{"state.0.exp_avg", "state.0.exp_inf",
                                                     "state.1.exp_avg", "state.1.exp_inf"});
  for (const Section* s : {&b, &c}) {
    CHECK(s->tensors.keys() == std::vector<std::string>{"state.0.exp_avg", "state.0.exp_avg_sq",
                                                        "state.1.exp_avg", "state.1.exp_avg_sq"});
  }
  CHECK(a.meta.at("optimizer").as_string() == "Adamax");
  CHECK(b.meta.at("optimizer").as_string() == "NAdam");
  CHECK(c.meta.at("optimizer").as_string() == "RAdam");
  CHECK(b.meta.at("param_groups")[0].at("momentum_decay").as_double() == 4e-3);
  CHECK(c.meta.at("param_groups")[0].at("betas").dump() == "[0.9,0.999]");
  // NAdam's mu_product beside the step: mu_1 mu_2 in float32, mu_t = 0.9 (1 - 0.5 *
  // 0.96^(0.004 t)) (PyTorch's formula, evaluated here in double and rounded as its tensor does)
  const double mu1 = 0.9 * (1 - 0.5 * std::pow(0.96, 0.004)),
               mu2 = 0.9 * (1 - 0.5 * std::pow(0.96, 0.008));
  const float want = (1.0f * static_cast<float>(mu1)) * static_cast<float>(mu2);
  CHECK(b.meta.at("state").at("1").at("step").as_int() == 2);
  CHECK(b.meta.at("state").at("1").at("mu_product").as_double() == static_cast<double>(want));
  CHECK(a.meta.at("state").at("1").find("mu_product") == nullptr);
  CHECK(!r.state(0, 0).mu_product);
  // Adamax's exp_inf after two steps of the same gradient g (zero start, eps 1e-8):
  // max(0 * b2, |g| + eps) = |g| + eps, then max((|g| + eps) * b2, |g| + eps) = |g| + eps
  const Tensor& g = x.params(0)[1].grad();
  CHECK(bits_equal(x.state(0, 1).exp_inf, (g.abs() + 1e-8f).detach()));
}

TEST_CASE("NAdam state_dict: mu_product restored, checked, and required once stepped") {
  TensorList p = make_params();
  NAdam a(p, {.lr = 0.01, .beta1 = 0.8, .momentum_decay = 0.1});
  set_seeded_grads(p, 1);
  a.step();
  NAdam b(make_params());
  b.load_state_dict(through_file(a.state_dict()));
  CHECK(b.options(0).momentum_decay == 0.1);
  CHECK(b.options(0).beta1 == 0.8);
  CHECK(b.state(0, 1).mu_product == a.state(0, 1).mu_product);
  REQUIRE(a.state(0, 1).mu_product);
  CHECK(*a.state(0, 1).mu_product < 0.8);

  Section bad = a.state_dict();
  Json st = bad.meta.at("state");
  Json s0 = st.at("0");
  s0.set("mu_product", "x");
  st.set("0", s0);
  bad.meta.set("state", st);
  SL_CHECK_THROWS(b.load_state_dict(bad), ValueError,
                  "NAdam.load_state_dict: mu_product of parameter 0 is not a number");
  // a stepped state without mu_product (not written by NAdam) cannot continue
  Section none = a.state_dict();
  Json st2 = Json::object();
  for (const auto& [k, v] : none.meta.at("state").members()) {
    st2.set(k, Json::object({{"step", v.at("step").as_int()}}));
  }
  none.meta.set("state", st2);
  NAdam c(make_params());
  c.load_state_dict(none);
  set_seeded_grads(c.params(0), 2);
  SL_CHECK_THROWS(c.step(), ValueError,
                  "nadam_step: the state has taken 1 steps but holds no mu_product");
  RAdam r(make_params());
  SL_CHECK_THROWS(r.load_state_dict(a.state_dict()), ValueError,
                  "saved state is for NAdam, not RAdam");
}

TEST_CASE("Adamax, NAdam and RAdam with bf16 parameters and master weights run the f32 math") {
  auto run = [](auto make_opt) { sl::testing::check_master_weights_run_f32_math(7, make_opt); };
  run([](TensorList& ps, bool mw) {
    return std::make_unique<Adamax>(
        ps,
        AdamaxOptions{.lr = 0.01, .weight_decay = 0.01, .maximize = true, .master_weights = mw});
  });
  run([](TensorList& ps, bool mw) {
    return std::make_unique<NAdam>(
        ps, NAdamOptions{
                .lr = 0.01, .weight_decay = 0.01, .momentum_decay = 0.1, .master_weights = mw});
  });
  run([](TensorList& ps, bool mw) {  // 7 steps: rectified from step 6
    return std::make_unique<RAdam>(
        ps, RAdamOptions{.lr = 0.01, .weight_decay = 0.01, .master_weights = mw});
  });
}

TEST_CASE("Adamax, NAdam and RAdam error paths: hyperparameters and kernel operands") {
  TensorList ps = make_params();
  // PyTorch's constructor messages and order (lr, eps, betas, weight_decay[, momentum_decay])
  SL_CHECK_THROWS(Adamax(ps, {.lr = -0.1}), ValueError, "Adamax: invalid learning rate -0.1");
  SL_CHECK_THROWS(Adamax(ps, {.eps = -1e-8}), ValueError, "Adamax: invalid epsilon value -1e-08");
  SL_CHECK_THROWS(Adamax(ps, {.beta1 = 1.0}), ValueError,
                  "Adamax: invalid beta parameter at index 0: 1");
  SL_CHECK_THROWS(Adamax(ps, {.beta2 = -0.1}), ValueError,
                  "Adamax: invalid beta parameter at index 1: -0.1");
  SL_CHECK_THROWS(Adamax(ps, {.weight_decay = NAN}), ValueError,
                  "Adamax: invalid weight_decay value nan");
  SL_CHECK_THROWS(Adamax(ps, {.lr = -1, .eps = -1}), ValueError, "Adamax: invalid learning rate");
  SL_CHECK_THROWS(NAdam(ps, {.lr = INFINITY}), ValueError, "NAdam: invalid learning rate inf");
  SL_CHECK_THROWS(NAdam(ps, {.eps = -1}), ValueError, "NAdam: invalid epsilon value -1");
  SL_CHECK_THROWS(NAdam(ps, {.beta1 = NAN}), ValueError,
                  "NAdam: invalid beta parameter at index 0: nan");
  SL_CHECK_THROWS(NAdam(ps, {.beta2 = 1.5}), ValueError,
                  "NAdam: invalid beta parameter at index 1: 1.5");
  SL_CHECK_THROWS(NAdam(ps, {.weight_decay = -1}), ValueError,
                  "NAdam: invalid weight_decay value -1");
  SL_CHECK_THROWS(NAdam(ps, {.momentum_decay = -0.004}), ValueError,
                  "NAdam: invalid momentum_decay value -0.004");
  SL_CHECK_THROWS(NAdam(ps, {.beta1 = 2, .weight_decay = -1}), ValueError,
                  "NAdam: invalid beta parameter at index 0: 2");
  SL_CHECK_THROWS(RAdam(ps, {.lr = -1}), ValueError, "RAdam: invalid learning rate -1");
  SL_CHECK_THROWS(RAdam(ps, {.eps = NAN}), ValueError, "RAdam: invalid epsilon value nan");
  SL_CHECK_THROWS(RAdam(ps, {.beta1 = -0.5}), ValueError,
                  "RAdam: invalid beta parameter at index 0: -0.5");
  SL_CHECK_THROWS(RAdam(ps, {.beta2 = 1}), ValueError,
                  "RAdam: invalid beta parameter at index 1: 1");
  SL_CHECK_THROWS(RAdam(ps, {.weight_decay = -0.1}), ValueError,
                  "RAdam: invalid weight_decay value -0.1");
  SL_CHECK_THROWS(RAdam({zeros({2}, {.dtype = DType::i64})}), DTypeError, "floating");
  SL_CHECK_THROWS(NAdam({ps[0], ps[0]}), ValueError, "NAdam: parameter 1 appears twice");

  Adamax x(ps);
  NAdam n(make_params());
  RAdam r(make_params());
  x.options(0).beta2 = 1.0;  // made invalid after construction: step() checks again
  n.options(0).momentum_decay = NAN;
  r.options(0).lr = -1;
  for (Optimizer* o : std::initializer_list<Optimizer*>{&x, &n, &r})
    set_seeded_grads(o->params(0), 1);
  SL_CHECK_THROWS(x.step(), ValueError, "Adamax: invalid beta parameter at index 1: 1");
  SL_CHECK_THROWS(n.step(), ValueError, "NAdam: invalid momentum_decay value nan");
  SL_CHECK_THROWS(r.step(), ValueError, "RAdam: invalid learning rate -1");
  CHECK(x.state(0, 0).empty());
  CHECK(n.state(0, 0).empty());
  SL_CHECK_THROWS(r.options(1), IndexError, "RAdam: group 1 out of range");

  Tensor p = zeros({6}), g = zeros({6}), s = zeros({6});
  SL_CHECK_THROWS(ops::adamax_step(p, g, s, Tensor(), 1, {}), ValueError,
                  "adamax_step: exp_inf is an undefined tensor");
  SL_CHECK_THROWS(ops::adamax_step(p, g, s, s, 0, {}), ValueError,
                  "adamax_step: step must be >= 1");
  SL_CHECK_THROWS(ops::nadam_step(p, g, zeros({5}), s, 1, 0.5, {}), ShapeError,
                  "nadam_step: exp_avg has 5 elements but param has 6");
  SL_CHECK_THROWS(ops::nadam_step(p, g, s, s, 1, 1.0, {}), ValueError,
                  "nadam_step: mu_product must be in [0, 1) after a step, got 1");
  SL_CHECK_THROWS(ops::radam_step(p, g.to(DType::f64), s, s, 1, {}), DTypeError,
                  "radam_step: grad of dtype float64 does not fit a param of dtype float32");
  SL_CHECK_THROWS(ops::radam_step(p, g, s, zeros({6}, {.dtype = DType::f64}), 1, {}), DTypeError,
                  "radam_step: exp_avg_sq has dtype float64 but param has float32");
}
