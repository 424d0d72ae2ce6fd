// RMSprop and Adagrad (optim/rmsprop.h, optim/adagrad.h): the kernels against a per-operation
// reference (bit for bit, so a change in the order of operations shows), master weights,
// state_dict and error paths. Parity with PyTorch itself: test_optim_parity.cpp (fixture).
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

/// torch.optim.RMSprop's single-tensor step (PyTorch 1.13) written out one operation per
/// statement in compute type C, each rounded once: what the kernels must give bit for bit.
template <class C>
void rmsprop_reference(std::vector<C>& p, const std::vector<C>& g, std::vector<C>& sq,
                       std::vector<C>& ga, std::vector<C>& buf, const RmspropHyper& h) {
  const C alpha = static_cast<C>(h.alpha), oma = static_cast<C>(1.0 - h.alpha);
  const C wd = static_cast<C>(h.weight_decay), mom = static_cast<C>(h.momentum);
  const C eps = static_cast<C>(h.eps), neg_lr = static_cast<C>(-h.lr);
  for (size_t i = 0; i < p.size(); ++i) {
    C gi = h.maximize ? -g[i] : g[i];
    if (h.weight_decay != 0.0) gi = gi + p[i] * wd;  // grad.add(param, alpha=wd)
    sq[i] = sq[i] * alpha + (gi * oma) * gi;         // mul_(alpha).addcmul_(g, g, 1 - alpha)
    C avg;
    if (h.centered) {
      ga[i] = ga[i] * alpha + gi * oma;  // grad_avg.mul_(alpha).add_(g, alpha=1 - alpha)
      C var = sq[i] - ga[i] * ga[i];     // square_avg.addcmul(grad_avg, grad_avg, value=-1)
      avg = std::sqrt(var) + eps;
    } else {
      avg = std::sqrt(sq[i]) + eps;
    }
    if (h.momentum > 0.0) {
      buf[i] = buf[i] * mom + gi / avg;  // buf.mul_(momentum).addcdiv_(grad, avg)
      p[i] = p[i] + buf[i] * neg_lr;     // param.add_(buf, alpha=-lr)
    } else {
      C num = gi * neg_lr;  // param.addcdiv_(grad, avg, value=-lr)
      p[i] = p[i] + num / avg;
    }
  }
}

/// torch.optim.Adagrad's single-tensor dense step, as rmsprop_reference.
template <class C>
void adagrad_reference(std::vector<C>& p, const std::vector<C>& g, std::vector<C>& sum,
                       int64_t step, const AdagradHyper& h) {
  const double clr = h.lr / (1 + static_cast<double>(step - 1) * h.lr_decay);  // Python floats
  const C wd = static_cast<C>(h.weight_decay), eps = static_cast<C>(h.eps);
  const C neg_clr = static_cast<C>(-clr);
  for (size_t i = 0; i < p.size(); ++i) {
    C gi = h.maximize ? -g[i] : g[i];
    if (h.weight_decay != 0.0) gi = gi + p[i] * wd;
    sum[i] = sum[i] + gi * gi;  // state_sum.addcmul_(grad, grad, value=1)
    C std_ = std::sqrt(sum[i]) + eps;
    C num = gi * neg_clr;  // param.addcdiv_(grad, std, value=-clr)
    p[i] = p[i] + num / std_;
  }
}

template <class C>
DType dtype_of() {
  return std::is_same_v<C, double> ? DType::f64 : DType::f32;
}

// Gradients over many magnitudes (so a root that is not correctly rounded, or an operation in
// another order, shows somewhere), 2500 elements (chunks of 1024 with a tail), 4 steps.
template <class C>
void check_rmsprop_bits(const RmspropHyper& h) {
  const int64_t n = 2500;
  Generator gen(17);
  TensorOptions o{.dtype = dtype_of<C>()};
  Tensor p = randn({n}, o, &gen);
  Tensor sq = zeros({n}, o), ga = zeros({n}, o), buf = zeros({n}, o);
  std::vector<C> rp = p.to_vector<C>(), rsq(n, 0), rga(n, 0), rbuf(n, 0);
  for (int s = 1; s <= 4; ++s) {
    Tensor g = (randn({n}, o, &gen) * exp(randn({n}, o, &gen) * 3.0)).contiguous();
    ops::rmsprop_step(p, g, sq, h.centered ? ga : Tensor(), h.momentum > 0 ? buf : Tensor(), h);
    rmsprop_reference(rp, g.to_vector<C>(), rsq, rga, rbuf, h);
  }
  CHECK(p.to_vector<C>() == rp);
  CHECK(sq.to_vector<C>() == rsq);
  if (h.centered) CHECK(ga.to_vector<C>() == rga);
  if (h.momentum > 0) CHECK(buf.to_vector<C>() == rbuf);
}

template <class C>
void check_adagrad_bits(const AdagradHyper& h) {
  const int64_t n = 2500;
  Generator gen(18);
  TensorOptions o{.dtype = dtype_of<C>()};
  Tensor p = randn({n}, o, &gen);
  Tensor sum = full({n}, h.initial_accumulator_value, o);
  std::vector<C> rp = p.to_vector<C>(), rsum = sum.to_vector<C>();
  for (int64_t s = 1; s <= 4; ++s) {
    Tensor g = (randn({n}, o, &gen) * exp(randn({n}, o, &gen) * 3.0)).contiguous();
    ops::adagrad_step(p, g, sum, s, h);
    adagrad_reference(rp, g.to_vector<C>(), rsum, s, h);
  }
  CHECK(p.to_vector<C>() == rp);
  CHECK(sum.to_vector<C>() == rsum);
}

}  // namespace

TEST_CASE("rmsprop_step kernel equals the per-operation reference bit for bit (f32, f64)") {
  for (int variant = 0; variant < 6; ++variant) {
    CAPTURE(variant);
    RmspropHyper h{.lr = 0.01,
                   .alpha = variant % 2 ? 0.9 : 0.99,
                   .eps = variant >= 4 ? 0.1 : 1e-8,
                   .weight_decay = variant == 1 || variant == 4 ? 0.05 : 0.0,
                   .momentum = variant == 2 || variant == 3 || variant == 5 ? 0.9 : 0.0,
                   .centered = variant == 3 || variant == 4 || variant == 5,
                   .maximize = variant == 5};
    check_rmsprop_bits<float>(h);
    check_rmsprop_bits<double>(h);
  }
}

TEST_CASE("adagrad_step kernel equals the per-operation reference bit for bit (f32, f64)") {
  for (int variant = 0; variant < 4; ++variant) {
    CAPTURE(variant);
    AdagradHyper h{.lr = 0.05,
                   .lr_decay = variant == 1 || variant == 3 ? 0.3 : 0.0,
                   .weight_decay = variant == 2 ? 0.05 : 0.0,
                   .initial_accumulator_value = variant >= 2 ? 0.25 : 0.0,
                   .eps = variant == 3 ? 1e-3 : 1e-10,
                   .maximize = variant == 3};
    check_adagrad_bits<float>(h);
    check_adagrad_bits<double>(h);
  }
}

TEST_CASE("RMSprop and Adagrad defaults are PyTorch 1.13's") {
  RMSpropOptions r;
  CHECK(r.lr == 1e-2);
  CHECK(r.alpha == 0.99);
  CHECK(r.eps == 1e-8);
  CHECK(r.weight_decay == 0.0);
  CHECK(r.momentum == 0.0);
  CHECK(!r.centered);
  CHECK(!r.maximize);
  AdagradOptions a;
  CHECK(a.lr == 1e-2);
  CHECK(a.lr_decay == 0.0);
  CHECK(a.weight_decay == 0.0);
  CHECK(a.initial_accumulator_value == 0.0);
  CHECK(a.eps == 1e-10);
  CHECK(!a.maximize);
}

TEST_CASE("RMSprop/Adagrad state: which tensors, lazily, with PyTorch's keys") {
  TensorList ps = make_params();
  RMSprop plain(ps);
  RMSprop full_opt(make_params(), {.momentum = 0.5, .centered = true});
  Adagrad ada(make_params(), {.initial_accumulator_value = 0.3});
  CHECK(plain.state_tensors(0) == 1);
  CHECK(full_opt.state_tensors(0) == 3);
  CHECK(ada.state_tensors(0) == 1);
  CHECK(ada.state_dict().tensors.size() == 0);  // nothing before the first step
  for (Optimizer* o : std::initializer_list<Optimizer*>{&plain, &full_opt, &ada}) {
    set_seeded_grads(o->params(0), 1);
    o->step();
  }
  Section a = plain.state_dict(), b = full_opt.state_dict(), c = ada.state_dict();
  CHECK(a.tensors.contains("state.1.square_avg"));
  CHECK(!a.tensors.contains("state.1.momentum_buffer"));
  CHECK(!a.tensors.contains("state.1.grad_avg"));
  CHECK(b.tensors.contains("state.0.square_avg"));
  CHECK(b.tensors.contains("state.0.grad_avg"));
  CHECK(b.tensors.contains("state.0.momentum_buffer"));
  CHECK(c.tensors.contains("state.1.sum"));
  CHECK(c.tensors.size() == 2);
  CHECK(b.meta.at("optimizer").as_string() == "RMSprop");
  CHECK(b.meta.at("param_groups")[0].at("centered").as_bool());
  CHECK(c.meta.at("param_groups")[0].at("initial_accumulator_value").as_double() == 0.3);
  CHECK(c.meta.at("state").at("0").at("step").as_int() == 1);
  // the sum started at initial_accumulator_value: sum = 0.3 + g^2 (f32)
  const Tensor& g = ada.params(0)[0].grad();
  CHECK(bits_equal(ada.state(0, 0).sum, (g * g + 0.3f).detach()));
}

TEST_CASE("Adagrad and RMSprop state_dict: hyperparameters restored, another optimizer's refused") {
  // hyperparameters are restored from the state (as PyTorch): a fresh default optimizer
  // continues with the saved ones
  TensorList p = make_params();
  Adagrad a(p, {.lr = 0.1, .lr_decay = 0.2, .weight_decay = 0.01, .eps = 1e-6, .maximize = true});
  set_seeded_grads(p, 1);
  a.step();
  Adagrad b(make_params());
  b.load_state_dict(through_file(a.state_dict()));
  CHECK(b.options(0).lr_decay == 0.2);
  CHECK(b.options(0).eps == 1e-6);
  CHECK(b.options(0).maximize);
  RMSprop r(make_params(), {.alpha = 0.8, .centered = true});
  SL_CHECK_THROWS(r.load_state_dict(a.state_dict()), ValueError,
                  "saved state is for Adagrad, not RMSprop");
}

TEST_CASE("RMSprop and Adagrad with bf16 parameters and master weights run the f32 math") {
  auto run = [](auto make_opt) { sl::testing::check_master_weights_run_f32_math(4, make_opt); };
  run([](TensorList& ps, bool mw) {
    return std::make_unique<RMSprop>(ps, RMSpropOptions{.lr = 0.01,
                                                        .weight_decay = 0.01,
                                                        .momentum = 0.9,
                                                        .centered = true,
                                                        .master_weights = mw});
  });
  run([](TensorList& ps, bool mw) {
    return std::make_unique<Adagrad>(
        ps,
        AdagradOptions{
            .lr = 0.05, .lr_decay = 0.1, .initial_accumulator_value = 0.1, .master_weights = mw});
  });
}

TEST_CASE("RMSprop and Adagrad error paths: hyperparameters and kernel operands") {
  TensorList ps = make_params();
  SL_CHECK_THROWS(RMSprop(ps, {.lr = -0.1}), ValueError, "RMSprop: invalid learning rate -0.1");
  SL_CHECK_THROWS(RMSprop(ps, {.eps = -1e-8}), ValueError, "RMSprop: invalid epsilon value -1e-08");
  SL_CHECK_THROWS(RMSprop(ps, {.momentum = -0.9}), ValueError,
                  "RMSprop: invalid momentum value -0.9");
  SL_CHECK_THROWS(RMSprop(ps, {.weight_decay = NAN}), ValueError,
                  "RMSprop: invalid weight_decay value nan");
  SL_CHECK_THROWS(RMSprop(ps, {.alpha = -0.5}), ValueError, "RMSprop: invalid alpha value -0.5");
  SL_CHECK_THROWS(Adagrad(ps, {.lr = INFINITY}), ValueError, "Adagrad: invalid learning rate inf");
  SL_CHECK_THROWS(Adagrad(ps, {.lr_decay = -1}), ValueError, "Adagrad: invalid lr_decay value -1");
  SL_CHECK_THROWS(Adagrad(ps, {.weight_decay = -1}), ValueError,
                  "Adagrad: invalid weight_decay value -1");
  SL_CHECK_THROWS(Adagrad(ps, {.initial_accumulator_value = -0.1}), ValueError,
                  "Adagrad: invalid initial_accumulator_value value -0.1");
  SL_CHECK_THROWS(Adagrad(ps, {.eps = -1}), ValueError, "Adagrad: invalid epsilon value -1");
  SL_CHECK_THROWS(RMSprop({zeros({2}, {.dtype = DType::i64})}), DTypeError, "floating");
  SL_CHECK_THROWS(Adagrad({ps[0], ps[0]}), ValueError, "Adagrad: parameter 1 appears twice");

  RMSprop r(ps);
  Adagrad a(make_params());
  r.options(0).alpha = -1;  // made invalid after construction: step() checks again
  a.options(0).lr_decay = NAN;
  set_seeded_grads(ps, 1);
  set_seeded_grads(a.params(0), 1);
  SL_CHECK_THROWS(r.step(), ValueError, "RMSprop: invalid alpha value -1");
  SL_CHECK_THROWS(a.step(), ValueError, "Adagrad: invalid lr_decay value nan");
  CHECK(r.state(0, 0).empty());
  SL_CHECK_THROWS(a.set_momentum(0, 0.9), ValueError, "Adagrad: has no momentum to set");
  CHECK(a.momentum(0) == 0.0);
  SL_CHECK_THROWS(r.options(1), IndexError, "RMSprop: group 1 out of range");

  Tensor p = zeros({6}), g = zeros({6}), s = zeros({6});
  SL_CHECK_THROWS(ops::rmsprop_step(p, g, s, Tensor(), Tensor(), {.centered = true}), ValueError,
                  "rmsprop_step: grad_avg is an undefined tensor");
  SL_CHECK_THROWS(ops::rmsprop_step(p, g, s, Tensor(), Tensor(), {.momentum = 0.5}), ValueError,
                  "rmsprop_step: momentum_buf is an undefined tensor");
  SL_CHECK_THROWS(ops::rmsprop_step(p, g, zeros({5}), Tensor(), Tensor(), {}), ShapeError,
                  "rmsprop_step: square_avg has 5 elements but param has 6");
  SL_CHECK_THROWS(ops::rmsprop_step(p, g.to(DType::f64), s, Tensor(), Tensor(), {}), DTypeError,
                  "rmsprop_step: grad of dtype float64 does not fit a param of dtype float32");
  SL_CHECK_THROWS(ops::adagrad_step(p, g, s, 0, {}), ValueError, "adagrad_step: step must be >= 1");
  SL_CHECK_THROWS(ops::adagrad_step(p, g, zeros({6}, {.dtype = DType::f64}), 1, {}), DTypeError,
                  "adagrad_step: sum has dtype float64 but param has float32");
  SL_CHECK_THROWS(ops::adagrad_step(p, g, Tensor(), 1, {}), ValueError,
                  "adagrad_step: sum is an undefined tensor");
}
