// EmbeddingBag against PyTorch 1.13 (fixture: embedding_bag, cases bag_*: every mode with
// offsets, 2-d input, include_last_offset, padding_idx, max_norm, per_sample_weights,
// scale_grad_by_freq, max's ties, empty input, from_pretrained; float32 and float64), float64
// gradchecks, and what PyTorch cannot serve as a reference for.
#include <cmath>

#include "fixture.h"
#include "nn/embedding_bag.h"
#include "nn/functional.h"

using namespace sl;
using sl::testing::Fixture;
using sl::testing::module_gradcheck;

namespace {
// f32: rtol 1e-5, atol 1e-6: sums of at most 4 rows (PyTorch's fbgemm kernel fuses the
// per-sample multiply-add, we round the product first) and max_norm's norm summed in another
// order: a few ulps. f64: 1e-12 / 1e-13 for the same reasons in double.
struct Tols {
  double rtol, atol;
};
Tols tols_for(DType dt) {
  return dt == DType::f64 ? Tols{1e-12, 1e-13} : Tols{1e-5, 1e-6};
}

/// Runs case `name` on m: output, weight and per_sample_weights gradients, the weight after
/// forward where the fixture has it (max_norm), and the repr (float32 cases).
void run_case(const Fixture& fx, const std::string& name, nn::EmbeddingBag& m, DType dt,
              bool load = true) {
  const std::string key = dt == DType::f64 ? name + "_f64" : name;
  CAPTURE(key);
  const Tols t = tols_for(dt);
  if (load) fx.load_params(m, key);
  Tensor x = fx.input(key, 0);
  Tensor offsets = fx.has(key + ".in.1") ? fx.input(key, 1) : Tensor();
  Tensor psw = fx.has(key + ".in.2") ? fx.input(key, 2) : Tensor();
  fx.check_backward(key, {m.forward(x, offsets, psw)}, {x, offsets, psw}, &m, t.rtol, t.atol);
  if (psw.defined()) REQUIRE(fx.has(key + ".gin.2"));
  if (fx.has(key + ".after.weight")) {
    SL_CHECK_CLOSE(m.weight.detach(), fx.get(key + ".after.weight"), t.rtol, t.atol);
  }
  if (dt == DType::f32) CHECK(m.str() == fx.meta(name + ".repr"));
}

nn::EmbeddingBagModuleOptions with(nn::EmbeddingBagModuleOptions o, DType dt) {
  o.tensor_options.dtype = dt;
  return o;
}

Tensor i64s(std::vector<int64_t> v) {
  return from_vector(v);
}
}  // namespace

TEST_CASE("EmbeddingBag matches PyTorch in every mode and option") {
  Fixture fx("embedding_bag");
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    for (std::string mode : {"sum", "mean", "max"}) {
      CAPTURE(mode);
      const std::string p = "bag_" + mode;
      nn::EmbeddingBag a(10, 4, with({.mode = mode}, dt));
      run_case(fx, p + "_offsets", a, dt);
      nn::EmbeddingBag b(10, 4, with({.mode = mode}, dt));
      run_case(fx, p + "_2d", b, dt);
      nn::EmbeddingBag c(10, 4, with({.mode = mode, .include_last_offset = true}, dt));
      run_case(fx, p + "_last_offset", c, dt);
      nn::EmbeddingBag d(10, 4, with({.mode = mode, .padding_idx = 2}, dt));
      run_case(fx, p + "_pad", d, dt);
      CHECK(d.weight.grad()[2].abs().sum().item<double>() == 0.0);
      nn::EmbeddingBag e(10, 4, with({.max_norm = 1.0, .mode = mode}, dt));
      run_case(fx, p + "_max_norm", e, dt);
      nn::EmbeddingBag f(10, 4, with({.mode = mode, .padding_idx = -1}, dt));
      CHECK(f.padding_idx.value() == 9);
      run_case(fx, p + "_2d_pad_neg", f, dt);
      nn::EmbeddingBag g(3, 2, with({.mode = mode}, dt));
      run_case(fx, p + "_empty_input", g, dt);
    }
    for (std::string mode : {"sum", "mean"}) {
      nn::EmbeddingBag m(10, 4,
                         with({.scale_grad_by_freq = true, .mode = mode, .padding_idx = 0}, dt));
      run_case(fx, "bag_" + mode + "_freq", m, dt);
    }
    nn::EmbeddingBag psw(10, 4, with({.mode = "sum"}, dt));
    run_case(fx, "bag_sum_psw", psw, dt);
    nn::EmbeddingBag psw_pad(10, 4, with({.mode = "sum", .padding_idx = 3}, dt));
    run_case(fx, "bag_sum_psw_2d_pad", psw_pad, dt);
    nn::EmbeddingBag psw_last(
        10, 4, with({.max_norm = 1.3, .mode = "sum", .include_last_offset = true}, dt));
    run_case(fx, "bag_sum_psw_last_offset_max_norm", psw_last, dt);
    nn::EmbeddingBag ties(5, 3, with({.mode = "max"}, dt));
    run_case(fx, "bag_max_ties", ties, dt);
    const std::string pre = dt == DType::f64 ? "bag_pretrained_mean_f64" : "bag_pretrained_mean";
    auto pm = nn::EmbeddingBag::from_pretrained(fx.get(pre + ".param.weight").clone(), false,
                                                {.mode = "mean", .padding_idx = 6});
    CHECK(pm->weight.requires_grad());
    run_case(fx, "bag_pretrained_mean", *pm, dt, /*load=*/false);
  }
  auto frozen = nn::EmbeddingBag::from_pretrained(randn({4, 3}));
  CHECK_FALSE(frozen->weight.requires_grad());
  CHECK(frozen->mode == EmbeddingBagMode::mean);
}

TEST_CASE("EmbeddingBag gradcheck in float64 (weight and per_sample_weights)") {
  const TensorOptions f64{.dtype = DType::f64};
  // offsets with an empty bag and a bag of padding only; max without ties (normal weights)
  Tensor idx = i64s({1, 4, 1, 0, 2, 2, 4, 7, 2, 3});
  Tensor offsets = i64s({0, 3, 3, 4, 6});
  for (std::string mode : {"sum", "mean", "max"}) {
    CAPTURE(mode);
    nn::EmbeddingBag m(8, 3, {.mode = mode, .padding_idx = 2, .tensor_options = f64});
    Tensor unused = zeros({1}, f64).requires_grad_();
    CHECK(
        module_gradcheck(m, [&](const TensorList&) { return m.forward(idx, offsets); }, {unused}));
    Tensor x2 = i64s({5, 1, 6, 6, 0, 3}).view({2, 3});
    CHECK(module_gradcheck(m, [&](const TensorList&) { return m.forward(x2); }, {unused}));
  }
  nn::EmbeddingBag s(8, 3, {.mode = "sum", .padding_idx = 2, .tensor_options = f64});
  Tensor psw = randn({10}, f64).requires_grad_();
  CHECK(module_gradcheck(s, [&](const TensorList& in) { return s.forward(idx, offsets, in[0]); },
                         {psw}));
  nn::EmbeddingBag last(8, 3, {.mode = "sum", .include_last_offset = true, .tensor_options = f64});
  CHECK(module_gradcheck(last,
                         [&](const TensorList& in) {
                           return last.forward(idx, i64s({0, 2, 2, 7}), in[0]);
                         },
                         {psw}));
}

TEST_CASE("EmbeddingBag: entries past include_last_offset's last offset are left out") {
  // PyTorch 1.13's forward leaves them out too, but its backward writes out of bounds for them,
  // so the reference is the same bags without those entries.
  for (std::string mode : {"sum", "mean", "max"}) {
    CAPTURE(mode);
    manual_seed(7);
    nn::EmbeddingBag a(6, 2, {.mode = mode, .include_last_offset = true});
    manual_seed(7);
    nn::EmbeddingBag b(6, 2, {.mode = mode, .include_last_offset = true});
    Tensor ya = a.forward(i64s({1, 2, 3, 4, 5}), i64s({0, 2, 3}));
    Tensor yb = b.forward(i64s({1, 2, 3}), i64s({0, 2, 3}));
    SL_CHECK_CLOSE(ya, yb, 0, 0);
    Tensor up = randn({2, 2});
    (ya * up).sum().backward();
    (yb * up).sum().backward();
    SL_CHECK_CLOSE(a.weight.grad(), b.weight.grad(), 0, 0);
    CHECK(a.weight.grad()[4].abs().sum().item<double>() == 0.0);
    CHECK(a.weight.grad()[5].abs().sum().item<double>() == 0.0);
  }
}

TEST_CASE("F::embedding_bag with int32 indices and offsets, 16-bit weights") {
  namespace F = sl::nn::functional;
  manual_seed(3);
  Tensor w = randn({6, 4});
  Tensor idx = i64s({5, 0, 0, 3, 1}), off = i64s({0, 2});
  for (EmbeddingBagMode mode :
       {EmbeddingBagMode::sum, EmbeddingBagMode::mean, EmbeddingBagMode::max}) {
    Tensor ref = F::embedding_bag(w, idx, {.offsets = off, .mode = mode});
    Tensor i32 =
        F::embedding_bag(w, idx.to(DType::i32), {.offsets = off.to(DType::i32), .mode = mode});
    SL_CHECK_CLOSE(i32, ref, 0, 0);
    // bfloat16: the same bags within bf16's rounding of the weight and the result (2^-8 each)
    Tensor bf = F::embedding_bag(w.to(DType::bf16), idx, {.offsets = off, .mode = mode});
    CHECK(bf.dtype() == DType::bf16);
    SL_CHECK_CLOSE(bf.to(DType::f32), ref, 2e-2, 2e-2);
  }
}
