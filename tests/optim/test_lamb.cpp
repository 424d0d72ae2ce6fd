// LAMB (optim/lamb.h, Note [LAMB]): parity with a plain-PyTorch reference (fixture made by
// tools/gen_lamb_fixture.py), the two-phase kernels over spans of several parameters and over a
// parameter split in pieces (what ZeRO does), master weights, state_dict and error paths.
#include <cstring>

#include "support/testing.h"

using namespace sl;
using sl::testing::bits_equal;
using sl::testing::set_seeded_grads;
using namespace sl::optim;
using serialize::Json;
using serialize::Section;

namespace {

double max_abs(const Tensor& t) {
  return t.numel() ? t.abs().max().item<double>() : 0.0;
}

TensorList make_params(DType dt = DType::f32) {
  Generator g(1);
  return {randn({3, 4}, {.dtype = dt}, &g).requires_grad_(true),
          randn({5}, {.dtype = dt}, &g).requires_grad_(true),
          randn({2, 3, 2}, {.dtype = dt}, &g).requires_grad_(true)};
}

}  // namespace

TEST_CASE("Lamb matches the plain-PyTorch reference (fixture), f64 and f32") {
  serialize::Metadata md;
  serialize::StateDict t = serialize::load_safetensors(
      std::string(SL_SOURCE_DIR) + "/tests/fixtures/optim/lamb.safetensors", &md);
  Json cases;
  for (const auto& [k, v] : md) {
    if (k == "cases") cases = Json::parse(v);
  }
  REQUIRE(cases.size() == 2);
  for (const Json& c : cases.items()) {
    const std::string name = c.at("name").as_string();
    CAPTURE(name);
    for (DType dt : {DType::f64, DType::f32}) {
      CAPTURE(dt);
      // f64: the same math as the float64 reference, differing only in rounding order (the
      // squared norms' summation, sqrt(v / bc2) vs torch's ops): 1e-12 relative. f32: every
      // operation rounds to float (eps 6e-8) and 5 steps compound it; the update is divided by
      // sqrt(v) ~ |g| so relative errors stay relative: 2e-5 relative, 1e-6 absolute.
      const double rtol = dt == DType::f64 ? 1e-12 : 2e-5, atol = dt == DType::f64 ? 1e-14 : 1e-6;
      TensorList params;
      for (size_t k = 0; t.contains(name + "/init/" + std::to_string(k)); ++k) {
        // a copy: to() returns the fixture's own tensor when the dtype is already f64
        params.push_back(
            t.at(name + "/init/" + std::to_string(k)).to(dt).clone().requires_grad_(true));
      }
      REQUIRE(params.size() == 4);
      CHECK(max_abs(params[2].detach()) == 0.0);  // the ||w|| = 0 branch (ratio 1)
      std::vector<ParamGroup<LambOptions>> groups;
      std::vector<std::pair<size_t, size_t>> where(params.size());
      for (const Json& g : c.at("groups").items()) {
        LambOptions o;
        o.lr = g.at("lr").as_double();
        o.beta1 = g.at("betas")[0].as_double();
        o.beta2 = g.at("betas")[1].as_double();
        o.eps = g.at("eps").as_double();
        o.weight_decay = g.at("weight_decay").as_double();
        o.bias_correction = c.at("bias_correction").as_bool();
        TensorList ps;
        for (const Json& i : g.at("params").items()) {
          where[static_cast<size_t>(i.as_int())] = {groups.size(), ps.size()};
          ps.push_back(params[static_cast<size_t>(i.as_int())]);
        }
        groups.push_back({ps, o});
      }
      Lamb opt(groups);
      for (int s = 1; s <= 5; ++s) {
        CAPTURE(s);
        for (size_t k = 0; k < params.size(); ++k) {
          params[k].set_grad(
              t.at(name + "/grad/" + std::to_string(s) + "/" + std::to_string(k)).to(dt));
        }
        opt.step();
        for (size_t k = 0; k < params.size(); ++k) {
          CAPTURE(k);
          const std::string sk = std::to_string(s) + "/" + std::to_string(k);
          const Tensor& ref = t.at(name + "/param/" + sk);
          SL_CHECK_CLOSE(params[k].detach().to(DType::f64), ref, rtol, atol);
          const ParamState& st = opt.state(where[k].first, where[k].second);
          CHECK(st.step == s);
          const Tensor& m = t.at(name + "/state/" + sk + "/exp_avg");
          const Tensor& v = t.at(name + "/state/" + sk + "/exp_avg_sq");
          SL_CHECK_CLOSE(st.exp_avg.to(DType::f64), m, rtol, atol * std::max(max_abs(m), 1e-30));
          SL_CHECK_CLOSE(st.exp_avg_sq.to(DType::f64), v, rtol, atol * std::max(max_abs(v), 1e-30));
        }
      }
    }
  }
}

TEST_CASE("lamb kernels: one span of several parameters gives the per-parameter bits") {
  LambHyper h{.lr = 0.01, .weight_decay = 0.02};
  Generator gen(5);
  const std::vector<int64_t> sizes{12, 5, 0, 70000};  // an empty one, and one over the grain
  int64_t total = 0;
  for (int64_t n : sizes) total += n;
  Tensor p = randn({total}, {}, &gen), g = randn({total}, {}, &gen);
  Tensor m = zeros({total}), v = zeros({total}), u = zeros({total});
  Tensor p1 = p.clone(), m1 = m.clone(), v1 = v.clone(), u1 = u.clone();
  // all four as segments of one span, written to rows 3, 0, 2, 1 of the sums
  std::vector<int64_t> bounds{0}, rows{3, 0, 2, 1};
  for (int64_t n : sizes) bounds.push_back(bounds.back() + n);
  Tensor sums = full({8}, -1.0, {.dtype = DType::f64});
  for (int64_t step = 1; step <= 3; ++step) {
    ops::lamb_moments(p, g, m, v, u, bounds, rows, sums, step, h);
    ops::lamb_apply(p, u, bounds, rows, sums, h.lr);
  }
  CHECK(sums.data_ptr<double>()[4] == 0.0);  // the empty segment's sums are zero, not left
  CHECK(sums.data_ptr<double>()[5] == 0.0);
  // one call per parameter, each its own span
  for (size_t j = 0; j < sizes.size(); ++j) {
    const int64_t b = bounds[j], n = sizes[j];
    Tensor s1 = zeros({2}, {.dtype = DType::f64});
    for (int64_t step = 1; step <= 3; ++step) {
      ops::lamb_moments(p1.narrow(0, b, n), g.narrow(0, b, n), m1.narrow(0, b, n),
                        v1.narrow(0, b, n), u1.narrow(0, b, n), {0, n}, {0}, s1, step, h);
      ops::lamb_apply(p1.narrow(0, b, n), u1.narrow(0, b, n), {0, n}, {0}, s1, h.lr);
    }
  }
  CHECK(bits_equal(p, p1));
  CHECK(bits_equal(m, m1));
  CHECK(bits_equal(v, v1));
  CHECK(bits_equal(u, u1));
}

TEST_CASE(
    "lamb kernels: a parameter in pieces with summed norms equals the whole; per-piece "
    "norms do not") {
  LambHyper h{.lr = 0.05, .weight_decay = 0.01};
  Generator gen(9);
  const int64_t n = 1000, cut = 300;
  Tensor p0 = randn({n}, {}, &gen), g = randn({n}, {}, &gen);
  // whole parameter
  Tensor pw = p0.clone(), mw = zeros({n}), vw = zeros({n}), uw = zeros({n});
  Tensor sw = zeros({2}, {.dtype = DType::f64});
  ops::lamb_moments(pw, g, mw, vw, uw, {0, n}, {0}, sw, 1, h);
  ops::lamb_apply(pw, uw, {0, n}, {0}, sw, h.lr);
  // two pieces as two "ranks": each writes its partial sums, then they are added (the
  // all-reduce) before the apply phase
  Tensor pp = p0.clone(), mp = zeros({n}), vp = zeros({n}), up = zeros({n});
  Tensor sa = zeros({2}, {.dtype = DType::f64}), sb = zeros({2}, {.dtype = DType::f64});
  ops::lamb_moments(pp.narrow(0, 0, cut), g.narrow(0, 0, cut), mp.narrow(0, 0, cut),
                    vp.narrow(0, 0, cut), up.narrow(0, 0, cut), {0, cut}, {0}, sa, 1, h);
  ops::lamb_moments(pp.narrow(0, cut, n - cut), g.narrow(0, cut, n - cut),
                    mp.narrow(0, cut, n - cut), vp.narrow(0, cut, n - cut),
                    up.narrow(0, cut, n - cut), {0, n - cut}, {0}, sb, 1, h);
  Tensor per_piece = p0.clone();  // the moments phase leaves the parameter as it was
  Tensor summed = sa + sb;
  ops::lamb_apply(pp, up, {0, n}, {0}, summed, h.lr);
  // the sums differ from the whole's only in the order of additions (double): the ratio to
  // ~1e-15 relative, below float's rounding of lr * r in all but rare ties: 1e-6 relative
  SL_CHECK_CLOSE(pp, pw, 1e-6, 1e-7);
  CHECK(bits_equal(mp, mw));
  CHECK(bits_equal(vp, vw));
  // per-piece norms (what a ZeRO rank would get without the all-reduce) are a different update
  ops::lamb_apply(per_piece.narrow(0, 0, cut), up.narrow(0, 0, cut), {0, cut}, {0}, sa, h.lr);
  ops::lamb_apply(per_piece.narrow(0, cut, n - cut), up.narrow(0, cut, n - cut), {0, n - cut}, {0},
                  sb, h.lr);
  CHECK(max_abs(per_piece - pw) > 1e-4);
}

TEST_CASE("Lamb with bf16 parameters and master weights runs the f32 math on the master") {
  // The f32 run starts from the bf16 values and takes the bf16 gradients exactly (bf16 -> f32 is
  // exact), so the master copy must equal it bit for bit and the bf16 parameter be its rounding.
  TensorList p16 = make_params(DType::bf16);
  TensorList p32;
  for (const Tensor& p : p16) p32.push_back(p.detach().to(DType::f32).requires_grad_(true));
  LambOptions o{.lr = 0.01, .weight_decay = 0.05, .master_weights = true};
  Lamb a(p16, o), b(p32, o);
  for (int s = 1; s <= 4; ++s) {
    set_seeded_grads(p16, s);
    for (size_t k = 0; k < p16.size(); ++k) p32[k].set_grad(p16[k].grad().to(DType::f32));
    a.step();
    b.step();
  }
  for (size_t k = 0; k < p16.size(); ++k) {
    CAPTURE(k);
    const ParamState& st = a.state(0, k);
    REQUIRE(st.master.defined());
    CHECK(st.master.dtype() == DType::f32);
    CHECK(st.exp_avg.dtype() == DType::f32);
    CHECK(bits_equal(st.master.view_as(p32[k]), p32[k].detach()));
    CHECK(bits_equal(p16[k].detach(), p32[k].detach().to(DType::bf16)));
  }
}

TEST_CASE("Lamb state_dict: keys, resume bit-identical, type checked on load") {
  TensorList pa = make_params(), pb = make_params();
  LambOptions o{
      .lr = 0.02, .beta1 = 0.85, .eps = 1e-5, .weight_decay = 0.1, .bias_correction = false};
  Lamb a(pa, o);
  for (int s = 1; s <= 2; ++s) {
    set_seeded_grads(pa, s);
    a.step();
  }
  Section sd = a.state_dict();
  CHECK(sd.meta.at("optimizer").as_string() == "Lamb");
  CHECK(sd.tensors.contains("state.0.exp_avg"));
  CHECK(sd.tensors.contains("state.2.exp_avg_sq"));
  const Json& g0 = sd.meta.at("param_groups")[0];
  CHECK(g0.at("bias_correction").as_bool() == false);
  CHECK(g0.at("betas")[0].as_double() == 0.85);
  // serialized and loaded into a fresh optimizer with other options: they are restored
  Section through;
  through.tensors =
      serialize::deserialize_safetensors(serialize::serialize_safetensors(sd.tensors));
  through.meta = Json::parse(sd.meta.dump());
  for (size_t k = 0; k < pa.size(); ++k) Tensor(pb[k]).detach().copy_(pa[k].detach());
  Lamb b(pb);
  b.load_state_dict(through);
  CHECK(b.options(0).weight_decay == 0.1);
  CHECK(b.options(0).bias_correction == false);
  for (int s = 3; s <= 4; ++s) {
    set_seeded_grads(pa, s);
    set_seeded_grads(pb, s);
    a.step();
    b.step();
  }
  for (size_t k = 0; k < pa.size(); ++k) CHECK(bits_equal(pa[k], pb[k]));
  // another optimizer's state does not load, nor Lamb's into another
  AdamW adamw(make_params());
  SL_CHECK_THROWS(adamw.load_state_dict(through), ValueError, "saved state is for Lamb, not AdamW");
  SL_CHECK_THROWS(b.load_state_dict(adamw.state_dict()), ValueError,
                  "saved state is for AdamW, not Lamb");
}

TEST_CASE("Lamb error paths: hyperparameters and kernel operands") {
  TensorList ps = make_params();
  SL_CHECK_THROWS(Lamb(ps, {.lr = -0.1}), ValueError, "Lamb: invalid learning rate -0.1");
  SL_CHECK_THROWS(Lamb(ps, {.beta1 = 1.0}), ValueError, "invalid beta parameter at index 0: 1");
  SL_CHECK_THROWS(Lamb(ps, {.beta2 = -0.5}), ValueError, "invalid beta parameter at index 1: -0.5");
  SL_CHECK_THROWS(Lamb(ps, {.eps = -1e-6}), ValueError, "invalid epsilon value -1e-06");
  SL_CHECK_THROWS(Lamb(ps, {.weight_decay = std::nan("")}), ValueError,
                  "invalid weight_decay value nan");
  Lamb opt(ps);
  opt.options(0).lr = -1;  // made invalid after construction: step() checks again
  set_seeded_grads(ps, 1);
  SL_CHECK_THROWS(opt.step(), ValueError, "Lamb: invalid learning rate -1");
  SL_CHECK_THROWS(Lamb({zeros({2}, {.dtype = DType::i64})}), DTypeError, "floating");

  LambHyper h;
  Tensor p = zeros({6}), g = zeros({6}), m = zeros({6}), v = zeros({6}), u = zeros({6});
  Tensor sums = zeros({4}, {.dtype = DType::f64});
  SL_CHECK_THROWS((ops::lamb_moments(p, g, m, v, u, {0, 6}, {0}, sums, 0, h)), ValueError,
                  "lamb_moments: step must be >= 1");
  SL_CHECK_THROWS((ops::lamb_moments(p, g, m, v, u, {0, 3, 6}, {0}, sums, 1, h)), ShapeError,
                  "3 segment bounds for 1 rows");
  SL_CHECK_THROWS((ops::lamb_moments(p, g, m, v, u, {0, 5}, {0}, sums, 1, h)), ValueError,
                  "segment bounds must run from 0 to the span's 6 elements, got 0 .. 5");
  SL_CHECK_THROWS((ops::lamb_moments(p, g, m, v, u, {0, 4, 3, 6}, {0, 1, 0}, sums, 1, h)),
                  ValueError, "segment bounds must not decrease, got 4 then 3");
  SL_CHECK_THROWS((ops::lamb_moments(p, g, m, v, u, {0, 6}, {2}, sums, 1, h)), IndexError,
                  "row 2 of segment 0 out of range for sums of 4 elements");
  SL_CHECK_THROWS((ops::lamb_moments(p, g, m, v, u, {0, 6}, {0}, zeros({4}), 1, h)), DTypeError,
                  "lamb_moments: sums must be float64, got float32");
  SL_CHECK_THROWS((ops::lamb_moments(p, g, m, v, zeros({5}), {0, 6}, {0}, sums, 1, h)), ShapeError,
                  "update has 5 elements but param has 6");
  SL_CHECK_THROWS((ops::lamb_apply(p, u, {0, 6}, {0}, sums, INFINITY)), ValueError,
                  "lamb_apply: invalid learning rate inf");
  SL_CHECK_THROWS((ops::lamb_apply(p, zeros({6}, {.dtype = DType::f64}), {0, 6}, {0}, sums, 0.1)),
                  DTypeError, "lamb_apply: update has dtype float64 but param has float32");
}
