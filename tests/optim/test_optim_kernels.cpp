// The optim-fused kernels over flat spans: shard-invariance, thread-count invariance, mixed
// precision, and every error path of the ops:: wrappers.
#include <algorithm>
#include <cmath>

#include "support/testing.h"

using namespace sl;

namespace {

/// A plain double-precision Adam/AdamW step written from PyTorch's documented algorithm, as an
/// independent reference for the fused kernel.
void adam_reference(std::vector<double>& p, const std::vector<double>& g, std::vector<double>& m,
                    std::vector<double>& v, std::vector<double>& vmax, int64_t step,
                    const AdamHyper& h) {
  double bc1 = 1 - std::pow(h.beta1, static_cast<double>(step));
  double bc2 = 1 - std::pow(h.beta2, static_cast<double>(step));
  for (size_t i = 0; i < p.size(); ++i) {
    double gi = h.maximize ? -g[i] : g[i];
    if (h.decoupled_weight_decay) {
      p[i] *= 1 - h.lr * h.weight_decay;
    } else {
      gi += h.weight_decay * p[i];
    }
    m[i] = h.beta1 * m[i] + (1 - h.beta1) * gi;
    v[i] = h.beta2 * v[i] + (1 - h.beta2) * gi * gi;
    double vh = v[i];
    if (h.amsgrad) {
      vmax[i] = std::max(vmax[i], v[i]);
      vh = vmax[i];
    }
    p[i] -= h.lr / bc1 * m[i] / (std::sqrt(vh) / std::sqrt(bc2) + h.eps);
  }
}

}  // namespace

// f64 against an independent f64 reference: both compute in double, differing only in the
// grouping of a few operations (rtol 1e-12).
TEST_CASE("adam_step kernel matches an independent double reference (f64, all options)") {
  for (bool decoupled : {false, true}) {
    for (bool amsgrad : {false, true}) {
      CAPTURE(decoupled);
      CAPTURE(amsgrad);
      AdamHyper h{.lr = 0.05,
                  .beta1 = 0.8,
                  .beta2 = 0.95,
                  .eps = 1e-6,
                  .weight_decay = 0.1,
                  .amsgrad = amsgrad,
                  .maximize = decoupled,
                  .decoupled_weight_decay = decoupled};
      const int64_t n = 2500;  // crosses chunk boundaries (1024) with a remainder
      Generator gen(7);
      Tensor p = randn({n}, {.dtype = DType::f64}, &gen);
      Tensor m = zeros({n}, {.dtype = DType::f64}), v = zeros_like(m), vm = zeros_like(m);
      std::vector<double> rp = p.to_vector<double>(), rm(n, 0.0), rv(n, 0.0), rvm(n, 0.0);
      for (int64_t s = 1; s <= 4; ++s) {
        Tensor g = randn({n}, {.dtype = DType::f64}, &gen).mul(static_cast<double>(s));
        ops::adam_step(p, g, m, v, vm, s, h);
        adam_reference(rp, g.to_vector<double>(), rm, rv, rvm, s, h);
      }
      SL_CHECK_CLOSE(p, from_vector(rp), 1e-12, 1e-14);
      SL_CHECK_CLOSE(m, from_vector(rm), 1e-12, 1e-14);
      SL_CHECK_CLOSE(v, from_vector(rv), 1e-12, 1e-16);
    }
  }
}

TEST_CASE("optimizer kernels on views into one flat buffer equal per-tensor updates, bitwise") {
  // Note [Optimizer kernels over flat spans]: element i depends only on element i, so a shard
  // of a flat buffer gives exactly the bits of the whole tensors.
  Generator gen(3);
  Tensor flat_p = randn({5000}, {}, &gen), flat_g = randn({5000}, {}, &gen);
  Tensor a = flat_p.narrow(0, 0, 1200).clone().view({40, 30});
  Tensor b = flat_p.narrow(0, 1200, 3800).clone();
  Tensor fm = zeros({5000}), fv = zeros({5000});
  Tensor am = zeros({40, 30}), av = zeros({40, 30}), bm = zeros({3800}), bv = zeros({3800});
  AdamHyper h{.lr = 0.01, .weight_decay = 0.01, .decoupled_weight_decay = true};
  for (int64_t s = 1; s <= 3; ++s) {
    // the "shards" of the flat buffer: two views, updated separately
    for (auto [off, len] : {std::pair<int64_t, int64_t>{0, 2500}, {2500, 2500}}) {
      ops::adam_step(flat_p.narrow(0, off, len), flat_g.narrow(0, off, len), fm.narrow(0, off, len),
                     fv.narrow(0, off, len), Tensor(), s, h);
    }
    ops::adam_step(a, flat_g.narrow(0, 0, 1200).view({40, 30}), am, av, Tensor(), s, h);
    ops::adam_step(b, flat_g.narrow(0, 1200, 3800), bm, bv, Tensor(), s, h);
  }
  CHECK(flat_p.narrow(0, 0, 1200).to_vector<float>() == a.contiguous().to_vector<float>());
  CHECK(flat_p.narrow(0, 1200, 3800).to_vector<float>() == b.to_vector<float>());
  CHECK(fv.narrow(0, 1200, 3800).to_vector<float>() == bv.to_vector<float>());
}

// Note [Eigen's fast math]: with Eigen's default approximate packet sqrt, an element's update
// depended on whether it fell in a vector packet or in a chunk's scalar tail. Each element updated
// alone (a span of one: always the scalar path) must give the bits of the whole-span update.
// The second moments spread over many magnitudes, so that an approximate root misses the
// correctly rounded one somewhere. (Lamb's kernel: its span case in test_lamb.cpp.)
TEST_CASE("optimizer kernels: an element's update does not depend on its place in the span") {
  manual_seed(31);
  const int64_t n = 20000;
  const Tensor p0 = randn({n}), g = randn({n}) * exp(randn({n}) * 3.0);
  const Tensor m0 = randn({n}) * 0.1, v0 = exp(randn({n}) * 4.0);
  const AdamHyper h{.lr = 0.01, .weight_decay = 0.1, .decoupled_weight_decay = true};
  Tensor p = p0.clone(), m = m0.clone(), v = v0.clone();
  ops::adam_step(p, g, m, v, Tensor(), 3, h);
  Tensor q = p0.clone(), qm = m0.clone(), qv = v0.clone();
  for (int64_t i = 0; i < n; ++i) {
    ops::adam_step(q.narrow(0, i, 1), g.narrow(0, i, 1), qm.narrow(0, i, 1), qv.narrow(0, i, 1),
                   Tensor(), 3, h);
  }
  SL_CHECK_CLOSE(q, p, 0, 0);
}

TEST_CASE("optimizer kernels give the same bits with 1 and 2 threads") {
  int saved = get_num_threads();
  auto run = [](int threads) {
    set_num_threads(threads);
    Generator gen(11);
    const int64_t n = 300000;  // above the per-thread grain, so 2 threads split it
    Tensor p = randn({n}, {}, &gen), g = randn({n}, {}, &gen);
    Tensor m = zeros({n}), v = zeros({n}), vm = zeros({n}), buf = zeros({n});
    AdamHyper h{.lr = 0.01, .amsgrad = true};
    ops::adam_step(p, g, m, v, vm, 1, h);
    ops::adam_step(p, g, m, v, vm, 2, h);
    ops::sgd_step(p, g, buf, SgdHyper{.lr = 0.1, .momentum = 0.9, .nesterov = true}, true);
    double norm = ops::norm_partial(p, 2.0);
    return std::make_pair(p.to_vector<float>(), norm);
  };
  auto one = run(1), two = run(2);
  set_num_threads(saved);
  CHECK(one.first == two.first);
  CHECK(one.second == two.second);
}

// torch.maximum propagates NaN, so PyTorch's amsgrad max_exp_avg_sq turns NaN wherever a NaN
// gradient made exp_avg_sq NaN. 37 elements: NaNs in the vectorised body (0, 5, 17) and in the
// scalar tail (33, 36) of both 8- and 16-lane loops; Eigen's default max, used before, kept the
// old maximum at all of them.
TEST_CASE("amsgrad's running max propagates NaN in every element position (f32, f64)") {
  const std::vector<int64_t> nan_at = {0, 5, 17, 33, 36};
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dt));
    Generator gen(3);
    TensorOptions o{.dtype = dt};
    Tensor p = randn({37}, o, &gen), g = randn({37}, o, &gen);
    Tensor m = zeros({37}, o), v = zeros({37}, o), vm = zeros({37}, o);
    AdamHyper h{.lr = 0.01, .amsgrad = true};
    ops::adam_step(p, g, m, v, vm, 1, h);
    std::vector<double> gv = g.to(DType::f64).to_vector<double>();
    for (int64_t i : nan_at) gv[static_cast<size_t>(i)] = std::nan("");
    ops::adam_step(p, from_vector(gv).to(dt), m, v, vm, 2, h);
    std::vector<double> got = vm.to(DType::f64).to_vector<double>();
    for (int64_t i = 0; i < 37; ++i) {
      CAPTURE(i);
      bool want_nan = std::find(nan_at.begin(), nan_at.end(), i) != nan_at.end();
      CHECK(std::isnan(got[static_cast<size_t>(i)]) == want_nan);
    }
  }
}

TEST_CASE("fp32 master update from a bf16 gradient equals the update from its f32 value") {
  Generator gen(5);
  Tensor p1 = randn({777}, {}, &gen);
  Tensor p2 = p1.clone();
  Tensor g16 = randn({777}, {.dtype = DType::bf16}, &gen);
  Tensor g32 = g16.to(DType::f32);  // exact: every bf16 is a float
  Tensor m1 = zeros({777}), v1 = zeros({777}), m2 = zeros({777}), v2 = zeros({777});
  AdamHyper h{.lr = 0.01};
  ops::adam_step(p1, g16, m1, v1, Tensor(), 1, h);
  ops::adam_step(p2, g32, m2, v2, Tensor(), 1, h);
  CHECK(p1.to_vector<float>() == p2.to_vector<float>());
  Tensor b1 = zeros({777});
  Tensor b2 = zeros({777});
  ops::sgd_step(p1, g16, b1, {.lr = 0.1, .momentum = 0.9}, true);
  ops::sgd_step(p2, g32, b2, {.lr = 0.1, .momentum = 0.9}, true);
  CHECK(p1.to_vector<float>() == p2.to_vector<float>());
}

// bf16 params without master weights compute in float and round the stored values to bf16
// after every step (as a bf16 torch param would): tolerance of a few bf16 ulp (2^-8 relative).
TEST_CASE("bf16 and f16 params are updated in float and stored rounded") {
  for (DType dt : {DType::bf16, DType::f16}) {
    CAPTURE(dt);
    Generator gen(9);
    Tensor p32 = randn({100}, {}, &gen);
    Tensor g32 = randn({100}, {}, &gen);
    Tensor p = p32.to(dt), g = g32.to(dt);
    Tensor ref = p.to(DType::f32);
    Tensor m = zeros({100}, {.dtype = dt}), v = zeros({100}, {.dtype = dt});
    Tensor rm = zeros({100}), rv = zeros({100});
    ops::adam_step(p, g, m, v, Tensor(), 1, {.lr = 0.1});
    ops::adam_step(ref, g.to(DType::f32), rm, rv, Tensor(), 1, {.lr = 0.1});
    SL_CHECK_CLOSE(p.to(DType::f32), ref, 1e-2, 1e-3);
  }
}

TEST_CASE("unscale_check_ and norm_partial") {
  Tensor g = tensor({2.f, -4.f, 8.f});
  Tensor found = zeros({1});
  ops::unscale_check_(g, found, 0.5);
  CHECK(g.to_vector<float>() == std::vector<float>{1.f, -2.f, 4.f});
  CHECK(found.item<float>() == 0.f);
  Tensor bad = tensor({1.f, INFINITY, 3.f});
  ops::unscale_check_(bad, found, 0.5);
  CHECK(found.item<float>() == 1.f);
  ops::unscale_check_(g, found, 1.0);  // never clears the flag
  CHECK(found.item<float>() == 1.f);
  Tensor nan = tensor({NAN});
  Tensor f2 = zeros({1});
  ops::unscale_check_(nan, f2, 1.0);
  CHECK(f2.item<float>() == 1.f);

  Tensor x = tensor({3.0, -4.0});
  CHECK(ops::norm_partial(x, 2.0) == 25.0);
  CHECK(ops::norm_partial(x, 1.0) == 7.0);
  CHECK(ops::norm_partial(x, INFINITY) == 4.0);
  CHECK(ops::norm_partial(x, 3.0) == doctest::Approx(91.0).epsilon(1e-14));
  CHECK(std::isnan(ops::norm_partial(tensor({1.f, NAN}), INFINITY)));
  CHECK(ops::norm_partial(zeros({0}), 2.0) == 0.0);
}

TEST_CASE("optim kernels: error paths name the op and the operand") {
  Tensor p = zeros({4}), g = zeros({4}), m = zeros({4}), v = zeros({4});
  SL_CHECK_THROWS(ops::adam_step(p, zeros({5}), m, v, Tensor(), 1, {}), ShapeError,
                  "adam_step: grad has 5 elements but param has 4");
  SL_CHECK_THROWS(ops::adam_step(p, g, zeros({4}, {.dtype = DType::f64}), v, Tensor(), 1, {}),
                  DTypeError, "adam_step: exp_avg has dtype float64 but param has float32");
  SL_CHECK_THROWS(ops::adam_step(p, g.to(DType::f64), m, v, Tensor(), 1, {}), DTypeError,
                  "adam_step: grad of dtype float64 does not fit a param of dtype float32");
  SL_CHECK_THROWS(ops::adam_step(p, g, m, v, Tensor(), 0, {}), ValueError,
                  "adam_step: step must be >= 1");
  SL_CHECK_THROWS(ops::adam_step(p, g, m, v, Tensor(), 1, {.amsgrad = true}), ValueError,
                  "adam_step: max_exp_avg_sq is an undefined tensor");
  SL_CHECK_THROWS(ops::adam_step(p, g, m, v, Tensor(), 1, {.beta1 = 1.0}), ValueError,
                  "invalid beta parameter at index 0: 1");
  SL_CHECK_THROWS(ops::adam_step(p, g, m, v, Tensor(), 1, {.lr = -1}), ValueError,
                  "adam_step: invalid learning rate -1");
  SL_CHECK_THROWS(ops::adam_step(p, g, m, v, Tensor(), 1, {.eps = NAN}), ValueError,
                  "invalid epsilon value");
  Tensor p2 = zeros({2, 2});
  SL_CHECK_THROWS(ops::adam_step(p2.t(), g.view({2, 2}), m, v, Tensor(), 1, {}), ValueError,
                  "adam_step: param must be contiguous");
  SL_CHECK_THROWS(ops::adam_step(zeros({4}, {.dtype = DType::i64}), g, m, v, Tensor(), 1, {}),
                  DTypeError, "adam_step: param must be floating, got int64");
  SL_CHECK_THROWS(
      ops::adam_step(p, zeros({4}, {.device = Device(DeviceKind::cpu, 1)}), m, v, Tensor(), 1, {}),
      DeviceError, "adam_step");
  SL_CHECK_THROWS(ops::sgd_step(p, g, Tensor(), {.momentum = 0.9}, true), ValueError,
                  "sgd_step: momentum_buf is an undefined tensor");
  SL_CHECK_THROWS(ops::sgd_step(p, g, m, {.nesterov = true}, true), ValueError,
                  "sgd_step: nesterov momentum requires a momentum > 0 and zero dampening");
  SL_CHECK_THROWS(ops::sgd_step(p, g, m, {.weight_decay = -0.1}, false), ValueError,
                  "invalid weight_decay value -0.1");
  SL_CHECK_THROWS(ops::unscale_check_(g, zeros({2}), 1.0), ShapeError,
                  "unscale_check_: found_inf must have one element");
  SL_CHECK_THROWS(ops::unscale_check_(g, zeros({1}, {.dtype = DType::f64}), 1.0), DTypeError,
                  "found_inf must be float32");
  SL_CHECK_THROWS(ops::norm_partial(g, 0.0), ValueError, "norm type must be > 0");
  SL_CHECK_THROWS(ops::norm_partial(Tensor(), 2.0), ValueError, "norm_partial");
}
