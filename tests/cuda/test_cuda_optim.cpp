// The optim-fused family on CUDA: SGD / Adam / AdamW / RMSprop / Adagrad / Adamax / NAdam / RAdam
// steps give the CPU's bits
// (both backends round every statement of the update once, without FMA contraction: Note [Optimizer
// kernels over flat spans]), unscale/inf checks, norms, and GradScaler end to end with an injected
// inf.
#include <cmath>

#include "core/ops/optim.h"
#include "cuda_testing.h"
#include "optim/adam.h"
#include "optim/grad_scaler.h"
#include "optim/sgd.h"

using namespace sl;
using sl::testing::kGPU;

namespace {
struct PG {
  DType p, g;
};
const PG kPairs[] = {{DType::f32, DType::f32}, {DType::f64, DType::f64},
                     {DType::f16, DType::f16}, {DType::bf16, DType::bf16},
                     {DType::f32, DType::f16}, {DType::f32, DType::bf16}};
}  // namespace

TEST_CASE("cuda parity: fused SGD and Adam/AdamW steps are bit-identical to the CPU" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("optimizer kernels");
  manual_seed(21);
  for (PG pg : kPairs) {
    CAPTURE(pg.p);
    CAPTURE(pg.g);
    const int64_t n = 1037;
    Tensor p0 = randn({n}).to(pg.p), g0 = randn({n}).to(pg.g);
    for (int variant = 0; variant < 3; ++variant) {
      CAPTURE(variant);
      SgdHyper sh;
      sh.lr = 0.05;
      sh.momentum = variant == 0 ? 0.0 : 0.9;
      sh.dampening = variant == 2 ? 0.1 : 0.0;
      sh.weight_decay = variant == 1 ? 1e-2 : 0.0;
      sh.nesterov = variant == 1;
      sh.maximize = variant == 2;
      Tensor pc = p0.clone(), pgpu = p0.to(kGPU);
      Tensor bc = zeros({n}, {.dtype = pg.p}), bg = bc.to(kGPU);
      for (int step = 0; step < 3; ++step) {
        Tensor buf_c = sh.momentum != 0 ? bc : Tensor(), buf_g = sh.momentum != 0 ? bg : Tensor();
        ops::sgd_step(pc, g0, buf_c, sh, step == 0);
        ops::sgd_step(pgpu, g0.to(kGPU), buf_g, sh, step == 0);
      }
      SL_CHECK_CLOSE(pgpu.cpu(), pc, 0, 0);
      SL_CHECK_CLOSE(bg.cpu(), bc, 0, 0);

      AdamHyper ah;
      ah.lr = 1e-2;
      ah.weight_decay = variant == 0 ? 0.0 : 1e-2;
      ah.decoupled_weight_decay = variant == 1;
      ah.amsgrad = variant == 2;
      ah.maximize = variant == 2;
      Tensor qc = p0.clone(), qg = p0.to(kGPU);
      Tensor mc = zeros({n}, {.dtype = pg.p}), vc = zeros({n}, {.dtype = pg.p});
      Tensor xc = zeros({n}, {.dtype = pg.p});
      Tensor mg = mc.to(kGPU), vg = vc.to(kGPU), xg = xc.to(kGPU);
      for (int64_t step = 1; step <= 3; ++step) {
        ops::adam_step(qc, g0, mc, vc, ah.amsgrad ? xc : Tensor(), step, ah);
        ops::adam_step(qg, g0.to(kGPU), mg, vg, ah.amsgrad ? xg : Tensor(), step, ah);
      }
      SL_CHECK_CLOSE(qg.cpu(), qc, 0, 0);
      SL_CHECK_CLOSE(mg.cpu(), mc, 0, 0);
      SL_CHECK_CLOSE(vg.cpu(), vc, 0, 0);
      if (ah.amsgrad) SL_CHECK_CLOSE(xg.cpu(), xc, 0, 0);
    }
  }
}

TEST_CASE("cuda parity: fused RMSprop and Adagrad steps are bit-identical to the CPU" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("optimizer kernels");
  manual_seed(23);
  for (PG pg : kPairs) {
    CAPTURE(pg.p);
    CAPTURE(pg.g);
    const int64_t n = 1037;
    Tensor p0 = randn({n}).to(pg.p), g0 = randn({n}).to(pg.g);
    for (int variant = 0; variant < 4; ++variant) {
      CAPTURE(variant);
      RmspropHyper rh;
      rh.lr = 1e-2;
      rh.alpha = variant == 3 ? 0.9 : 0.99;
      rh.eps = variant == 3 ? 1e-3 : 1e-8;
      rh.momentum = variant == 1 || variant == 2 ? 0.9 : 0.0;
      rh.centered = variant >= 2;
      rh.weight_decay = variant == 3 ? 1e-2 : 0.0;
      rh.maximize = variant == 3;
      Tensor pc = p0.clone(), pgpu = p0.to(kGPU);
      Tensor sc = zeros({n}, {.dtype = pg.p}), ac = zeros({n}, {.dtype = pg.p});
      Tensor bc = zeros({n}, {.dtype = pg.p});
      Tensor sg = sc.to(kGPU), ag = ac.to(kGPU), bg = bc.to(kGPU);
      for (int step = 0; step < 3; ++step) {
        ops::rmsprop_step(pc, g0, sc, rh.centered ? ac : Tensor(), rh.momentum > 0 ? bc : Tensor(),
                          rh);
        ops::rmsprop_step(pgpu, g0.to(kGPU), sg, rh.centered ? ag : Tensor(),
                          rh.momentum > 0 ? bg : Tensor(), rh);
      }
      SL_CHECK_CLOSE(pgpu.cpu(), pc, 0, 0);
      SL_CHECK_CLOSE(sg.cpu(), sc, 0, 0);
      SL_CHECK_CLOSE(ag.cpu(), ac, 0, 0);
      SL_CHECK_CLOSE(bg.cpu(), bc, 0, 0);

      AdagradHyper dh;
      dh.lr = 0.05;
      dh.lr_decay = variant == 1 ? 0.3 : 0.0;
      dh.weight_decay = variant == 2 ? 1e-2 : 0.0;
      dh.eps = variant == 3 ? 1e-3 : 1e-10;
      dh.maximize = variant == 3;
      Tensor qc = p0.clone(), qg = p0.to(kGPU);
      Tensor uc = full({n}, variant == 2 ? 0.1 : 0.0, {.dtype = pg.p}), ug = uc.to(kGPU);
      for (int64_t step = 1; step <= 3; ++step) {
        ops::adagrad_step(qc, g0, uc, step, dh);
        ops::adagrad_step(qg, g0.to(kGPU), ug, step, dh);
      }
      SL_CHECK_CLOSE(qg.cpu(), qc, 0, 0);
      SL_CHECK_CLOSE(ug.cpu(), uc, 0, 0);
    }
  }
}

TEST_CASE("cuda parity: fused Adamax, NAdam and RAdam steps are bit-identical to the CPU" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("optimizer kernels");
  manual_seed(24);
  for (PG pg : kPairs) {
    CAPTURE(pg.p);
    CAPTURE(pg.g);
    const int64_t n = 1037;
    Tensor p0 = randn({n}).to(pg.p);
    for (int variant = 0; variant < 3; ++variant) {
      CAPTURE(variant);
      const double wd = variant == 1 ? 1e-2 : 0.0, eps = variant == 2 ? 1e-3 : 1e-8;
      const AdamaxHyper xh{.lr = 0.01, .eps = eps, .weight_decay = wd, .maximize = variant == 2};
      const NadamHyper nh{
          .lr = 0.01, .eps = eps, .weight_decay = wd, .momentum_decay = variant == 2 ? 0.1 : 4e-3};
      // beta2 0.9: rho_t > 5 from step 6, so 7 steps take both of RAdam's branches
      const RadamHyper rh{.lr = 0.01, .beta2 = 0.9, .eps = eps, .weight_decay = wd};
      auto zc = [&] { return zeros({n}, {.dtype = pg.p}); };
      Tensor xp = p0.clone(), xm = zc(), xu = zc(), np = p0.clone(), nm = zc(), nv = zc();
      Tensor rp = p0.clone(), rm = zc(), rv = zc();
      Tensor xpg = xp.to(kGPU), xmg = xm.to(kGPU), xug = xu.to(kGPU);
      Tensor npg = np.to(kGPU), nmg = nm.to(kGPU), nvg = nv.to(kGPU);
      Tensor rpg = rp.to(kGPU), rmg = rm.to(kGPU), rvg = rv.to(kGPU);
      double mu_product = 1.0;
      for (int64_t step = 1; step <= 7; ++step) {
        Tensor g = (randn({n}) * (step % 3 + 0.5)).to(pg.g), gg = g.to(kGPU);
        mu_product = nadam_mu_product(nh, step, mu_product);
        ops::adamax_step(xp, g, xm, xu, step, xh);
        ops::adamax_step(xpg, gg, xmg, xug, step, xh);
        ops::nadam_step(np, g, nm, nv, step, mu_product, nh);
        ops::nadam_step(npg, gg, nmg, nvg, step, mu_product, nh);
        ops::radam_step(rp, g, rm, rv, step, rh);
        ops::radam_step(rpg, gg, rmg, rvg, step, rh);
      }
      for (auto [a, b] : {std::pair{xpg, xp},
                          {xmg, xm},
                          {xug, xu},
                          {npg, np},
                          {nmg, nm},
                          {nvg, nv},
                          {rpg, rp},
                          {rmg, rm},
                          {rvg, rv}}) {
        SL_CHECK_CLOSE(a.cpu(), b, 0, 0);
      }
    }
  }
}

TEST_CASE("cuda parity: LAMB's two phases over a span of several parameters match the CPU" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("LAMB kernels");
  manual_seed(22);
  const std::vector<int64_t> bounds{0, 300, 300, 1037}, rows{2, 0, 1};
  for (PG pg : kPairs) {
    CAPTURE(pg.p);
    CAPTURE(pg.g);
    const int64_t n = bounds.back();
    Tensor p0 = randn({n}).to(pg.p), g0 = randn({n}).to(pg.g);
    LambHyper h{.lr = 0.01, .weight_decay = 0.02};
    Tensor pc = p0.clone(), pgpu = p0.to(kGPU);
    Tensor mc = zeros({n}, {.dtype = pg.p}), vc = zeros({n}, {.dtype = pg.p});
    Tensor uc = zeros({n}, {.dtype = pg.p});
    Tensor mg = mc.to(kGPU), vg = vc.to(kGPU), ug = uc.to(kGPU);
    Tensor sc = zeros({6}, {.dtype = DType::f64}), sg = sc.to(kGPU);
    for (int64_t step = 1; step <= 3; ++step) {
      ops::lamb_moments(pc, g0, mc, vc, uc, bounds, rows, sc, step, h);
      ops::lamb_moments(pgpu, g0.to(kGPU), mg, vg, ug, bounds, rows, sg, step, h);
      // the moments and the update are element-wise, each operation rounded once: same bits
      SL_CHECK_CLOSE(mg.cpu(), mc, 0, 0);
      SL_CHECK_CLOSE(vg.cpu(), vc, 0, 0);
      SL_CHECK_CLOSE(ug.cpu(), uc, 0, 0);
      // the squared norms are summed in double in another order: double rounding
      SL_CHECK_CLOSE(sg.cpu(), sc, 1e-12, 0);
      ops::lamb_apply(pc, uc, bounds, rows, sc, h.lr);
      ops::lamb_apply(pgpu, ug, bounds, rows, sg, h.lr);
      // the ratio differs by double rounding, which can move lr * r by one float ulp; in a
      // 16-bit parameter that can round to the neighbouring value (one ulp of the type)
      const double rtol = pg.p == DType::bf16 ? 8e-3 : (pg.p == DType::f16 ? 1e-3 : 1e-6);
      SL_CHECK_CLOSE(pgpu.cpu(), pc, rtol, 1e-7);
      pgpu = pc.to(kGPU);  // continue from the same values
    }
  }
}

TEST_CASE("cuda: unscale_check_ flags inf/NaN and scales; norm_partial matches the CPU" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("unscale and norms");
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    CAPTURE(dt);
    Tensor g = randn({5000}).to(dt);
    Tensor flag = zeros({1}, {.device = kGPU});
    Tensor gg = g.to(kGPU);
    ops::unscale_check_(gg, flag, 0.25);
    CHECK(flag.item<float>() == 0.0f);
    Tensor gc = g.clone(), fc = zeros({1});
    ops::unscale_check_(gc, fc, 0.25);
    SL_CHECK_CLOSE(gg.cpu(), gc, 0, 0);
    gg.narrow(0, 4321, 1).fill_(INFINITY);
    ops::unscale_check_(gg, flag, 0.5);
    CHECK(flag.item<float>() == 1.0f);
    ops::unscale_check_(g.to(kGPU), flag, 0.5);  // never cleared
    CHECK(flag.item<float>() == 1.0f);
    for (double p : {1.0, 2.0, 3.0, double(INFINITY)}) {
      CAPTURE(p);
      // both accumulate in double, in different orders: agreement to double rounding
      double a = ops::norm_partial(g.to(kGPU), p), b = ops::norm_partial(g, p);
      CHECK(std::fabs(a - b) <= 1e-12 * std::fabs(b));
    }
    Tensor with_nan = g.clone();
    with_nan.narrow(0, 17, 1).fill_(NAN);
    CHECK(std::isnan(ops::norm_partial(with_nan.to(kGPU), 2.0)));
    CHECK(std::isnan(ops::norm_partial(with_nan.to(kGPU), INFINITY)));
  }
}

TEST_CASE("cuda: GradScaler skips the step with an injected inf and backs off, as on the CPU" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("GradScaler on CUDA");
  for (Device dev : {kCPU, kGPU}) {
    CAPTURE(dev);
    Tensor w = ones({4}, {.device = dev}).requires_grad_();
    optim::SGD opt({w}, {.lr = 0.1});
    optim::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 2});
    // clean step
    scaler.scale((w * 2.0).sum()).backward();
    CHECK(scaler.step(opt));
    scaler.update();
    SL_CHECK_CLOSE(w.detach().cpu(), full({4}, 0.8f), 1e-6, 1e-6);
    // inf in the gradient: skipped, scale halved
    opt.zero_grad();
    scaler.scale((w * INFINITY).sum()).backward();
    CHECK(!scaler.step(opt));
    scaler.update();
    CHECK(scaler.get_scale() == 512.0);
    SL_CHECK_CLOSE(w.detach().cpu(), full({4}, 0.8f), 0, 0);
  }
}

TEST_CASE("memory: 100 AdamW steps hold the predicted bytes, and the peak stays in its band") {
  // A two-layer MLP trained with AdamW; after each step (gradients set to none) the device holds
  // exactly the parameters, AdamW's exp_avg and exp_avg_sq (one copy of the parameters each) and
  // the data. The peak of a step lies between that plus the gradients (all present at the
  // optimizer step) and that plus the gradients plus four times the forward activations (saved
  // activations and the backward's temporaries of the same sizes). Runs on the CPU everywhere,
  // so the prediction itself is checked on every machine.
  const int64_t B = 64, I = 32, H = 256, O = 8, F = 4;  // F: bytes per float
  const int64_t P = F * (H * I + H + O * H + O);
  const int64_t data = F * (B * I + B * O);
  const int64_t activations = F * (2 * B * H + 3 * B * O + 1);
  const int64_t steady = 3 * P + data;
  for (Device dev : {kCPU, kGPU}) {
    CAPTURE(dev);
    if (dev.kind == DeviceKind::cuda && !cuda::is_available()) {
      sl::testing::report_skip("CUDA test: memory across 100 AdamW steps", "no GPU visible");
      continue;
    }
    manual_seed(23);
    const MemoryStats before = memory_stats(dev);
    Tensor x = randn({B, I}).to(dev), target = randn({B, O}).to(dev);
    Tensor w1 = (randn({H, I}) * 0.1).to(dev).requires_grad_();
    Tensor b1 = zeros({H}).to(dev).requires_grad_();
    Tensor w2 = (randn({O, H}) * 0.1).to(dev).requires_grad_();
    Tensor b2 = zeros({O}).to(dev).requires_grad_();
    optim::AdamW opt({w1, b1, w2, b2}, {.lr = 1e-3});
    auto step = [&] {
      Tensor loss = (linear(relu(linear(x, w1, b1)), w2, b2) - target).square().mean();
      loss.backward();
      opt.step();
      opt.zero_grad();
      return loss.item<float>();
    };
    const float first = step();
    const MemoryStats s1 = memory_stats(dev);
    CHECK(s1.live_bytes - before.live_bytes == steady);
    reset_peak_memory_stats(dev);
    float last = first;
    for (int i = 0; i < 99; ++i) last = step();
    const MemoryStats s100 = memory_stats(dev);
    CHECK(s100.live_bytes == s1.live_bytes);
    CHECK(s100.live_allocs == s1.live_allocs);
    if (dev.kind == DeviceKind::cuda) CHECK(s100.reserved_bytes == s1.reserved_bytes);
    const int64_t peak = s100.peak_bytes - before.live_bytes;
    CHECK(peak >= steady + P);
    CHECK(peak <= steady + P + 4 * activations);
    CHECK(last < first);  // it trains
  }
}
