// The autocast scope (Note [Autocast]) on the CPU, where every machine can run it, and on CUDA
// tensors when a GPU is present: policies, nesting, per-kind state, gradients through casts.
#include <functional>
#include <thread>
#include <tuple>

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

TEST_CASE("autocast: CUDA scope casts CUDA tensors only" * sl::testing::needs_gpu()) {
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
    // transposed convolutions join conv's `lower` policy (weight [in, out, k...]: k's first
    // dims swapped give [3, 4, 3, 3] for img's 3 channels)
    CHECK(conv_transpose2d(img, k.transpose(0, 1)).dtype() == DType::bf16);
    CHECK(conv_transpose1d(seq, k1.transpose(0, 1)).dtype() == DType::bf16);
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
    CHECK(conv_transpose2d(img, k.transpose(0, 1)).dtype() == DType::f32);
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

namespace {
// Whether a and e have the same dtype and identical values (the scope only inserts casts).
void check_same_bits(const Tensor& a, const Tensor& e) {
  REQUIRE(a.defined());
  CHECK(a.dtype() == e.dtype());
  SL_CHECK_CLOSE(a.to(DType::f64), e.to(DType::f64), 0, 0);
}
}  // namespace

TEST_CASE("autocast: the fp32 list of pointwise ops, pow, prod, cumsum and logsumexp") {
  // PyTorch's CUDA autocast runs these in float32 because their results lose too much in 16
  // bits (exp/pow overflow float16, log near 1, products and running sums accumulate error).
  // Inside a bf16 scope each must return float32 and equal, bit for bit, the same op outside any
  // scope on the input cast to float32 by hand.
  manual_seed(5);
  Tensor pos = add(rand({3, 4}), 0.5).to(DType::bf16);  // log / rsqrt need positive inputs
  Tensor e = rand({3, 4}).to(DType::bf16);
  const auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> fn;
  };
  const std::vector<Case> cases = {
      {"exp", [](const Tensor& a, const Tensor&) { return exp(a); }},
      {"expm1", [](const Tensor& a, const Tensor&) { return expm1(a); }},
      {"log", [](const Tensor& a, const Tensor&) { return log(a); }},
      {"log1p", [](const Tensor& a, const Tensor&) { return log1p(a); }},
      {"rsqrt", [](const Tensor& a, const Tensor&) { return rsqrt(a); }},
      {"reciprocal", [](const Tensor& a, const Tensor&) { return reciprocal(a); }},
      {"pow(tensor, tensor)", [](const Tensor& a, const Tensor& b) { return pow(a, b); }},
      {"pow(tensor, scalar)", [](const Tensor& a, const Tensor&) { return pow(a, 2.5); }},
      {"pow(scalar, tensor)", [](const Tensor&, const Tensor& b) { return pow(Scalar(3.0), b); }},
      {"div(scalar, tensor)", [](const Tensor& a, const Tensor&) { return div(Scalar(1.5), a); }},
      {"prod", [](const Tensor& a, const Tensor&) { return prod(a, 1); }},
      {"cumsum", [](const Tensor& a, const Tensor&) { return cumsum(a, 1); }},
      {"logsumexp", [](const Tensor& a, const Tensor&) { return logsumexp(a, {1}); }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    Tensor in_scope;
    {
      AutocastGuard g(DeviceKind::cpu, DType::bf16);
      in_scope = c.fn(pos, e);
    }
    CHECK(in_scope.dtype() == DType::f32);
    check_same_bits(in_scope, c.fn(f32(pos), f32(e)));
    // without a scope the op keeps its input dtype
    CHECK(c.fn(pos, e).dtype() == DType::bf16);
  }
  // pow of a float32 base and a bf16 exponent: both float32 inside the scope
  Tensor x = add(rand({3, 4}), 0.5);
  AutocastGuard g(DeviceKind::cpu, DType::bf16);
  CHECK(pow(x, e).dtype() == DType::f32);
  CHECK(pow(x, e.to(DType::f16)).dtype() == DType::f32);
}

TEST_CASE("autocast: LSTM, GRU and their cells run in the scope's dtype") {
  // As PyTorch's CUDA autocast puts LSTMCell/GRUCell on its lower-precision list: every floating
  // input (sequence, states, weights) is cast, so the gates' GEMMs and the recurrence run in
  // bf16 and the gradients come back to the float32 parameters in float32. Reference: the same
  // call outside any scope on inputs cast by hand, which must agree bit for bit.
  manual_seed(9);
  const int64_t T = 5, N = 3, I = 4, H = 6;
  const auto low = [](const Tensor& t) { return t.to(DType::bf16); };
  const auto params_of = [&](int64_t gates) {
    TensorList p = {randn({gates * H, I}), randn({gates * H, H}), randn({gates * H}),
                    randn({gates * H})};
    for (Tensor& t : p) t = mul(t, 0.3).requires_grad_();
    return p;
  };
  const auto detached = [](const TensorList& ps) {
    TensorList out;
    for (const Tensor& p : ps) out.push_back(p.detach().requires_grad_());
    return out;
  };
  const auto lowered = [&](const TensorList& ps) {
    TensorList out;
    for (const Tensor& p : ps) out.push_back(low(p));
    return out;
  };
  Tensor x = randn({T, N, I}), h0 = randn({1, N, H}), c0 = randn({1, N, H});

  SUBCASE("lstm") {
    TensorList p = params_of(4), q = detached(p);
    Tensor out, hn, cn;
    {
      AutocastGuard g(DeviceKind::cpu, DType::bf16);
      std::tie(out, hn, cn) = lstm(x, h0, c0, p, true, 1, 0.0, false, false, false);
    }
    auto [rout, rhn, rcn] =
        lstm(low(x), low(h0), low(c0), lowered(q), true, 1, 0.0, false, false, false);
    check_same_bits(out, rout);
    check_same_bits(hn, rhn);
    check_same_bits(cn, rcn);
    add(out.to(DType::f32).sum(), cn.to(DType::f32).sum()).backward();
    add(rout.to(DType::f32).sum(), rcn.to(DType::f32).sum()).backward();
    for (size_t i = 0; i < p.size(); ++i) {
      CHECK(p[i].grad().dtype() == DType::f32);
      check_same_bits(p[i].grad(), q[i].grad());
    }
  }
  SUBCASE("gru") {
    TensorList p = params_of(3), q = detached(p);
    Tensor out, hn;
    {
      AutocastGuard g(DeviceKind::cpu, DType::bf16);
      std::tie(out, hn) = gru(x, h0, p, true, 1, 0.0, false, false, false);
    }
    auto [rout, rhn] = gru(low(x), low(h0), lowered(q), true, 1, 0.0, false, false, false);
    check_same_bits(out, rout);
    check_same_bits(hn, rhn);
    out.to(DType::f32).sum().backward();
    rout.to(DType::f32).sum().backward();
    for (size_t i = 0; i < p.size(); ++i) check_same_bits(p[i].grad(), q[i].grad());
  }
  SUBCASE("cells") {
    // Before the cells opted in, their linear projections were lowered but the float32 state
    // was not, and the fused pointwise step was handed bf16 gates with a float32 cell state.
    TensorList pl = params_of(4), pg = params_of(3);
    Tensor xi = x.select(0, 0), h = h0.select(0, 0), c = c0.select(0, 0);
    Tensor lh, lc, gh;
    {
      AutocastGuard g(DeviceKind::cpu, DType::bf16);
      std::tie(lh, lc) = lstm_cell(xi, h, c, pl[0], pl[1], pl[2], pl[3]);
      gh = gru_cell(xi, h, pg[0], pg[1], pg[2], pg[3]);
    }
    auto [rlh, rlc] =
        lstm_cell(low(xi), low(h), low(c), low(pl[0]), low(pl[1]), low(pl[2]), low(pl[3]));
    check_same_bits(lh, rlh);
    check_same_bits(lc, rlc);
    check_same_bits(gh, gru_cell(low(xi), low(h), low(pg[0]), low(pg[1]), low(pg[2]), low(pg[3])));
    add(add(lh.to(DType::f32).sum(), lc.to(DType::f32).sum()), gh.to(DType::f32).sum()).backward();
    for (const Tensor& t : pl) CHECK(t.grad().dtype() == DType::f32);
    for (const Tensor& t : pg) CHECK(t.grad().dtype() == DType::f32);
  }
}

TEST_CASE("autocast: backward inside a scope computes exactly what it computes outside") {
  // Backward ops run in the dtypes the forward recorded (as PyTorch documents), even when
  // backward() is called inside a scope: the engine disables autocast while it runs. Without
  // that, PowBackward's pow(x, 2) on a bf16 x would be moved to float32 by the fp32 list.
  manual_seed(3);
  Tensor xb = add(rand({4, 5}), 0.5).to(DType::bf16).requires_grad_();
  Tensor y = mul(pow(xb, 3.0), exp(xb)).sum();  // recorded outside any scope: all bf16
  REQUIRE(y.dtype() == DType::bf16);
  Tensor outside = grad({y}, {xb}, {}, /*retain_graph=*/true)[0];
  Tensor inside;
  {
    AutocastGuard g(DeviceKind::cpu, DType::bf16);
    inside = grad({y}, {xb}, {}, true)[0];
    CHECK(is_autocast_enabled(DeviceKind::cpu));  // the scope is back after backward
  }
  check_same_bits(inside, outside);

  // and a graph recorded inside a scope: backward inside or outside gives the same gradients
  Tensor w = randn({5, 3}).requires_grad_();
  Tensor x = randn({4, 5});
  Tensor loss;
  {
    AutocastGuard g(DeviceKind::cpu, DType::bf16);
    loss = exp(matmul(x, w)).sum();
  }
  Tensor g_out = grad({loss}, {w}, {}, true)[0];
  Tensor g_in;
  {
    AutocastGuard g(DeviceKind::cpu, DType::f16);  // even a scope of another dtype
    g_in = grad({loss}, {w}, {}, true)[0];
  }
  check_same_bits(g_in, g_out);
}

TEST_CASE("autocast: checkpoint recomputes under the autocast state of its forward") {
  // The recompute in backward must produce the activations the forward produced. Forward ran in
  // a bf16 scope, backward runs outside any (the recommended place): the recompute restores the
  // forward's scope, as torch.utils.checkpoint does. Reference: the same function without
  // checkpointing, whose gradients must agree bit for bit.
  manual_seed(4);
  Tensor x = randn({4, 6});
  Tensor w = mul(randn({5, 6}), 0.4).requires_grad_();
  Tensor w2 = w.detach().requires_grad_();
  const auto body = [](const Tensor& in, const Tensor& weight) {
    return gelu(linear(in, weight, Tensor()));
  };
  Tensor out, ref;
  {
    AutocastGuard g(DeviceKind::cpu, DType::bf16);
    out = nn::checkpoint([&](const TensorList& in) { return body(in[0], w); }, {x}, {w});
    ref = body(x, w2);
  }
  REQUIRE(out.dtype() == DType::bf16);
  check_same_bits(out, ref);
  out.to(DType::f32).sum().backward();
  ref.to(DType::f32).sum().backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == DType::f32);
  check_same_bits(w.grad(), w2.grad());

  // and a forward outside any scope recomputes outside it even if backward runs inside one
  Tensor v = mul(randn({5, 6}), 0.4).requires_grad_();
  Tensor v2 = v.detach().requires_grad_();
  Tensor o2 = nn::checkpoint([&](const TensorList& in) { return body(in[0], v); }, {x}, {v});
  Tensor r2 = body(x, v2);
  {
    AutocastGuard g(DeviceKind::cpu, DType::bf16);
    o2.sum().backward();
    r2.sum().backward();
  }
  CHECK(v.grad().dtype() == DType::f32);
  check_same_bits(v.grad(), v2.grad());
}
