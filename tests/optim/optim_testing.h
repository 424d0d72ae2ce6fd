// Helpers shared by the optimizer tests.
#pragma once

#include <string>

#include "support/testing.h"

namespace sl::testing {

/// A Section through an in-memory safetensors file and JSON text, as a checkpoint stores it.
inline serialize::Section through_file(const serialize::Section& s) {
  serialize::Section out;
  out.tensors = serialize::deserialize_safetensors(serialize::serialize_safetensors(s.tensors));
  out.meta = serialize::Json::parse(s.meta.dump());
  return out;
}

/// A fixture of tests/fixtures/optim/ (written by tools/gen_optim_fixtures.py, whose docstring
/// gives the layout): its tensors and the JSON list of its cases (metadata "cases").
struct OptimFixture {
  serialize::StateDict tensors;
  serialize::Json cases;
};
inline OptimFixture load_optim_fixture(const std::string& name) {
  serialize::Metadata md;
  OptimFixture f;
  f.tensors = serialize::load_safetensors(
      std::string(SL_SOURCE_DIR) + "/tests/fixtures/optim/" + name, &md);
  for (const auto& [k, v] : md) {
    if (k == "cases") f.cases = serialize::Json::parse(v);
  }
  REQUIRE(f.cases.is_array());
  return f;
}

/// Sets what a fixture case's "changes" set before step `s` (a NAdam group's betas and
/// momentum_decay, as the generator sets PyTorch's param_groups); another key fails the test.
inline void apply_nadam_changes(const serialize::Json& c, int64_t s, optim::NAdam& opt) {
  const serialize::Json* changes = c.find("changes");
  if (!changes) return;
  for (const serialize::Json& ch : changes->items()) {
    if (ch.at("step").as_int() != s) continue;
    optim::NAdamOptions& o = opt.options(static_cast<size_t>(ch.at("group").as_int()));
    for (const auto& [key, v] : ch.members()) {
      if (key == "betas") {
        o.beta1 = v[0].as_double();
        o.beta2 = v[1].as_double();
      } else if (key == "momentum_decay") {
        o.momentum_decay = v.as_double();
      } else {
        REQUIRE_MESSAGE((key == "step" || key == "group"), "unknown change " << key);
      }
    }
  }
}

/// Two seeded parameters ([3, 4] and [5]) of dtype dt, requiring grad: the same values in every
/// optimizer test that uses them.
inline TensorList make_params(DType dt = DType::f32) {
  Generator g(1);
  return {randn({3, 4}, {.dtype = dt}, &g).requires_grad_(true),
          randn({5}, {.dtype = dt}, &g).requires_grad_(true)};
}

/// Master weights run the f32 math: make_opt(params, master_weights) stepped `steps` times on bf16
/// parameters with master weights and on f32 copies of them without, the f32 copies taking the
/// bf16 gradients exactly. The f32 run starts from the bf16 values, so the master copy equals it
/// bit for bit (state in f32, the same step count and NAdam product) and each bf16 parameter is
/// its rounding.
template <class MakeOpt>
void check_master_weights_run_f32_math(int steps, const MakeOpt& make_opt) {
  TensorList p16 = make_params(DType::bf16), p32;
  for (const Tensor& p : p16) p32.push_back(p.detach().to(DType::f32).requires_grad_(true));
  auto a = make_opt(p16, true);
  auto b = make_opt(p32, false);
  for (int s = 1; s <= steps; ++s) {
    set_seeded_grads(p16, s);
    for (size_t k = 0; k < p16.size(); ++k) p32[k].set_grad(p16[k].grad().to(DType::f32));
    a->step();
    b->step();
  }
  for (size_t k = 0; k < p16.size(); ++k) {
    CAPTURE(k);
    const optim::ParamState& st = a->state(0, k);
    REQUIRE(st.master.defined());
    for (size_t j = 0; j + 1 < optim::ParamState::kNumTensors; ++j) {
      if (st.tensor(j).defined()) CHECK(st.tensor(j).dtype() == DType::f32);
    }
    CHECK(st.mu_product == b->state(0, k).mu_product);
    CHECK(bits_equal(st.master.view_as(p32[k]), p32[k].detach()));
    CHECK(bits_equal(p16[k].detach(), p32[k].detach().to(DType::bf16)));
  }
}

}  // namespace sl::testing
