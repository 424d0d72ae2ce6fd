// The autocast scope (Note [Autocast]) on the CPU, where every machine can run it, and on CUDA
// tensors when a GPU is present: policies, nesting, per-kind state, gradients through casts.
#include <thread>

#include "core/amp.h"
#include "cuda_testing.h"

using namespace sl;

TEST_CASE("autocast: policies inside a scope, nothing outside") {
  Tensor x = randn({4, 3});
  Tensor h = randn({4, 3}).to(DType::f16);
  Tensor d = randn({4, 3}, {.dtype = DType::f64});
  Tensor i = from_vector<int64_t>({1, 2, 3});
  CHECK(!is_autocast_enabled(DeviceKind::cpu));
  CHECK(autocast(x, AmpPolicy::lower).dtype() == DType::f32);  // no scope: unchanged
  {
    AutocastGuard g(DeviceKind::cpu, DType::bf16);
    CHECK(is_autocast_enabled(DeviceKind::cpu));
    CHECK(!is_autocast_enabled(DeviceKind::cuda));
    CHECK(autocast_dtype(DeviceKind::cpu) == DType::bf16);
    CHECK(autocast(x, AmpPolicy::lower).dtype() == DType::bf16);
    CHECK(autocast(h, AmpPolicy::lower).dtype() == DType::f16);  // already low precision
    CHECK(autocast(h, AmpPolicy::fp32).dtype() == DType::f32);
    CHECK(autocast(x, AmpPolicy::fp32).is_same(x));
    CHECK(autocast(d, AmpPolicy::lower).dtype() == DType::f64);  // float64 is never touched
    CHECK(autocast(i, AmpPolicy::lower).dtype() == DType::i64);
    auto p = autocast(std::vector<Tensor>{h, x, Tensor(), i}, AmpPolicy::promote);
    CHECK(p[0].dtype() == DType::f32);
    CHECK(p[1].is_same(x));
    CHECK(!p[2].defined());
    CHECK(p[3].dtype() == DType::i64);
    auto q = autocast(std::vector<Tensor>{h, x.to(DType::bf16)}, AmpPolicy::promote);
    CHECK(q[0].dtype() == DType::f32);  // f16 with bf16 promotes to f32
    CHECK(q[1].dtype() == DType::f32);
    {
      AutocastGuard inner(DeviceKind::cpu, DType::f16);
      CHECK(autocast(x, AmpPolicy::lower).dtype() == DType::f16);
      AutocastGuard off(DeviceKind::cpu, DType::f16, false);
      CHECK(autocast(x, AmpPolicy::lower).dtype() == DType::f32);
    }
    CHECK(autocast(x, AmpPolicy::lower).dtype() == DType::bf16);  // restored
    // the state is per thread
    bool other_thread_enabled = true;
    std::thread t([&] { other_thread_enabled = is_autocast_enabled(DeviceKind::cpu); });
    t.join();
    CHECK(!other_thread_enabled);
  }
  CHECK(!is_autocast_enabled(DeviceKind::cpu));
  SL_CHECK_THROWS(AutocastGuard(DeviceKind::cpu, DType::f32), DTypeError,
                  "AutocastGuard: dtype must be float16 or bfloat16, got float32");
}

TEST_CASE("autocast: gradients reach float32 leaves in float32") {
  Tensor w = randn({3, 5}).requires_grad_();
  Tensor x = randn({4, 3});
  {
    AutocastGuard g(DeviceKind::cpu, DType::bf16);
    Tensor y = autocast(x, AmpPolicy::lower).matmul(autocast(w, AmpPolicy::lower));
    CHECK(y.dtype() == DType::bf16);
    autocast(y, AmpPolicy::fp32).sum().backward();
  }
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == DType::f32);
  // d/dw sum(x @ w) = x^T @ ones, up to the bf16 rounding of x (2^-8 relative)
  Tensor expect = x.t().matmul(ones({4, 5}));
  SL_CHECK_CLOSE(w.grad(), expect, 1e-2, 1e-2);
}

TEST_CASE("autocast: CUDA scope casts CUDA tensors only") {
  SL_REQUIRE_CUDA("autocast on CUDA");
  Tensor g = randn({8, 8}).to(sl::testing::kGPU);
  Tensor c = randn({8, 8});
  AutocastGuard guard(DeviceKind::cuda, DType::f16);
  CHECK(autocast(g, AmpPolicy::lower).dtype() == DType::f16);
  CHECK(autocast(c, AmpPolicy::lower).dtype() == DType::f32);
  Tensor p = autocast(g, AmpPolicy::lower).matmul(autocast(g, AmpPolicy::lower));
  CHECK(p.dtype() == DType::f16);
  SL_CHECK_CLOSE(p.cpu().to(DType::f32), g.cpu().matmul(g.cpu()), 1e-2, 5e-2);
}

TEST_CASE(
    "autocast: library ops opt in (lower: products and convs; fp32: softmax, norms, sums, "
    "losses)") {
  // Each op inside a CPU bf16 scope must give exactly (bit for bit) what the same op gives
  // outside any scope on inputs cast by hand as Note [Autocast] says: the scope only inserts
  // casts, it computes nothing differently.
  manual_seed(11);
  Tensor x = randn({4, 6});
  Tensor w = randn({5, 6}).requires_grad_();
  Tensor b = randn({5}).requires_grad_();
  Tensor img = randn({2, 3, 6, 6});
  Tensor k = randn({4, 3, 3, 3});
  Tensor seq = randn({2, 3, 8});
  Tensor k1 = randn({4, 3, 3});
  Tensor hb = randn({4, 5}).to(DType::bf16);
  Tensor target = from_vector<int64_t>({0, 4, 2, 1}, {4});
  const auto low = [](const Tensor& t) { return t.to(DType::bf16); };
  const auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
  const auto same_bits = [](const Tensor& a, const Tensor& e) {
    CHECK(a.dtype() == e.dtype());
    SL_CHECK_CLOSE(a.to(DType::f64), e.to(DType::f64), 0, 0);
  };

  Tensor y, ref;
  {
    AutocastGuard g(DeviceKind::cpu, DType::bf16);
    y = linear(x, w, b);
    same_bits(matmul(x, w.t()), [&] {
      AutocastGuard off(DeviceKind::cpu, DType::bf16, false);
      return matmul(low(x), low(w).t());
    }());
    same_bits(mm(x, w.t()), matmul(x, w.t()));
    same_bits(bmm(x.unsqueeze(0), w.t().unsqueeze(0)), matmul(x, w.t()).unsqueeze(0));
    CHECK(addmm(b, x, w.t()).dtype() == DType::bf16);
    CHECK(conv2d(img, k).dtype() == DType::bf16);
    CHECK(conv1d(seq, k1).dtype() == DType::bf16);
    CHECK(softmax(hb, 1).dtype() == DType::f32);
    CHECK(log_softmax(hb, 1).dtype() == DType::f32);
    CHECK(softmax(hb, 1, DType::bf16).dtype() == DType::bf16);  // an explicit dtype wins
    CHECK(hb.sum().dtype() == DType::f32);
    CHECK(hb.norm().dtype() == DType::f32);
    CHECK(layer_norm(hb, {5}, Tensor(), Tensor(), 1e-5).dtype() == DType::f32);
    CHECK(nn::functional::cross_entropy(hb, target).dtype() == DType::f32);
    CHECK(nn::functional::mse_loss(hb, zeros({4, 5})).dtype() == DType::f32);
    CHECK(hb.mean().dtype() == DType::bf16);  // mean is not on the fp32 list (as in PyTorch)
    Tensor d = randn({3, 3}, {.dtype = DType::f64});
    CHECK(matmul(d, d).dtype() == DType::f64);  // float64 is never touched
  }
  {
    // the same computation with the casts written out, outside any scope
    Tensor w2 = w.detach().requires_grad_(), b2 = b.detach().requires_grad_();
    ref = add(matmul(low(x), low(w2).t()), low(b2));
    same_bits(y, ref);
    CHECK(conv2d(img, k).dtype() == DType::f32);
    Tensor lref = nn::functional::cross_entropy(f32(ref), target);
    lref.backward();
    Tensor l;
    {
      AutocastGuard g(DeviceKind::cpu, DType::bf16);
      l = nn::functional::cross_entropy(y, target);
    }
    same_bits(l, lref);
    l.backward();
    // gradients flow back through the casts to the float32 leaves, identical to the manual path
    CHECK(w.grad().dtype() == DType::f32);
    same_bits(w.grad(), w2.grad());
    same_bits(b.grad(), b2.grad());
  }
}
