// NAdam's mu_product across a checkpoint when a group's beta1 or momentum_decay changes between
// steps (Note [NAdam's mu_product]): the product is of mu_t under the values each step saw, so a
// resumed run continues only from the saved product, not from one rebuilt from the step count.
// Reference: PyTorch 1.13's run of the same changes (fixture case "nadam_changes" of
// tools/gen_optim_fixtures.py, which sets the group's options between steps as a user would).
#include <memory>
#include <string>

#include "optim_testing.h"

using namespace sl;
using namespace sl::optim;
using serialize::Json;
using sl::testing::bits_equal;
using sl::testing::through_file;

namespace {

const Json& find_case(const Json& cases, const std::string& name) {
  for (const Json& c : cases.items()) {
    if (c.at("name").as_string() == name) return c;
  }
  FAIL("no fixture case " << name);
  return cases;
}

/// The case's NAdam over `params`, with the hyperparameters it starts from.
std::unique_ptr<NAdam> make_nadam(const Json& c, const TensorList& params) {
  std::vector<ParamGroup<NAdamOptions>> groups;
  for (const Json& g : c.at("groups").items()) {
    NAdamOptions o;
    o.lr = g.at("lr").as_double();
    if (const Json* b = g.find("betas")) {
      o.beta1 = (*b)[0].as_double();
      o.beta2 = (*b)[1].as_double();
    }
    o.momentum_decay = g.at("momentum_decay").as_double();
    TensorList ps;
    for (const Json& i : g.at("params").items()) ps.push_back(params[i.as_int()]);
    groups.push_back({ps, o});
  }
  return std::make_unique<NAdam>(groups);
}

struct Run {
  TensorList params;
  std::unique_ptr<NAdam> opt;
};

/// The case's steps; after step `resume_after` (0: never) the optimizer's state_dict goes through
/// a file into a new NAdam built with the case's initial hyperparameters, over copies of the
/// parameters, which takes the remaining steps. Each step is checked against PyTorch's.
Run run_case(const sl::testing::OptimFixture& f, const Json& c, int resume_after) {
  const std::string name = c.at("name").as_string();
  Run r;
  for (size_t k = 0; k < 2; ++k) {
    r.params.push_back(f.tensors.at(name + "/init/" + std::to_string(k)).clone());
    r.params.back().requires_grad_(true);
  }
  r.opt = make_nadam(c, r.params);
  const int64_t steps = c.at("steps").as_int();
  for (int s = 1; s <= steps; ++s) {
    CAPTURE(s);
    if (s == resume_after + 1) {
      serialize::Section saved = through_file(r.opt->state_dict());
      TensorList fresh;
      for (const Tensor& p : r.params) fresh.push_back(p.detach().clone().requires_grad_(true));
      r.params = fresh;
      r.opt = make_nadam(c, r.params);
      r.opt->load_state_dict(saved);
    }
    sl::testing::apply_nadam_changes(c, s, *r.opt);
    for (size_t k = 0; k < 2; ++k) {
      r.params[k].set_grad(
          f.tensors.at(name + "/grad/" + std::to_string(s) + "/" + std::to_string(k)));
    }
    r.opt->step();
    for (size_t k = 0; k < 2; ++k) {
      CAPTURE(k);
      const std::string sk = std::to_string(s) + "/" + std::to_string(k);
      // f32 tolerance as in test_optim_parity.cpp: PyTorch's kernels may fuse a multiply-add
      // that ours round twice (a few ulp after a few steps)
      SL_CHECK_CLOSE(r.params[k].detach(), f.tensors.at(name + "/param/" + sk), 1e-5, 1e-6);
      // each group holds one parameter (k); its mu_product is computed in float32 as PyTorch's
      const ParamState& st = r.opt->state(k, 0);
      REQUIRE(st.mu_product);
      CHECK(*st.mu_product == f.tensors.at(name + "/state/" + sk + "/mu_product").item<double>());
    }
  }
  return r;
}

}  // namespace

TEST_CASE("NAdam resumed after its groups' beta1 and momentum_decay changed: PyTorch's run") {
  sl::testing::OptimFixture f = sl::testing::load_optim_fixture("optimizers.safetensors");
  const Json& c = find_case(f.cases, "nadam_changes");
  REQUIRE(c.at("changes").size() == 3);  // before steps 3, 4 and 5 of 6
  Run whole = run_case(f, c, 0);
  // resumed before any change, between them, and after all of them
  for (int resume_after = 1; resume_after < 6; ++resume_after) {
    CAPTURE(resume_after);
    Run resumed = run_case(f, c, resume_after);
    // the same kernels on the same state: the uninterrupted run's values bit for bit
    for (size_t k = 0; k < 2; ++k) {
      CAPTURE(k);
      CHECK(bits_equal(resumed.params[k].detach(), whole.params[k].detach()));
      const ParamState &a = resumed.opt->state(k, 0), &b = whole.opt->state(k, 0);
      CHECK(bits_equal(a.exp_avg, b.exp_avg));
      CHECK(bits_equal(a.exp_avg_sq, b.exp_avg_sq));
      CHECK(a.mu_product == b.mu_product);
      CHECK(a.step == b.step);
    }
    CHECK(resumed.opt->options(0).momentum_decay == 0.05);  // the last change, saved and restored
    CHECK(resumed.opt->options(1).beta1 == 0.7);
  }
}
