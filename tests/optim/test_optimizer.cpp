// Optimizer classes: parameter groups, zero_grad, skipped parameters, master weights,
// state_dict / load_state_dict (also for schedulers), and error paths.
#include <cstring>

#include "optim_testing.h"

using namespace sl;
using sl::testing::bits_equal;
using sl::testing::set_seeded_grads;
using sl::testing::through_file;
using namespace sl::optim;
using serialize::Json;
using serialize::Section;

namespace {

TensorList make_params(DType dt = DType::f32) {
  Generator g(1);
  return {randn({3, 4}, {.dtype = dt}, &g).requires_grad_(true),
          randn({4}, {.dtype = dt}, &g).requires_grad_(true)};
}

}  // namespace

TEST_CASE("parameter groups: weight decay only on weights, per-group lr") {
  std::vector<std::pair<std::string, Tensor>> named{{"encoder.weight", zeros({2, 2})},
                                                    {"encoder.bias", zeros({2})},
                                                    {"encoder.LayerNorm.weight", zeros({2})},
                                                    {"head.weight", zeros({3, 2})}};
  auto [decay, no_decay] = split_no_decay(named);
  REQUIRE(decay.size() == 2);
  REQUIRE(no_decay.size() == 2);
  CHECK(decay[0].is_same(named[0].second));
  CHECK(decay[1].is_same(named[3].second));

  TensorList w = {ones({2, 2}).requires_grad_(true)}, b = {ones({2}).requires_grad_(true)};
  AdamW opt({{w, {.lr = 0.1, .weight_decay = 0.5}}, {b, {.lr = 0.1, .weight_decay = 0.0}}});
  w[0].set_grad(zeros({2, 2}));
  b[0].set_grad(zeros({2}));
  opt.step();
  // zero gradients: only decoupled decay moves the parameters, and only in group 0
  CHECK(w[0].detach().to_vector<float>() == std::vector<float>(4, 1.0f - 0.1f * 0.5f));
  CHECK(b[0].detach().to_vector<float>() == std::vector<float>(2, 1.0f));
  CHECK(opt.num_param_groups() == 2);
  CHECK(opt.num_params() == 2);
  CHECK(opt.options(0).weight_decay == 0.5);
}

TEST_CASE("zero_grad, parameters without gradients, and lazy state") {
  TensorList ps = make_params();
  SGD opt(ps, {.lr = 0.1, .momentum = 0.9});
  Tensor before = ps[1].detach().clone();
  ps[0].set_grad(ones({3, 4}));  // ps[1] has no gradient: skipped, no state
  opt.step();
  CHECK(opt.state(0, 0).step == 1);
  CHECK(opt.state(0, 0).momentum_buffer.defined());
  CHECK(opt.state(0, 1).empty());
  CHECK(bits_equal(ps[1], before));
  opt.zero_grad(false);
  REQUIRE(ps[0].grad().defined());
  CHECK(ps[0].grad().sum().item<float>() == 0.f);
  opt.zero_grad();  // set_to_none
  CHECK(!ps[0].grad().defined());
  CHECK(opt.find_state(ps[0]) == &opt.state(0, 0));
  CHECK(opt.find_state(zeros({1})) == nullptr);
}

TEST_CASE("non-contiguous parameters are updated like contiguous ones") {
  Generator g(4);
  Tensor base = randn({4, 3}, {}, &g);
  Tensor a = base.clone().requires_grad_(true);  // contiguous [4, 3]
  Tensor storage = base.t().contiguous();        // [3, 4] holding base transposed
  Tensor b = storage.t();                        // a non-contiguous [4, 3] view
  REQUIRE(!b.is_contiguous());
  Tensor grad = randn({4, 3}, {}, &g);
  a.set_grad(grad);
  b.set_grad(grad);
  Adam oa({a}, {.lr = 0.1}), ob({b}, {.lr = 0.1});
  oa.step();
  ob.step();
  CHECK(bits_equal(a, b.contiguous()));
  CHECK(bits_equal(storage.t().contiguous(), a));  // written back into the viewed storage
}

TEST_CASE("master weights: bf16 parameters follow an fp32 run exactly in their master copy") {
  TensorList p32 = make_params();
  TensorList p16 = {p32[0].detach().to(DType::bf16).requires_grad_(true),
                    p32[1].detach().to(DType::bf16).requires_grad_(true)};
  // the fp32 run starts from the bf16-rounded values, so both runs see the same numbers
  p32 = {p16[0].detach().to(DType::f32).requires_grad_(true),
         p16[1].detach().to(DType::f32).requires_grad_(true)};
  AdamW o32(p32, {.lr = 0.01});
  AdamW o16(p16, {.lr = 0.01, .master_weights = true});
  for (int s = 1; s <= 3; ++s) {
    set_seeded_grads(p16, s);  // bf16 gradients
    for (size_t k = 0; k < 2; ++k) p32[k].set_grad(p16[k].grad().to(DType::f32));
    o32.step();
    o16.step();
  }
  for (size_t k = 0; k < 2; ++k) {
    const ParamState& st = o16.state(0, k);
    REQUIRE(st.master.defined());
    CHECK(st.master.dtype() == DType::f32);
    CHECK(st.exp_avg.dtype() == DType::f32);
    CHECK(bits_equal(st.master, p32[k]));                        // exact fp32 trajectory
    CHECK(bits_equal(p16[k], p32[k].detach().to(DType::bf16)));  // params are its rounding
  }
  // state_dict keeps the master copy, and loading restores fp32 state for the bf16 params
  AdamW o16b(p16, {.lr = 0.01, .master_weights = true});
  o16b.load_state_dict(through_file(o16.state_dict()));
  CHECK(o16b.state(0, 0).exp_avg.dtype() == DType::f32);
  CHECK(bits_equal(o16b.state(0, 0).master, o16.state(0, 0).master));
}

TEST_CASE(
    "optimizer state_dict round trip continues bit for bit (SGD, Adam, AdamW, RMSprop, "
    "Adagrad, Adamax, NAdam, RAdam)") {
  auto run = [](auto make_opt) {
    TensorList ref = make_params(), p = make_params();
    auto ref_opt = make_opt(ref);
    for (int s = 1; s <= 5; ++s) {
      set_seeded_grads(ref, s);
      ref_opt->step();
    }
    auto opt = make_opt(p);
    for (int s = 1; s <= 3; ++s) {
      set_seeded_grads(p, s);
      opt->step();
    }
    Section saved = through_file(opt->state_dict());
    TensorList q = {p[0].detach().clone().requires_grad_(true),
                    p[1].detach().clone().requires_grad_(true)};
    auto resumed = make_opt(q);
    resumed->load_state_dict(saved);
    for (int s = 4; s <= 5; ++s) {
      set_seeded_grads(q, s);
      resumed->step();
    }
    CHECK(bits_equal(q[0], ref[0]));
    CHECK(bits_equal(q[1], ref[1]));
    CHECK(resumed->find_state(q[1])->step == 5);
  };
  run([](TensorList& ps) {
    return std::make_unique<SGD>(ps, SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  });
  run([](TensorList& ps) {
    return std::make_unique<Adam>(ps, AdamOptions{.lr = 0.01, .amsgrad = true});
  });
  run([](TensorList& ps) {
    return std::make_unique<AdamW>(std::vector<ParamGroup<AdamWOptions>>{
        {{ps[0]}, {.lr = 0.01}}, {{ps[1]}, {.lr = 0.02, .weight_decay = 0}}});
  });
  run([](TensorList& ps) {
    return std::make_unique<RMSprop>(ps,
                                     RMSpropOptions{.lr = 0.01, .momentum = 0.9, .centered = true});
  });
  run([](TensorList& ps) {
    return std::make_unique<RMSprop>(std::vector<ParamGroup<RMSpropOptions>>{
        {{ps[0]}, {.lr = 0.01, .weight_decay = 0.1}}, {{ps[1]}, {.lr = 0.02, .momentum = 0.5}}});
  });
  run([](TensorList& ps) {
    return std::make_unique<Adagrad>(
        ps, AdagradOptions{.lr = 0.1, .lr_decay = 0.2, .initial_accumulator_value = 0.1});
  });
  run([](TensorList& ps) {
    return std::make_unique<Adamax>(ps, AdamaxOptions{.lr = 0.01, .weight_decay = 0.1});
  });
  run([](TensorList& ps) {  // the resumed steps need the saved mu_product
    return std::make_unique<NAdam>(std::vector<ParamGroup<NAdamOptions>>{
        {{ps[0]}, {.lr = 0.01, .momentum_decay = 0.2}}, {{ps[1]}, {.lr = 0.02}}});
  });
  run([](TensorList& ps) {  // beta2 0.5 and 0.9: rho_t <= 5 in the 5 steps (rectified: the fixture)
    return std::make_unique<RAdam>(std::vector<ParamGroup<RAdamOptions>>{
        {{ps[0]}, {.lr = 0.01, .beta2 = 0.5}}, {{ps[1]}, {.lr = 0.02, .beta2 = 0.9}}});
  });
}

TEST_CASE("optimizer state_dict: layout and hyperparameters restored") {
  TensorList ps = make_params();
  AdamW opt(ps, {.lr = 0.01, .beta1 = 0.8, .amsgrad = true});
  set_seeded_grads(ps, 1);
  opt.step();
  Section s = opt.state_dict();
  CHECK(s.meta.at("optimizer").as_string() == "AdamW");
  CHECK(s.meta.at("param_groups")[0].at("params").dump() == "[0,1]");
  CHECK(s.meta.at("param_groups")[0].at("betas").dump() == "[0.8,0.999]");
  CHECK(s.meta.at("state").at("1").at("step").as_int() == 1);
  CHECK(s.tensors.keys() == std::vector<std::string>{
                                "state.0.exp_avg", "state.0.exp_avg_sq", "state.0.max_exp_avg_sq",
                                "state.1.exp_avg", "state.1.exp_avg_sq", "state.1.max_exp_avg_sq"});
  TensorList qs = make_params();
  AdamW other(qs, {.lr = 0.5});
  other.load_state_dict(s);
  CHECK(other.lr(0) == 0.01);  // hyperparameters come from the saved groups, as in PyTorch
  CHECK(other.momentum(0) == 0.8);
  CHECK(other.options(0).amsgrad);
}

namespace {

/// The saved groups of `s` with group 0's `key` set to `value` (absent: removed).
Section with_group_key(const Section& s, const std::string& key, const Json* value) {
  Section out = s;
  Json group = Json::object();
  for (const Json::Member& m : s.meta.at("param_groups")[0].members()) {
    if (m.first != key) group.set(m.first, m.second);
  }
  if (value) group.set(key, *value);
  Json groups = s.meta.at("param_groups");
  groups.items()[0] = group;
  out.meta.set("param_groups", groups);
  return out;
}

/// `opt`'s saved group round-trips through `fresh` (every key), and `fresh` refuses a saved group
/// whose lr is negative or that lacks `key`, unchanged after; without master_weights (older
/// checkpoints) the group loads with it off.
void check_saved_groups(Optimizer& opt, Optimizer& fresh, const std::string& key) {
  const Section s = through_file(opt.state_dict());
  fresh.load_state_dict(s);
  CHECK(fresh.state_dict().meta.at("param_groups").dump() == s.meta.at("param_groups").dump());
  const double lr = fresh.lr(0);
  const Json negative = -1.0;
  SL_CHECK_THROWS(
      fresh.load_state_dict(with_group_key(s, "lr", &negative)), ValueError,
      (std::string(fresh.name()) + ".load_state_dict: invalid learning rate -1").c_str());
  SL_CHECK_THROWS(fresh.load_state_dict(with_group_key(s, key, nullptr)), ValueError,
                  ("json: missing key '" + key + "'").c_str());
  CHECK(fresh.lr(0) == lr);
  CHECK(fresh.master_weights(0));
  fresh.load_state_dict(with_group_key(s, "master_weights", nullptr));
  CHECK_FALSE(fresh.master_weights(0));
}

}  // namespace

TEST_CASE("saved param groups: every key round-trips, a malformed or invalid one is refused") {
  // every option away from its default, master weights on: what a fresh optimizer loads it saves
  // again key for key, PyTorch's keys in PyTorch's order
  TensorList ps = make_params();
  SGD sgd(ps, {.lr = 0.2,
               .momentum = 0.9,
               .dampening = 0.1,
               .weight_decay = 0.01,
               .maximize = true,
               .master_weights = true});
  SGD sgd_fresh(make_params(), {.lr = 0.5});
  check_saved_groups(sgd, sgd_fresh, "dampening");
  CHECK(sgd.state_dict().meta.at("param_groups")[0].dump() ==
        "{\"lr\":0.2,\"momentum\":0.9,\"dampening\":0.1,\"weight_decay\":0.01,\"nesterov\":"
        "false,\"maximize\":true,\"master_weights\":true,\"params\":[0,1]}");
  RMSprop rmsprop(make_params(), {.lr = 0.2,
                                  .alpha = 0.9,
                                  .eps = 1e-6,
                                  .weight_decay = 0.01,
                                  .momentum = 0.5,
                                  .centered = true,
                                  .maximize = true,
                                  .master_weights = true});
  RMSprop rmsprop_fresh(make_params());
  check_saved_groups(rmsprop, rmsprop_fresh, "centered");
  Adagrad adagrad(make_params(), {.lr = 0.2,
                                  .lr_decay = 0.1,
                                  .weight_decay = 0.01,
                                  .initial_accumulator_value = 0.3,
                                  .eps = 1e-6,
                                  .maximize = true,
                                  .master_weights = true});
  Adagrad adagrad_fresh(make_params());
  check_saved_groups(adagrad, adagrad_fresh, "initial_accumulator_value");
  Adam adam(make_params(), {.lr = 0.2,
                            .beta1 = 0.8,
                            .beta2 = 0.9,
                            .eps = 1e-6,
                            .weight_decay = 0.01,
                            .amsgrad = true,
                            .maximize = true,
                            .master_weights = true});
  Adam adam_fresh(make_params());
  check_saved_groups(adam, adam_fresh, "betas");
  CHECK(adam.state_dict().meta.at("param_groups")[0].dump() ==
        "{\"lr\":0.2,\"betas\":[0.8,0.9],\"eps\":1e-06,\"weight_decay\":0.01,\"amsgrad\":true,"
        "\"maximize\":true,\"master_weights\":true,\"params\":[0,1]}");
  const Json one_beta = Json::array({0.9});
  SL_CHECK_THROWS(adam_fresh.load_state_dict(with_group_key(adam.state_dict(), "betas", &one_beta)),
                  ValueError, "Adam.load_state_dict: betas must have 2 entries, got 1");
}

TEST_CASE("optimizer load_state_dict refuses state that does not fit") {
  TensorList ps = make_params();
  AdamW opt(ps);
  set_seeded_grads(ps, 1);
  opt.step();
  Section s = opt.state_dict();

  TensorList qs = make_params();
  Adam adam(qs);
  SL_CHECK_THROWS(adam.load_state_dict(s), ValueError,
                  "Adam.load_state_dict: saved state is for "
                  "AdamW, not Adam");
  AdamW one({qs[0]});
  SL_CHECK_THROWS(one.load_state_dict(s), ValueError,
                  "group 0 of the saved state has 2 parameters, this optimizer's has 1");
  AdamW two({{{qs[0]}, {}}, {{qs[1]}, {}}});
  SL_CHECK_THROWS(two.load_state_dict(s), ValueError,
                  "saved state has 1 parameter groups, this optimizer has 2");
  TensorList wrong = {zeros({4, 3}).requires_grad_(true), zeros({4}).requires_grad_(true)};
  AdamW shapes(wrong);
  SL_CHECK_THROWS(shapes.load_state_dict(s), ShapeError,
                  "state 'exp_avg' of parameter 0 has shape [3, 4], the parameter has [4, 3]");
  Section bad = s;
  bad.meta.set("state", Json::object({{"7", Json::object({{"step", 1}})}}));
  AdamW ok(qs);
  SL_CHECK_THROWS(ok.load_state_dict(bad), ValueError, "state for parameter '7' but there are 2");
  SL_CHECK_THROWS(ok.load_state_dict(Section{}), ValueError, "holds no optimizer state");
  CHECK(ok.state(0, 0).empty());  // failed loads change nothing
  CHECK(ok.lr(0) == 1e-3);
}

TEST_CASE("optimizer constructor and step errors") {
  TensorList ps = make_params();
  SL_CHECK_THROWS(SGD(ps, {.lr = -0.1}), ValueError, "SGD: invalid learning rate -0.1");
  SL_CHECK_THROWS(SGD(ps, {.lr = 0.1, .nesterov = true}), ValueError,
                  "nesterov momentum requires a momentum > 0 and zero dampening");
  SL_CHECK_THROWS(Adam(ps, {.beta2 = 1.5}), ValueError, "Adam: invalid beta parameter at index 1");
  SL_CHECK_THROWS(AdamW(ps, {.eps = -1}), ValueError, "AdamW: invalid epsilon value -1");
  // PyTorch 1.13's messages and order: SGD lr, momentum, weight_decay; Adam and AdamW lr, eps,
  // betas, weight_decay (Lamb as Adam)
  SL_CHECK_THROWS(SGD(ps, {.lr = 0.1, .momentum = -0.9}), ValueError,
                  "SGD: invalid momentum value -0.9");
  SL_CHECK_THROWS(SGD(ps, {.lr = 0.1, .weight_decay = -1}), ValueError,
                  "SGD: invalid weight_decay value -1");
  SL_CHECK_THROWS(SGD(ps, {.lr = 0.1, .momentum = -1, .weight_decay = -1}), ValueError,
                  "SGD: invalid momentum value -1");
  SL_CHECK_THROWS(SGD(ps, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                  ValueError, "nesterov momentum requires a momentum > 0 and zero dampening");
  SL_CHECK_THROWS(Adam(ps, {.beta1 = 2, .weight_decay = -1}), ValueError,
                  "Adam: invalid beta parameter at index 0: 2");
  SL_CHECK_THROWS(AdamW(ps, {.beta2 = 1, .eps = -1}), ValueError,
                  "AdamW: invalid epsilon value -1");
  SL_CHECK_THROWS(AdamW(ps, {.beta2 = 1, .weight_decay = -0.5}), ValueError,
                  "AdamW: invalid beta parameter at index 1: 1");
  SL_CHECK_THROWS(Adam(ps, {.weight_decay = -0.5}), ValueError,
                  "Adam: invalid weight_decay value -0.5");
  SL_CHECK_THROWS(Lamb(ps, {.beta1 = -0.1, .weight_decay = -1}), ValueError,
                  "Lamb: invalid beta parameter at index 0: -0.1");
  // PyTorch's "optimizer got an empty parameter list"; a group without parameters is accepted
  SL_CHECK_THROWS(SGD(TensorList{}, {.lr = 0.1}), ValueError,
                  "SGD: optimizer got an empty parameter list");
  SL_CHECK_THROWS(Adam(TensorList{}), ValueError, "Adam: optimizer got an empty parameter list");
  SL_CHECK_THROWS(AdamW(std::vector<ParamGroup<AdamWOptions>>{}), ValueError,
                  "AdamW: optimizer got an empty parameter list");
  SL_CHECK_THROWS(Lamb(TensorList{}), ValueError, "Lamb: optimizer got an empty parameter list");
  SL_CHECK_THROWS(RMSprop(TensorList{}), ValueError,
                  "RMSprop: optimizer got an empty parameter list");
  SL_CHECK_THROWS(Adagrad(std::vector<ParamGroup<AdagradOptions>>{}), ValueError,
                  "Adagrad: optimizer got an empty parameter list");
  SL_CHECK_THROWS(Adamax(TensorList{}), ValueError,
                  "Adamax: optimizer got an empty parameter list");
  SL_CHECK_THROWS(NAdam(TensorList{}), ValueError, "NAdam: optimizer got an empty parameter list");
  SL_CHECK_THROWS(RAdam(std::vector<ParamGroup<RAdamOptions>>{}), ValueError,
                  "RAdam: optimizer got an empty parameter list");
  {
    Adam with_empty_group({{{ps[0]}, {}}, {{}, {.lr = 0.1}}});
    CHECK(with_empty_group.num_param_groups() == 2);
    CHECK(with_empty_group.params(1).empty());
    ps[0].set_grad(zeros({3, 4}));
    with_empty_group.step();
    CHECK(with_empty_group.state(0, 0).step == 1);
    ps[0].set_grad(Tensor());
  }
  SL_CHECK_THROWS(SGD({ps[0], ps[0]}, {.lr = 0.1}), ValueError,
                  "SGD: parameter 1 appears twice in group 0");
  SL_CHECK_THROWS(Adam({{{ps[0]}, {}}, {{ps[0]}, {}}}), ValueError,
                  "some parameters appear in more than one parameter group");
  SL_CHECK_THROWS(Adam({arange(3)}), DTypeError, "Adam: can only optimize floating tensors");
  SL_CHECK_THROWS(Adam({Tensor()}), ValueError, "Adam: parameter 0 of group 0 is undefined");
  // a non-leaf (PyTorch: "can't optimize a non-leaf Tensor"), in each optimizer and any group
  Tensor nonleaf = ps[1] * 2;
  SL_CHECK_THROWS(SGD({ps[0], nonleaf}, {.lr = 0.1}), ValueError,
                  "SGD: can't optimize a non-leaf tensor (parameter 1 of group 0 has grad_fn "
                  "MulBackward)");
  SL_CHECK_THROWS(Adam({nonleaf}), ValueError, "Adam: can't optimize a non-leaf tensor");
  SL_CHECK_THROWS(AdamW({{{ps[0]}, {}}, {{nonleaf}, {}}}), ValueError,
                  "AdamW: can't optimize a non-leaf tensor (parameter 0 of group 1");
  SL_CHECK_THROWS(Lamb({nonleaf}), ValueError, "Lamb: can't optimize a non-leaf tensor");
  // leaves pass, with or without requires_grad (a detached copy is a leaf), as in PyTorch
  CHECK_NOTHROW(SGD({nonleaf.detach(), zeros({2})}, {.lr = 0.1}));
  Adam opt(ps);
  SL_CHECK_THROWS(opt.state(1, 0), IndexError, "no parameter 0 in group 1");
  SL_CHECK_THROWS(opt.params(3), IndexError, "group 3 out of range");
  opt.set_lr(0, -1.0);
  ps[0].set_grad(zeros({3, 4}));
  SL_CHECK_THROWS(opt.step(), ValueError, "invalid learning rate -1");
}

TEST_CASE("SGD's lr is required, as torch.optim.SGD's lr=required") {
  // PyTorch 1.13: torch.optim.SGD(params) and a group without lr raise ValueError "parameter
  // group didn't specify a value of required optimization parameter lr".
  TensorList ps = make_params();
  const char* missing = "SGD: lr must be given (torch.optim.SGD's lr is required";
  SL_CHECK_THROWS(SGD(ps, {}), ValueError, missing);
  SL_CHECK_THROWS(SGD(ps, {.momentum = 0.9, .weight_decay = 0.01}), ValueError, missing);
  SL_CHECK_THROWS(SGD({{{ps[0]}, {.lr = 0.1}}, {{ps[1]}, {.momentum = 0.9}}}), ValueError, missing);
  SL_CHECK_THROWS(SGDOptions{}.hyper(), ValueError, missing);
  // lr 0 is given (PyTorch accepts it too)
  SGD zero(ps, {.lr = 0.0});
  CHECK(zero.lr(0) == 0.0);
  SGD opt({ps[0]}, {.lr = 0.1, .momentum = 0.9});
  CHECK(opt.lr(0) == 0.1);
  // a later group without lr: refused, the optimizer unchanged
  SL_CHECK_THROWS(opt.add_param_group({{ps[1]}, {}}), ValueError, missing);
  CHECK(opt.num_param_groups() == 1);
  CHECK(opt.num_params() == 1);
  // an lr taken away after construction: step, lr() and a saved group refuse it
  ps[0].set_grad(ones({3, 4}));
  const Tensor before = ps[0].detach().clone();
  opt.options(0).lr.reset();
  SL_CHECK_THROWS(opt.step(), ValueError, missing);
  CHECK(bits_equal(ps[0], before));  // refused before any change
  CHECK(opt.state(0, 0).empty());
  SL_CHECK_THROWS(opt.lr(0), ValueError, missing);
  const Section saved = opt.state_dict();  // lr saved as null: no other optimizer loads it
  CHECK(saved.meta.at("param_groups")[0].at("lr").is_null());
  SGD other({make_params()[0]}, {.lr = 0.5});
  CHECK_THROWS_AS(other.load_state_dict(saved), ValueError);
  CHECK(other.lr(0) == 0.5);
  opt.set_lr(0, 0.2);  // given again (as a scheduler would): steps
  opt.step();
  CHECK(opt.lr(0) == 0.2);
  CHECK(opt.state(0, 0).step == 1);
  ps[0].set_grad(Tensor());
}

TEST_CASE("ReduceLROnPlateau: errors, min_lr floor, and its state through JSON") {
  TensorList ps = make_params();
  SGD opt(ps, {.lr = 0.1});
  SL_CHECK_THROWS(ReduceLROnPlateau(opt, {.factor = 1.0}), ValueError,
                  "ReduceLROnPlateau: factor must be in [0, 1), got 1");
  SL_CHECK_THROWS(ReduceLROnPlateau(opt, {.factor = -0.5}), ValueError, "got -0.5");
  SL_CHECK_THROWS(ReduceLROnPlateau(opt, {.patience = -1}), ValueError,
                  "patience must be >= 0, got -1");
  SL_CHECK_THROWS(ReduceLROnPlateau(opt, {.cooldown = -2}), ValueError,
                  "cooldown must be >= 0, got -2");
  SL_CHECK_THROWS(ReduceLROnPlateau(opt, {.min_lrs = {0.0, 0.1}}), ValueError,
                  "expected 1 or 1 min_lrs (one per parameter group), got 2");
  SL_CHECK_THROWS(ReduceLROnPlateau(opt, {.min_lrs = {-1.0}}), ValueError,
                  "min_lrs must be >= 0, got -1");

  // patience 0, factor 0.5, floor 0.03: 0.1 -> 0.05 -> 0.03 (clamped) -> unchanged.
  ReduceLROnPlateau sched(opt, {.factor = 0.5, .patience = 0, .min_lrs = {0.03}});
  CHECK(sched.last_lr() == std::vector<double>{0.1});
  CHECK(sched.best() == INFINITY);
  CHECK_FALSE(sched.step(1.0));  // the first metric is always an improvement
  CHECK(sched.step(1.0));
  CHECK(opt.lr(0) == 0.05);
  CHECK(sched.step(2.0));
  CHECK(opt.lr(0) == 0.03);
  CHECK_FALSE(sched.step(3.0));
  CHECK(opt.lr(0) == 0.03);
  CHECK(sched.best() == 1.0);

  // The state survives JSON text; a fresh scheduler's null best reads back as +inf.
  Section saved = sched.state_dict();
  ReduceLROnPlateau again(opt, {.factor = 0.5, .patience = 0, .min_lrs = {0.03}});
  again.load_state_dict(Section{{}, Json::parse(saved.meta.dump())});
  CHECK(again.best() == 1.0);
  CHECK(again.last_epoch() == 4);
  ReduceLROnPlateau fresh(opt, {.factor = 0.5, .patience = 0, .min_lrs = {0.03}});
  CHECK(fresh.state_dict().meta.at("best").is_null());
  again.load_state_dict(Section{{}, Json::parse(fresh.state_dict().meta.dump())});
  CHECK(again.best() == INFINITY);

  ReduceLROnPlateau other(opt, {.factor = 0.5, .patience = 3, .min_lrs = {0.03}});
  SL_CHECK_THROWS(other.load_state_dict(saved), ValueError,
                  "saved with patience = 0, this scheduler has 3");
  ReduceLROnPlateau maxi(opt, {.maximize = true, .factor = 0.5, .patience = 0, .min_lrs = {0.03}});
  SL_CHECK_THROWS(maxi.load_state_dict(saved), ValueError,
                  "saved with mode = \"min\", this scheduler has \"max\"");
  StepLR step(opt, 3);
  SL_CHECK_THROWS(sched.load_state_dict(step.state_dict()), ValueError,
                  "saved state is for StepLR, not ReduceLROnPlateau");
}

// PyTorch keeps each group's initial_lr in the optimizer's param_groups: a scheduler created on
// a restored optimizer starts from it (here 0.1), not from the lr the warmup left (0 at step 0).
TEST_CASE("initial_lr travels with the optimizer's state_dict") {
  SGD opt(make_params(), {.lr = 0.1});
  CHECK_FALSE(opt.initial_lr(0).has_value());
  CHECK_FALSE(opt.state_dict().meta.at("param_groups")[0].contains("initial_lr"));
  LinearWarmupLR warm(opt, 3, 10);
  CHECK(opt.lr(0) == 0.0);
  CHECK(opt.initial_lr(0) == 0.1);
  Section saved{{}, Json::parse(opt.state_dict().meta.dump())};
  CHECK(saved.meta.at("param_groups")[0].at("initial_lr").as_double() == 0.1);

  SGD fresh(make_params(), {.lr = 0.5});
  fresh.load_state_dict(saved);
  CHECK(fresh.lr(0) == 0.0);
  CosineAnnealingLR cos(fresh, 5);
  CHECK(cos.base_lrs() == std::vector<double>{0.1});
  // A state saved before any scheduler existed unsets it again, as loading PyTorch's does.
  SGD plain(make_params(), {.lr = 0.1});
  fresh.load_state_dict(plain.state_dict());
  CHECK_FALSE(fresh.initial_lr(0).has_value());
  for (auto& [key, value] : saved.meta.members()) {
    if (key == "param_groups") value.items()[0].set("initial_lr", Json("high"));
  }
  SL_CHECK_THROWS(fresh.load_state_dict(saved), ValueError,
                  "SGD.load_state_dict: group 0's initial_lr is not a number");
  CHECK_FALSE(fresh.initial_lr(0).has_value());  // unchanged by the failed load
  SL_CHECK_THROWS(fresh.initial_lr(1), IndexError, "group 1 out of range");
}

TEST_CASE("scheduler state_dict round trip and errors") {
  TensorList ps = make_params();
  SGD opt(ps, {.lr = 0.1, .momentum = 0.9});
  OneCycleLR sched(opt, {0.5}, {.total_steps = 10});
  for (int i = 0; i < 4; ++i) sched.step();
  Section s = sched.state_dict();
  CHECK(s.meta.at("scheduler").as_string() == "OneCycleLR");
  CHECK(s.meta.at("last_epoch").as_int() == 4);

  SGD opt2(make_params(), {.lr = 0.1, .momentum = 0.9});
  OneCycleLR resumed(opt2, {0.5}, {.total_steps = 10});
  resumed.load_state_dict(Section{{}, Json::parse(s.meta.dump())});
  opt2.load_state_dict(opt.state_dict());
  for (int i = 0; i < 6; ++i) {
    sched.step();
    resumed.step();
    CHECK(opt2.lr(0) == opt.lr(0));
    CHECK(opt2.momentum(0) == opt.momentum(0));
  }
  SL_CHECK_THROWS(sched.step(), ValueError,
                  "OneCycleLR: tried to step 12 times; the specified "
                  "number of total steps is 10");
  StepLR step(opt2, 3);
  SL_CHECK_THROWS(step.load_state_dict(s), ValueError,
                  "StepLR.load_state_dict: saved state is for OneCycleLR, not StepLR");
  OneCycleLR other(opt2, {0.5}, {.total_steps = 20});
  SL_CHECK_THROWS(other.load_state_dict(s), ValueError, "saved for 10 total steps");
  SL_CHECK_THROWS(StepLR(opt2, 0), ValueError, "StepLR: step_size must be >= 1, got 0");
  SL_CHECK_THROWS(CosineAnnealingLR(opt2, 0), ValueError, "T_max must be >= 1");
  SL_CHECK_THROWS(LinearWarmupLR(opt2, 5, 3), ValueError,
                  "need 0 <= num_warmup_steps <= num_training_steps, got 5 and 3");
  SL_CHECK_THROWS(OneCycleLR(opt2, {0.1, 0.2}, {.total_steps = 5}), ValueError,
                  "OneCycleLR: expected 1 values for max_lr, got 2");
  SL_CHECK_THROWS(OneCycleLR(opt2, {0.1}, {}), ValueError, "positive integer total_steps");
  LinearWarmupLR lw(opt2, 2, 4);
  LinearWarmupLR lw2(opt2, 3, 4);
  SL_CHECK_THROWS(lw2.load_state_dict(lw.state_dict()), ValueError, "saved for 2/4");
  // LambdaLR runs any function of the epoch
  SGD opt3(make_params(), {.lr = 2.0});
  LambdaLR lam(opt3, [](int64_t e) { return 1.0 / static_cast<double>(e + 1); });
  lam.step();
  CHECK(opt3.lr(0) == 1.0);
  CHECK(lam.base_lrs() == std::vector<double>{2.0});
}

TEST_CASE("SequentialLR state_dict nests its schedulers' and resumes mid-period") {
  // Warm restarts (whose position in the period is state) until epoch 5, then a MultiStepLR.
  auto make = [](Optimizer& o) {
    std::vector<std::unique_ptr<LRScheduler>> subs;
    subs.push_back(std::make_unique<CosineAnnealingWarmRestarts>(o, 3, 2, 0.001));
    subs.push_back(std::make_unique<MultiStepLR>(o, std::vector<int64_t>{2, 4}, 0.5));
    return std::make_unique<SequentialLR>(o, std::move(subs), std::vector<int64_t>{5});
  };
  for (int stop : {2, 4, 7}) {  // inside the first period, inside the second, after the switch
    CAPTURE(stop);
    SGD opt(make_params(), {.lr = 0.1});
    auto seq = make(opt);
    for (int i = 0; i < stop; ++i) seq->step();
    Section s = seq->state_dict();
    CHECK(s.meta.at("schedulers").size() == 2);
    SGD opt2(make_params(), {.lr = 0.1});
    auto resumed = make(opt2);
    resumed->load_state_dict(Section{{}, Json::parse(s.meta.dump())});
    opt2.load_state_dict(opt.state_dict());
    for (int i = 0; i < 8; ++i) {
      seq->step();
      resumed->step();
      CHECK(opt2.lr(0) == opt.lr(0));
    }
    CHECK(resumed->last_epoch() == seq->last_epoch());
  }
  // Mismatches are refused before anything is loaded.
  SGD opt(make_params(), {.lr = 0.1});
  auto seq = make(opt);
  Section s = seq->state_dict();
  std::vector<std::unique_ptr<LRScheduler>> other;
  other.push_back(std::make_unique<CosineAnnealingWarmRestarts>(opt, 3, 2, 0.001));
  other.push_back(std::make_unique<ExponentialLR>(opt, 0.5));
  SequentialLR wrong(opt, std::move(other), {5});
  SL_CHECK_THROWS(wrong.load_state_dict(s), ValueError,
                  "scheduler 1 was saved as MultiStepLR, this one is ExponentialLR");
  CHECK(wrong.scheduler(0).last_epoch() == 0);  // the first was not loaded either
  std::vector<std::unique_ptr<LRScheduler>> moved;
  moved.push_back(std::make_unique<CosineAnnealingWarmRestarts>(opt, 3, 2, 0.001));
  moved.push_back(std::make_unique<MultiStepLR>(opt, std::vector<int64_t>{2, 4}, 0.5));
  SequentialLR later(opt, std::move(moved), {6});
  SL_CHECK_THROWS(later.load_state_dict(s), ValueError, "saved with milestones [5]");
  CosineAnnealingWarmRestarts t3(opt, 3), t4(opt, 4);
  SL_CHECK_THROWS(t4.load_state_dict(t3.state_dict()), ValueError, "saved with T_0 = 3");
  MultiStepLR m1(opt, {1, 2}), m2(opt, {1, 3});
  SL_CHECK_THROWS(m2.load_state_dict(m1.state_dict()), ValueError, "saved with milestones [1,2]");
}

TEST_CASE("epoch schedulers refuse options that would divide by zero or turn the lr negative") {
  SGD opt(make_params(), {.lr = 0.1});
  SGD other(make_params(), {.lr = 0.1});
  SL_CHECK_THROWS(ExponentialLR(opt, -0.5), ValueError,
                  "ExponentialLR: gamma must be >= 0, got -0.5");
  // PyTorch 1.13 takes factor 0 and raises ZeroDivisionError at total_iters (lr * 1 / factor).
  SL_CHECK_THROWS(ConstantLR(opt, 0.0), ValueError, "ConstantLR: factor must be in (0, 1], got 0");
  SL_CHECK_THROWS(ConstantLR(opt, 1.5), ValueError, "factor must be in (0, 1], got 1.5");
  SL_CHECK_THROWS(ConstantLR(opt, 0.5, 0), ValueError,
                  "ConstantLR: total_iters must be >= 1, got 0");
  // start_factor 0: PyTorch 1.13's recursive step divides by total_iters * 0 at epoch 1.
  SL_CHECK_THROWS(LinearLR(opt, 0.0), ValueError,
                  "LinearLR: start_factor must be in (0, 1], got 0");
  SL_CHECK_THROWS(LinearLR(opt, 0.5, 1.5), ValueError, "end_factor must be in [0, 1], got 1.5");
  SL_CHECK_THROWS(LinearLR(opt, 0.5, 1.0, 0), ValueError, "LinearLR: total_iters must be >= 1");
  SL_CHECK_THROWS(PolynomialLR(opt, 0), ValueError,
                  "PolynomialLR: total_iters must be >= 1, got 0");
  SL_CHECK_THROWS(PolynomialLR(opt, 5, -1.0), ValueError, "power must be >= 0, got -1");
  SL_CHECK_THROWS(CosineAnnealingWarmRestarts(opt, 0), ValueError, "T_0 must be >= 1, got 0");
  SL_CHECK_THROWS(CosineAnnealingWarmRestarts(opt, 2, 0), ValueError, "T_mult must be >= 1, got 0");
  auto two = [&](Optimizer& second) {
    std::vector<std::unique_ptr<LRScheduler>> v;
    v.push_back(std::make_unique<LinearLR>(opt, 0.5, 1.0, 2));
    v.push_back(std::make_unique<ExponentialLR>(second, 0.9));
    return v;
  };
  SL_CHECK_THROWS(SequentialLR(opt, two(other), {3}), ValueError,
                  "scheduler 1 (ExponentialLR) drives another optimizer");
  SL_CHECK_THROWS(SequentialLR(opt, two(opt), {}), ValueError,
                  "expected 1 milestones for 2 schedulers, got 0");
  SL_CHECK_THROWS(SequentialLR(opt, two(opt), {0}), ValueError,
                  "milestones must be positive and increasing, got [0]");
  auto three = [&] {
    std::vector<std::unique_ptr<LRScheduler>> v = two(opt);
    v.push_back(std::make_unique<StepLR>(opt, 2));
    return v;
  };
  SL_CHECK_THROWS(SequentialLR(opt, three(), {4, 4}), ValueError, "got [4,4]");
  SL_CHECK_THROWS(SequentialLR(opt, {}, {}), ValueError, "needs at least one scheduler");
}
