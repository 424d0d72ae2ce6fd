// Optimizer, scheduler and clipping parity with PyTorch 1.13: fixtures in tests/fixtures/optim/
// were produced by tools/gen_optim_fixtures.py (see its docstring for the layout).
#include <cmath>
#include <limits>
#include <memory>
#include <set>

#include "optim_testing.h"

using namespace sl;
using namespace sl::optim;
using serialize::Json;
using serialize::StateDict;
using sl::testing::load_optim_fixture;
using sl::testing::OptimFixture;

namespace {

double get(const Json& g, const char* key, double dflt) {
  const Json* v = g.find(key);
  return v ? v->as_double() : dflt;
}
bool get_bool(const Json& g, const char* key) {
  const Json* v = g.find(key);
  return v && v->as_bool();
}

TensorList pick(const TensorList& params, const Json& ids) {
  TensorList out;
  for (const Json& i : ids.items()) out.push_back(params[static_cast<size_t>(i.as_int())]);
  return out;
}

std::unique_ptr<Optimizer> make_optimizer(const Json& c, const TensorList& params) {
  const std::string kind = c.at("optimizer").as_string();
  const Json& groups = c.at("groups");
  if (kind == "SGD") {
    std::vector<ParamGroup<SGDOptions>> gs;
    for (const Json& g : groups.items()) {
      gs.push_back(
          {pick(params, g.at("params")), SGDOptions{.lr = get(g, "lr", 0),
                                                    .momentum = get(g, "momentum", 0),
                                                    .dampening = get(g, "dampening", 0),
                                                    .weight_decay = get(g, "weight_decay", 0),
                                                    .nesterov = get_bool(g, "nesterov"),
                                                    .maximize = get_bool(g, "maximize")}});
    }
    return std::make_unique<SGD>(gs);
  }
  auto adam_opts = [&](const Json& g, auto o) {
    o.lr = get(g, "lr", 1e-3);
    if (const Json* b = g.find("betas")) {
      o.beta1 = (*b)[0].as_double();
      o.beta2 = (*b)[1].as_double();
    }
    o.eps = get(g, "eps", 1e-8);
    o.weight_decay = get(g, "weight_decay", o.weight_decay);
    o.amsgrad = get_bool(g, "amsgrad");
    o.maximize = get_bool(g, "maximize");
    return o;
  };
  if (kind == "Adam") {
    std::vector<ParamGroup<AdamOptions>> gs;
    for (const Json& g : groups.items()) {
      gs.push_back({pick(params, g.at("params")), adam_opts(g, AdamOptions{})});
    }
    return std::make_unique<Adam>(gs);
  }
  if (kind == "RMSprop") {
    std::vector<ParamGroup<RMSpropOptions>> gs;
    for (const Json& g : groups.items()) {
      gs.push_back(
          {pick(params, g.at("params")), RMSpropOptions{.lr = get(g, "lr", 1e-2),
                                                        .alpha = get(g, "alpha", 0.99),
                                                        .eps = get(g, "eps", 1e-8),
                                                        .weight_decay = get(g, "weight_decay", 0),
                                                        .momentum = get(g, "momentum", 0),
                                                        .centered = get_bool(g, "centered"),
                                                        .maximize = get_bool(g, "maximize")}});
    }
    return std::make_unique<RMSprop>(gs);
  }
  if (kind == "Adagrad") {
    std::vector<ParamGroup<AdagradOptions>> gs;
    for (const Json& g : groups.items()) {
      gs.push_back(
          {pick(params, g.at("params")),
           AdagradOptions{.lr = get(g, "lr", 1e-2),
                          .lr_decay = get(g, "lr_decay", 0),
                          .weight_decay = get(g, "weight_decay", 0),
                          .initial_accumulator_value = get(g, "initial_accumulator_value", 0),
                          .eps = get(g, "eps", 1e-10),
                          .maximize = get_bool(g, "maximize")}});
    }
    return std::make_unique<Adagrad>(gs);
  }
  // Adamax, NAdam, RAdam: a hyperparameter the case leaves out takes the Options default, which
  // must then be PyTorch's (the *_default cases give none)
  auto betas_etc = [&](const Json& g, auto o) {
    o.lr = get(g, "lr", o.lr);
    if (const Json* b = g.find("betas")) {
      o.beta1 = (*b)[0].as_double();
      o.beta2 = (*b)[1].as_double();
    }
    o.eps = get(g, "eps", o.eps);
    o.weight_decay = get(g, "weight_decay", o.weight_decay);
    return o;
  };
  if (kind == "Adamax") {
    std::vector<ParamGroup<AdamaxOptions>> gs;
    for (const Json& g : groups.items()) {
      AdamaxOptions o = betas_etc(g, AdamaxOptions{});
      o.maximize = get_bool(g, "maximize");
      gs.push_back({pick(params, g.at("params")), o});
    }
    return std::make_unique<Adamax>(gs);
  }
  if (kind == "NAdam") {
    std::vector<ParamGroup<NAdamOptions>> gs;
    for (const Json& g : groups.items()) {
      NAdamOptions o = betas_etc(g, NAdamOptions{});
      o.momentum_decay = get(g, "momentum_decay", o.momentum_decay);
      gs.push_back({pick(params, g.at("params")), o});
    }
    return std::make_unique<NAdam>(gs);
  }
  if (kind == "RAdam") {
    std::vector<ParamGroup<RAdamOptions>> gs;
    for (const Json& g : groups.items()) {
      gs.push_back({pick(params, g.at("params")), betas_etc(g, RAdamOptions{})});
    }
    return std::make_unique<RAdam>(gs);
  }
  REQUIRE(kind == "AdamW");
  std::vector<ParamGroup<AdamWOptions>> gs;
  for (const Json& g : groups.items()) {
    gs.push_back({pick(params, g.at("params")), adam_opts(g, AdamWOptions{})});
  }
  return std::make_unique<AdamW>(gs);
}

/// Where a parameter's state lives, by (group, index).
std::pair<size_t, size_t> locate(const Json& c, size_t k) {
  const Json& groups = c.at("groups");
  for (size_t g = 0; g < groups.size(); ++g) {
    const Json& ids = groups[g].at("params");
    for (size_t i = 0; i < ids.size(); ++i) {
      if (static_cast<size_t>(ids[i].as_int()) == k) return {g, i};
    }
  }
  FAIL("parameter not in any group");
  return {0, 0};
}

double max_abs(const Tensor& t) {
  return t.numel() ? t.abs().max().item<double>() : 0.0;
}

}  // namespace

// Tolerances. f32: rtol 1e-5, atol 1e-6 for parameters (values of order 1). The kernels follow
// PyTorch's order of operations with one rounding per operation; PyTorch's CPU kernels may fuse
// a*b+c into one FMA where ours round twice, so results differ by a few ulp after 5 steps.
// State tensors have scales far from 1 (exp_avg_sq is ~1e-6..1e-2), so their absolute floor is
// 1e-6 times the tensor's largest element rather than 1e-6. f64: rtol 1e-12, same reasoning.
TEST_CASE("optimizers match PyTorch 1.13 over 5 steps: parameters and state") {
  OptimFixture f = load_optim_fixture("optimizers.safetensors");
  REQUIRE(f.cases.size() >= 39 + 17);
  std::set<std::string> kinds;
  for (const Json& c : f.cases.items()) {
    const std::string name = c.at("name").as_string();
    CAPTURE(name);
    kinds.insert(c.at("optimizer").as_string());
    const bool f64 = c.at("dtype").as_string() == "float64";
    const double rtol = f64 ? 1e-12 : 1e-5, atol = f64 ? 1e-14 : 1e-6;
    TensorList params;
    for (size_t k = 0; f.tensors.contains(name + "/init/" + std::to_string(k)); ++k) {
      params.push_back(f.tensors.at(name + "/init/" + std::to_string(k)).clone());
      params.back().requires_grad_(true);
    }
    REQUIRE(params.size() == 2);
    auto opt = make_optimizer(c, params);
    const Json* case_steps = c.find("steps");
    const int64_t steps = case_steps ? case_steps->as_int() : 5;
    for (int s = 1; s <= steps; ++s) {
      CAPTURE(s);
      for (size_t k = 0; k < params.size(); ++k) {
        params[k].set_grad(
            f.tensors.at(name + "/grad/" + std::to_string(s) + "/" + std::to_string(k)));
      }
      if (c.find("changes")) sl::testing::apply_nadam_changes(c, s, dynamic_cast<NAdam&>(*opt));
      opt->step();
      for (size_t k = 0; k < params.size(); ++k) {
        std::string prefix = name + "/param/" + std::to_string(s) + "/" + std::to_string(k);
        SL_CHECK_CLOSE(params[k].detach(), f.tensors.at(prefix), rtol, atol);
        auto [g, i] = locate(c, k);
        const ParamState& st = opt->state(g, i);
        CHECK(st.step == s);
        std::string sp = name + "/state/" + std::to_string(s) + "/" + std::to_string(k) + "/";
        const std::pair<const char*, const Tensor*> fields[] = {
            {"momentum_buffer", &st.momentum_buffer},
            {"exp_avg", &st.exp_avg},
            {"exp_avg_sq", &st.exp_avg_sq},
            {"max_exp_avg_sq", &st.max_exp_avg_sq},
            {"square_avg", &st.square_avg},
            {"grad_avg", &st.grad_avg},
            {"sum", &st.sum},
            {"exp_inf", &st.exp_inf}};
        for (const auto& [key, t] : fields) {
          CAPTURE(key);
          const Tensor* ref = f.tensors.find(sp + key);
          CHECK(t->defined() == (ref != nullptr));
          if (ref && t->defined()) {
            SL_CHECK_CLOSE(*t, *ref, rtol, atol * std::max(max_abs(*ref), 1e-30));
          }
        }
        // NAdam's mu_product: PyTorch's float32 scalar, computed the same way (in float32), so
        // exactly equal
        const Tensor* mu_ref = f.tensors.find(sp + "mu_product");
        CHECK(st.mu_product.has_value() == (mu_ref != nullptr));
        if (mu_ref && st.mu_product) CHECK(*st.mu_product == mu_ref->item<double>());
      }
    }
  }
  CHECK(kinds == std::set<std::string>{"Adagrad", "Adam", "AdamW", "Adamax", "NAdam", "RAdam",
                                       "RMSprop", "SGD"});
}

// Note [Adagrad's state at the first step] (optim/adagrad.h): ours is created by the first step,
// PyTorch's by the constructor. PyTorch's state right after construction (step 0, the filled sum)
// loads, and the run continues as PyTorch's; tolerances as in the test above.
TEST_CASE("Adagrad: PyTorch 1.13's state right after construction loads and runs as PyTorch's") {
  OptimFixture f = load_optim_fixture("optimizers.safetensors");
  int cases = 0;
  for (const Json& c : f.cases.items()) {
    if (c.at("optimizer").as_string() != "Adagrad") continue;
    const std::string name = c.at("name").as_string();
    CAPTURE(name);
    ++cases;
    const bool f64 = c.at("dtype").as_string() == "float64";
    const double rtol = f64 ? 1e-12 : 1e-5, atol = f64 ? 1e-14 : 1e-6;
    TensorList params;
    for (size_t k = 0; k < 2; ++k) {
      params.push_back(f.tensors.at(name + "/init/" + std::to_string(k)).clone());
      params.back().requires_grad_(true);
    }
    auto opt = make_optimizer(c, params);
    serialize::Section s = opt->state_dict();
    CHECK(s.tensors.size() == 0);  // ours: no state before the first step
    // PyTorch's state_dict after construction, in ours's layout
    Json state = Json::object();
    for (size_t k = 0; k < 2; ++k) {
      auto [g, i] = locate(c, k);
      size_t index = i;
      for (size_t h = 0; h < g; ++h) index += opt->params(h).size();
      state.set(std::to_string(index), Json::object({{"step", 0}}));
      s.tensors.insert("state." + std::to_string(index) + ".sum",
                       f.tensors.at(name + "/state/0/" + std::to_string(k) + "/sum"));
    }
    s.meta.set("state", state);
    opt->load_state_dict(sl::testing::through_file(s));
    for (size_t k = 0; k < 2; ++k) {
      auto [g, i] = locate(c, k);
      CHECK(opt->state(g, i).step == 0);
      CHECK(sl::testing::bits_equal(opt->state(g, i).sum,
                                    f.tensors.at(name + "/state/0/" + std::to_string(k) + "/sum")));
    }
    CHECK(opt->state_dict().tensors.size() == 2);  // saved again, as PyTorch's state_dict holds it
    for (int s = 1; s <= 5; ++s) {
      CAPTURE(s);
      for (size_t k = 0; k < 2; ++k) {
        params[k].set_grad(
            f.tensors.at(name + "/grad/" + std::to_string(s) + "/" + std::to_string(k)));
      }
      opt->step();
      for (size_t k = 0; k < 2; ++k) {
        const std::string sk = std::to_string(s) + "/" + std::to_string(k);
        SL_CHECK_CLOSE(params[k].detach(), f.tensors.at(name + "/param/" + sk), rtol, atol);
        auto [g, i] = locate(c, k);
        CHECK(opt->state(g, i).step == s);
        const Tensor& ref = f.tensors.at(name + "/state/" + sk + "/sum");
        SL_CHECK_CLOSE(opt->state(g, i).sum, ref, rtol, atol * max_abs(ref));
      }
    }
  }
  CHECK(cases == 7);
}

namespace {

// The optimizer a scheduler case drives: one single-element parameter group per base lr.
std::unique_ptr<Optimizer> scheduler_case_optimizer(const Json& c, const std::vector<double>& base,
                                                    TensorList& params) {
  const std::string okind = c.at("optimizer").as_string();
  std::unique_ptr<Optimizer> opt;
  if (okind == "SGD") {
    std::vector<ParamGroup<SGDOptions>> gs;
    for (double lr : base) {
      params.push_back(zeros({1}));
      gs.push_back({{params.back()}, {.lr = lr, .momentum = get(c, "momentum", 0)}});
    }
    opt = std::make_unique<SGD>(gs);
  } else if (okind == "Adam") {
    std::vector<ParamGroup<AdamOptions>> gs;
    for (double lr : base) {
      params.push_back(zeros({1}));
      gs.push_back({{params.back()}, {.lr = lr}});
    }
    opt = std::make_unique<Adam>(gs);
  } else {
    std::vector<ParamGroup<AdamWOptions>> gs;
    for (double lr : base) {
      params.push_back(zeros({1}));
      gs.push_back({{params.back()}, {.lr = lr}});
    }
    opt = std::make_unique<AdamW>(gs);
  }
  return opt;
}

// The scheduler a fixture case describes (or one entry of a "Chain" case's list).
std::unique_ptr<LRScheduler> make_scheduler(const Json& c, Optimizer& opt) {
  const std::string kind = c.at("scheduler").as_string();
  if (kind == "StepLR") {
    return std::make_unique<StepLR>(opt, c.at("step_size").as_int(), get(c, "gamma", 0.1));
  }
  if (kind == "CosineAnnealingLR") {
    return std::make_unique<CosineAnnealingLR>(opt, c.at("T_max").as_int(), get(c, "eta_min", 0));
  }
  if (kind == "LinearWarmupLR") {
    return std::make_unique<LinearWarmupLR>(opt, c.at("num_warmup_steps").as_int(),
                                            c.at("num_training_steps").as_int());
  }
  auto get_int = [&](const char* key, int64_t fallback) {
    const Json* v = c.find(key);
    return v ? v->as_int() : fallback;
  };
  auto ints = [&](const char* key) {
    std::vector<int64_t> out;
    for (const Json& m : c.at(key).items()) out.push_back(m.as_int());
    return out;
  };
  // Defaults are PyTorch's.
  if (kind == "MultiStepLR") {
    return std::make_unique<MultiStepLR>(opt, ints("milestones"), get(c, "gamma", 0.1));
  }
  if (kind == "ExponentialLR") return std::make_unique<ExponentialLR>(opt, get(c, "gamma", 0));
  if (kind == "ConstantLR") {
    return std::make_unique<ConstantLR>(opt, get(c, "factor", 1.0 / 3), get_int("total_iters", 5));
  }
  if (kind == "LinearLR") {
    return std::make_unique<LinearLR>(opt, get(c, "start_factor", 1.0 / 3),
                                      get(c, "end_factor", 1.0), get_int("total_iters", 5));
  }
  if (kind == "PolynomialLR") {
    return std::make_unique<PolynomialLR>(opt, get_int("total_iters", 5), get(c, "power", 1.0));
  }
  if (kind == "CosineAnnealingWarmRestarts") {
    return std::make_unique<CosineAnnealingWarmRestarts>(
        opt, c.at("T_0").as_int(), get_int("T_mult", 1), get(c, "eta_min", 0));
  }
  if (kind == "SequentialLR") {
    std::vector<std::unique_ptr<LRScheduler>> subs;
    for (const Json& sub : c.at("schedulers").items()) subs.push_back(make_scheduler(sub, opt));
    return std::make_unique<SequentialLR>(opt, std::move(subs), ints("milestones"));
  }
  REQUIRE(kind == "OneCycleLR");
  std::vector<double> max_lr;
  for (const Json& m : c.at("max_lr").items()) max_lr.push_back(m.as_double());
  OneCycleOptions o{.total_steps = c.at("total_steps").as_int()};
  o.pct_start = get(c, "pct_start", 0.3);
  if (const Json* a = c.find("anneal_strategy")) o.cos_anneal = a->as_string() == "cos";
  if (const Json* cm = c.find("cycle_momentum")) o.cycle_momentum = cm->as_bool();
  o.three_phase = get_bool(c, "three_phase");
  o.div_factor = get(c, "div_factor", 25.0);
  o.final_div_factor = get(c, "final_div_factor", 1e4);
  return std::make_unique<OneCycleLR>(opt, max_lr, o);
}

}  // namespace

// Learning rates are doubles computed by the same formulas in the same order as PyTorch's
// Python code; only libm's cos/pow may differ in the last bit, so rtol 1e-12.
TEST_CASE("LR schedulers match PyTorch 1.13: every epoch scheduler, chained and sequential") {
  OptimFixture f = load_optim_fixture("schedulers.safetensors");
  REQUIRE(f.cases.size() >= 11);
  int refused = 0;
  for (const Json& c : f.cases.items()) {
    const std::string name = c.at("name").as_string();
    CAPTURE(name);
    const std::string kind = c.at("scheduler").as_string();
    if (kind == "ReduceLROnPlateau") continue;  // takes metrics: its own case below
    std::vector<double> base;
    for (const Json& b : c.at("base_lrs").items()) base.push_back(b.as_double());
    TensorList params;
    std::unique_ptr<Optimizer> opt = scheduler_case_optimizer(c, base, params);
    // PyTorch divided by zero somewhere in this schedule (a zero-width phase): we must refuse
    // it in the constructor (Note [OneCycle empty phases]); every other grid case must match.
    if (get_bool(c, "raises")) {
      SL_CHECK_THROWS(make_scheduler(c, *opt), ValueError, "phase zero steps wide");
      ++refused;
      continue;
    }
    // A "Chain" case: several schedulers on one optimizer, created and stepped in order.
    std::vector<std::unique_ptr<LRScheduler>> scheds;
    if (kind == "Chain") {
      for (const Json& sub : c.at("chain").items()) scheds.push_back(make_scheduler(sub, *opt));
    } else {
      scheds.push_back(make_scheduler(c, *opt));
    }
    const Tensor& lrs = f.tensors.at(name + "/lr");
    const Tensor* moms = f.tensors.find(name + "/momentum");
    const int64_t steps = c.at("steps").as_int();
    REQUIRE(lrs.size(0) == steps + 1);
    auto record = [&](std::vector<double>& lr, std::vector<double>& m) {
      for (size_t g = 0; g < opt->num_param_groups(); ++g) {
        lr.push_back(opt->lr(g));
        m.push_back(opt->momentum(g));
      }
    };
    std::vector<double> got_lr, got_m;
    record(got_lr, got_m);
    for (int64_t s = 0; s < steps; ++s) {
      opt->step();
      for (auto& sched : scheds) sched->step();
      record(got_lr, got_m);
    }
    SL_CHECK_CLOSE(from_vector(got_lr, lrs.sizes()), lrs, 1e-12, 1e-18);
    if (moms) SL_CHECK_CLOSE(from_vector(got_m, moms->sizes()), *moms, 1e-12, 1e-18);
    CHECK(
        scheds.back()->last_lr() ==
        std::vector<double>(got_lr.end() - static_cast<std::ptrdiff_t>(base.size()), got_lr.end()));
  }
  CHECK(refused > 0);  // the grid holds schedules PyTorch divides by zero on (16 in 1.13)
}

// ReduceLROnPlateau's lrs are products of factor and the base lr, compared with the same
// comparisons as PyTorch's, so they agree exactly up to double rounding of the product: rtol 1e-15.
TEST_CASE("ReduceLROnPlateau matches PyTorch 1.13, and resumes from its state_dict") {
  OptimFixture f = load_optim_fixture("schedulers.safetensors");
  int n_cases = 0;
  for (const Json& c : f.cases.items()) {
    if (c.at("scheduler").as_string() != "ReduceLROnPlateau") continue;
    ++n_cases;
    const std::string name = c.at("name").as_string();
    CAPTURE(name);
    std::vector<double> base, metrics;
    for (const Json& b : c.at("base_lrs").items()) base.push_back(b.as_double());
    for (const Json& m : c.at("metrics").items()) {
      metrics.push_back(m.is_null() ? std::numeric_limits<double>::quiet_NaN() : m.as_double());
    }
    PlateauOptions o;
    if (const Json* m = c.find("mode")) o.maximize = m->as_string() == "max";
    o.factor = get(c, "factor", 0.1);
    o.patience = c.at("patience").as_int();
    o.threshold = get(c, "threshold", 1e-4);
    if (const Json* m = c.find("threshold_mode")) o.relative_threshold = m->as_string() == "rel";
    o.cooldown = static_cast<int64_t>(get(c, "cooldown", 0));
    if (const Json* m = c.find("min_lr")) {
      o.min_lrs.clear();
      for (const Json& x : m->items()) o.min_lrs.push_back(x.as_double());
    }
    o.eps = get(c, "eps", 1e-8);
    TensorList params, params2;
    std::unique_ptr<Optimizer> opt = scheduler_case_optimizer(c, base, params);
    std::unique_ptr<Optimizer> opt2 = scheduler_case_optimizer(c, base, params2);
    ReduceLROnPlateau sched(*opt, o);
    std::unique_ptr<ReduceLROnPlateau> resumed;
    const Tensor& lrs = f.tensors.at(name + "/lr");
    const int64_t steps = c.at("steps").as_int();
    REQUIRE(lrs.size(0) == steps + 1);
    REQUIRE(metrics.size() == static_cast<size_t>(steps));
    std::vector<double> got_lr(sched.last_lr()), got_resumed(sched.last_lr());
    int reductions = 0;
    for (int64_t s = 0; s < steps; ++s) {
      reductions += sched.step(metrics[static_cast<size_t>(s)]);
      got_lr.insert(got_lr.end(), sched.last_lr().begin(), sched.last_lr().end());
      if (s == steps / 2) {  // a run resumed here from the saved state and the optimizer's lrs
        for (size_t g = 0; g < base.size(); ++g) opt2->set_lr(g, opt->lr(g));
        resumed = std::make_unique<ReduceLROnPlateau>(*opt2, o);
        resumed->load_state_dict(sched.state_dict());
      } else if (resumed) {
        resumed->step(metrics[static_cast<size_t>(s)]);
        CHECK(resumed->last_lr() == sched.last_lr());
        CHECK(resumed->num_bad_epochs() == sched.num_bad_epochs());
      }
    }
    SL_CHECK_CLOSE(from_vector(got_lr, lrs.sizes()), lrs, 1e-15, 0);
    CHECK(reductions >= 1);  // every case reaches a reduction
    CHECK(sched.last_epoch() == steps);
  }
  CHECK(n_cases == 4);
}

// clip_grad_norm_: PyTorch accumulates each tensor's norm in float32, we accumulate in double,
// so the norm and the clipped gradients agree to f32 rounding: rtol 1e-5, atol 1e-6.
TEST_CASE("clip_grad_norm_ and clip_grad_value_ match PyTorch 1.13") {
  OptimFixture f = load_optim_fixture("clip_grad.safetensors");
  REQUIRE(f.cases.size() >= 6);
  for (const Json& c : f.cases.items()) {
    const std::string name = c.at("name").as_string();
    CAPTURE(name);
    TensorList params;
    for (size_t k = 0; f.tensors.contains(name + "/grad/" + std::to_string(k)); ++k) {
      const Tensor& g = f.tensors.at(name + "/grad/" + std::to_string(k));
      params.push_back(zeros(g.sizes()).requires_grad_(true));
      params.back().set_grad(g.clone());
    }
    REQUIRE(params.size() == 3);
    if (c.contains("clip_value")) {
      clip_grad_value_(params, c.at("clip_value").as_double());
    } else {
      const Json& nt = c.at("norm_type");
      double p = nt.is_string() ? std::numeric_limits<double>::infinity() : nt.as_double();
      double total = clip_grad_norm_(params, c.at("max_norm").as_double(), p);
      CHECK(total ==
            doctest::Approx(f.tensors.at(name + "/total_norm").item<double>()).epsilon(1e-5));
    }
    for (size_t k = 0; k < params.size(); ++k) {
      SL_CHECK_CLOSE(params[k].grad(), f.tensors.at(name + "/clipped/" + std::to_string(k)), 1e-5,
                     1e-6);
    }
  }
}
