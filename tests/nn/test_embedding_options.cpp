// Embedding's PyTorch 1.13 options against PyTorch (fixture: embedding_bag, cases emb_*):
// max_norm (the weight renormalised in place before the lookup), norm_type, scale_grad_by_freq,
// from_pretrained; sparse refused. float32 and float64.
#include "autograd/ops/embedding_bag.h"
#include "fixture.h"
#include "nn/embedding.h"
#include "nn/functional.h"

using namespace sl;
using sl::testing::Fixture;

namespace {
// f32: rtol 1e-5, atol 1e-6: a lookup, a scatter-add of a few rows, and max_norm's norm of 4
// values summed in another order than PyTorch's (an ulp or two). f64: 1e-12 / 1e-13 for the same
// reasons in double (PyTorch's gradient add is a fused multiply-add, ours rounds the product).
struct Tols {
  double rtol, atol;
};
Tols tols_for(DType dt) {
  return dt == DType::f64 ? Tols{1e-12, 1e-13} : Tols{1e-5, 1e-6};
}

/// Runs `name` (+ "_f64") on m: output, weight gradient, and the weight after forward where the
/// fixture has it (max_norm).
void run_case(const Fixture& fx, const std::string& name, nn::Embedding& m, DType dt,
              bool load = true) {
  CAPTURE(name);
  const Tols t = tols_for(dt);
  if (load) fx.load_params(m, name);
  Tensor x = fx.input(name, 0);
  fx.check_backward(name, {m.forward(x)}, {x}, &m, t.rtol, t.atol);
  if (fx.has(name + ".after.weight")) {
    SL_CHECK_CLOSE(m.weight.detach(), fx.get(name + ".after.weight"), t.rtol, t.atol);
  }
}

std::string suffixed(const std::string& name, DType dt) {
  return dt == DType::f64 ? name + "_f64" : name;
}
}  // namespace

TEST_CASE("Embedding max_norm / norm_type / scale_grad_by_freq match PyTorch") {
  Fixture fx("embedding_bag");
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    const TensorOptions to{.dtype = dt};
    nn::Embedding a(10, 4, {.max_norm = 1.0, .tensor_options = to});
    run_case(fx, suffixed("emb_max_norm", dt), a, dt);
    nn::Embedding b(10, 4,
                    {.padding_idx = 0, .max_norm = 1.5, .norm_type = 1.0, .tensor_options = to});
    run_case(fx, suffixed("emb_max_norm_p1_pad", dt), b, dt);
    CHECK(b.weight.grad()[0].abs().sum().item<double>() == 0.0);
    nn::Embedding c(10, 4, {.max_norm = 0.8, .norm_type = INFINITY, .tensor_options = to});
    run_case(fx, suffixed("emb_max_norm_inf", dt), c, dt);
    nn::Embedding d(10, 4, {.padding_idx = 1, .scale_grad_by_freq = true, .tensor_options = to});
    run_case(fx, suffixed("emb_scale_freq_pad", dt), d, dt);
    if (dt == DType::f32) {
      CHECK(a.str() == fx.meta("emb_max_norm.repr"));
      CHECK(b.str() == fx.meta("emb_max_norm_p1_pad.repr"));
      CHECK(c.str() == fx.meta("emb_max_norm_inf.repr"));
      CHECK(d.str() == fx.meta("emb_scale_freq_pad.repr"));
    }
  }
}

TEST_CASE("Embedding.from_pretrained matches PyTorch (shared storage, freeze)") {
  Fixture fx("embedding_bag");
  for (DType dt : {DType::f32, DType::f64}) {
    const std::string name = suffixed("emb_pretrained_max_norm", dt);
    Tensor w = fx.get(name + ".param.weight").clone();
    auto m =
        nn::Embedding::from_pretrained(w, /*freeze=*/false, {.padding_idx = 2, .max_norm = 1.2});
    CHECK(m->weight.requires_grad());
    CHECK(m->weight.is_same_storage(w));  // PyTorch's Parameter(_weight) shares it too
    // the padding row is not zeroed by from_pretrained
    CHECK(m->weight[2].abs().sum().item<double>() > 0.0);
    run_case(fx, name, *m, dt, /*load=*/false);
    // forward renormalised the caller's tensor (the shared storage), as PyTorch
    SL_CHECK_CLOSE(w, fx.get(name + ".after.weight"), 1e-5, 1e-6);
    if (dt == DType::f32) CHECK(m->str() == fx.meta("emb_pretrained_max_norm.repr"));
  }
  auto frozen = nn::Embedding::from_pretrained(randn({3, 2}));
  CHECK_FALSE(frozen->weight.requires_grad());
  CHECK(frozen->num_embeddings == 3);
  CHECK(frozen->embedding_dim == 2);
  SL_CHECK_THROWS(nn::Embedding::from_pretrained(randn({3})), ShapeError,
                  "expected to be 2-dimensional");
  SL_CHECK_THROWS(nn::Embedding::from_pretrained(from_vector(std::vector<int64_t>{1, 2}, {1, 2})),
                  DTypeError, "must be floating");
  SL_CHECK_THROWS(nn::Embedding::from_pretrained(randn({3, 2}), true, {.padding_idx = 3}),
                  ValueError, "padding_idx 3 must be within [-3, 3)");
}

TEST_CASE("Embedding refuses sparse=true; the old constructor still works") {
  SL_CHECK_THROWS(nn::Embedding(5, 2, nn::EmbeddingOptions{.sparse = true}), ValueError,
                  "Embedding: sparse=true is not supported");
  nn::Embedding old(6, 3, -2, {.dtype = DType::f64});
  CHECK(old.padding_idx.value() == 4);
  CHECK(old.weight.dtype() == DType::f64);
  CHECK_FALSE(old.max_norm.has_value());
  CHECK_FALSE(old.scale_grad_by_freq);
}

TEST_CASE("embedding_renorm_: rows over max_norm scaled once, the rest untouched, no autograd") {
  // independent reference: the rule written out on the host in double
  Tensor w = tensor({3.0, 4.0, 0.3, 0.4, 6.0, 8.0}).view({3, 2});
  Tensor wref = w.clone();
  w.requires_grad_();
  const uint32_t v0 = w.version();
  namespace F = sl::nn::functional;
  F::embedding_renorm_(w, from_vector(std::vector<int64_t>{0, 1, 0, 0}), 2.0, 2.0);
  CHECK(w.version() != v0);
  CHECK(w.is_leaf());
  const double s = 2.0 / (5.0 + 1e-7);  // row 0: norm 5 > 2, scaled once despite 3 repeats
  SL_CHECK_CLOSE(w.detach()[0], tensor({3.0 * s, 4.0 * s}), 1e-15, 0);
  SL_CHECK_CLOSE(w.detach()[1], wref[1], 0, 0);  // norm 0.5 <= 2
  SL_CHECK_CLOSE(w.detach()[2], wref[2], 0, 0);  // not looked up
  // a norm equal to max_norm is not above it: the row stays as it is (PyTorch: norm > max_norm)
  Tensor at = tensor({3.0, 4.0}).view({1, 2});
  F::embedding_renorm_(at, from_vector(std::vector<int64_t>{0}), 5.0, 2.0);
  SL_CHECK_CLOSE(at, tensor({3.0, 4.0}).view({1, 2}), 0, 0);
  // a non-contiguous weight (a transposed view) is renormalised in place like a contiguous copy
  Tensor base = randn({3, 4}, {.dtype = DType::f64}) * 3.0;
  Tensor wt = base.t();  // [4, 3], strides [1, 4]
  Tensor copy = wt.contiguous();
  Tensor rows = from_vector(std::vector<int64_t>{3, 0, 3});
  F::embedding_renorm_(wt, rows, 1.0, 2.0);
  F::embedding_renorm_(copy, rows, 1.0, 2.0);
  SL_CHECK_CLOSE(base.t(), copy, 0, 0);
  SL_CHECK_THROWS(F::embedding_renorm_(w, from_vector(std::vector<int64_t>{3}), 1.0), IndexError,
                  "3");
  SL_CHECK_THROWS(F::embedding_renorm_(w, tensor({1.0f}), 1.0), DTypeError, "int64 or int32");
  SL_CHECK_THROWS(F::embedding_renorm_(randn({4}), from_vector(std::vector<int64_t>{0}), 1.0),
                  ShapeError, "2-d");
}
