// The fused attention path (Note [Fused attention], core/ops/attention.h) on the CPU: PyTorch
// parity and f64 gradcheck through it, agreement with the unfused path with the work cut into
// many blocks, the memory it does not hold, the backend choice, the causal row offset of the
// attention softmax, error paths. The CUDA one-pass kernel is compared with the CPU in
// tests/cuda/test_cuda_attention.cpp.
#include <cmath>
#include <vector>

#include "core/amp.h"
#include "core/ops/attention.h"
#include "ops/attention_fixture.h"
#include "support/testing.h"

using namespace sl;
using sl::testing::attention_fixture_case;
using sl::testing::Fixture;

namespace {

/// Sets the block size of the blocked form for one scope.
struct BlockElements {
  explicit BlockElements(int64_t n) : prev(ops::set_attention_block_elements(n)) {}
  ~BlockElements() { ops::set_attention_block_elements(prev); }
  int64_t prev;
};

struct Grads {
  Tensor y, q, k, v;
};

/// Output and input gradients of scaled_dot_product_attention under `backend` for a fixed
/// upstream gradient.
Grads run(AttentionBackend backend, const Tensor& q0, const Tensor& k0, const Tensor& v0,
          const Tensor& mask, bool causal, const Tensor& gy) {
  AttentionBackendScope scope(backend);
  Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(),
         v = v0.detach().requires_grad_();
  Tensor y = scaled_dot_product_attention(q, k, v, mask, 0.0, causal);
  y.backward(gy);
  return {y.detach(), q.grad(), k.grad(), v.grad()};
}

/// SL_CHECK_CLOSE also requires NaN in the same places on both sides.
void check_same(const Grads& f, const Grads& u, double rtol, double atol) {
  SL_CHECK_CLOSE(f.y, u.y, rtol, atol);
  SL_CHECK_CLOSE(f.q, u.q, rtol, atol);
  SL_CHECK_CLOSE(f.k, u.k, rtol, atol);
  SL_CHECK_CLOSE(f.v, u.v, rtol, atol);
}

struct Case {
  const char* name;
  Shape q, k, v;
  int mask;  // 0 none, 1 bool [L, S], 2 additive [N, 1, 1, S], 3 bool with a fully masked row
             // (NaN in that output row and so in all of dk and dv: that case checks the forward
             // and that the NaN lands in the same places)
  bool causal;
};

Tensor make_mask(const Case& c) {
  const int64_t L = c.q[c.q.size() - 2], S = c.k[c.k.size() - 2];
  if (c.mask == 1 || c.mask == 3) {
    Tensor m = rand({L, S}).gt(0.35);
    m.select(1, 0).fill_(1);                       // every query keeps key 0 ...
    if (c.mask == 3) m.select(0, L / 2).fill_(0);  // ... except one, whose row is NaN
    return m;
  }
  if (c.mask == 2) {
    Tensor m = randn({c.q[0], 1, 1, S}, {.dtype = DType::f64});
    m.select(3, S - 1).fill_(-INFINITY);
    return m;
  }
  return Tensor();
}

struct Inputs {
  Tensor q, k, v, mask;
};

/// Random q, k, v of case c in dt, and its mask (a floating one in dt).
Inputs make_inputs(const Case& c, DType dt) {
  Tensor mask = make_mask(c);
  if (mask.defined() && mask.dtype() != DType::b8) mask = mask.to(dt);
  return {randn(c.q, {.dtype = dt}), randn(c.k, {.dtype = dt}), randn(c.v, {.dtype = dt}), mask};
}

const std::vector<Case> kCases = {
    {"3-d, no mask", {3, 7, 5}, {3, 9, 5}, {3, 9, 4}, 0, false},
    {"4-d, bool mask", {2, 3, 11, 4}, {2, 3, 13, 4}, {2, 3, 13, 6}, 1, false},
    {"4-d, additive padding mask", {2, 2, 9, 3}, {2, 2, 10, 3}, {2, 2, 10, 3}, 2, false},
    {"causal, L < S", {2, 2, 6, 4}, {2, 2, 10, 4}, {2, 2, 10, 5}, 0, true},
    {"causal, L > S, with a bool mask", {2, 2, 12, 4}, {2, 2, 7, 4}, {2, 2, 7, 3}, 1, true},
    {"5-d, fully masked row", {2, 2, 2, 8, 3}, {2, 2, 2, 8, 3}, {2, 2, 2, 8, 2}, 3, false},
    {"2-d", {10, 6}, {12, 6}, {12, 7}, 0, true},
};

}  // namespace

TEST_CASE("fused attention: PyTorch parity of outputs and gradients, in many blocks (f32)") {
  Fixture fx("attention");
  AttentionBackendScope fused(AttentionBackend::fused);
  // budgets from one score per block (every query of every head a block of its own) to all
  for (int64_t budget : {int64_t{1}, int64_t{7}, int64_t{40}, int64_t{1} << 22}) {
    CAPTURE(budget);
    BlockElements be(budget);
    for (const auto& c : fx.cases()) {
      CAPTURE(c);
      // the unfused path's parity check (test_attention.cpp), on the fused path
      Tensor y = sl::testing::check_attention_fixture_parity(fx, c);
      REQUIRE(y.grad_fn());
      CHECK(std::string(y.grad_fn()->name()) == "FusedAttentionBackward");
    }
  }
}

TEST_CASE("fused attention: gradcheck (f64) in one block and in many") {
  Fixture fx("attention");
  AttentionBackendScope fused(AttentionBackend::fused);
  for (int64_t budget : {int64_t{3}, int64_t{1} << 22}) {
    CAPTURE(budget);
    BlockElements be(budget);
    for (const auto& c : fx.cases()) {
      CAPTURE(c);
      Tensor q = fx.get_f64(c, "q").requires_grad_(), k = fx.get_f64(c, "k").requires_grad_();
      Tensor v = fx.get_f64(c, "v").requires_grad_();
      CHECK(gradcheck(
          [&](const TensorList& in) {
            return attention_fixture_case(fx, c, in[0], in[1], in[2], DType::f64);
          },
          {q, k, v}));
    }
  }
}

TEST_CASE("fused attention: agrees with the unfused path for masks, causal, ranks and blocks") {
  manual_seed(91);
  for (const Case& c : kCases) {
    CAPTURE(c.name);
    for (DType dt : {DType::f64, DType::f32}) {
      CAPTURE(dt);
      auto [q, k, v, mask] = make_inputs(c, dt);
      Shape ys = c.q;
      ys.back() = c.v.back();
      Tensor gy = randn(ys, {.dtype = dt});
      Grads u = run(AttentionBackend::unfused, q, k, v, mask, c.causal, gy);
      // f64: only the order of the sums over blocks of queries differs (dk, dv), ~1e-16 per term;
      // f32: the same, at float32's 6e-8 per term, over at most 13 keys and 12 queries
      const double rtol = dt == DType::f64 ? 1e-12 : 2e-6, atol = dt == DType::f64 ? 1e-13 : 1e-6;
      for (int64_t budget : {int64_t{1}, int64_t{5}, int64_t{24}, int64_t{1} << 22}) {
        CAPTURE(budget);
        BlockElements be(budget);
        check_same(run(AttentionBackend::fused, q, k, v, mask, c.causal, gy), u, rtol, atol);
      }
      // in one block the forward runs the unfused path's kernels on the same data: same bits;
      // except causal with L < S, where the block reads only the first L keys (a shorter sum
      // in p v, which a GEMM may order differently: Eigen's does)
      const int64_t L = c.q[c.q.size() - 2], S = c.k[c.k.size() - 2];
      if (!c.causal || L >= S) {
        BlockElements one(int64_t{1} << 22);
        SL_CHECK_CLOSE(run(AttentionBackend::fused, q, k, v, mask, c.causal, gy).y, u.y, 0, 0);
      }
    }
  }
}

TEST_CASE("fused attention: 16-bit inputs and autocast on the CPU") {
  manual_seed(92);
  // 16-bit inputs are computed in float32 and rounded once (ops::cpu_16bit_via_float32) on both
  // paths; the forward differs only where float32 results that differ by sum order straddle a
  // rounding boundary (one ulp: bf16 2^-7), and dk / dv also round per block before the float32
  // sum in the fused path (a second ulp): rtol two bf16 ulps, atol for values near zero.
  Tensor q = randn({2, 3, 10, 8}), k = randn({2, 3, 12, 8}), v = randn({2, 3, 12, 8});
  Tensor gy = randn({2, 3, 10, 8});
  for (DType dt : {DType::bf16, DType::f16}) {
    CAPTURE(dt);
    const double rtol = dt == DType::bf16 ? 1.6e-2 : 2e-3, atol = dt == DType::bf16 ? 1e-2 : 2e-3;
    Grads u =
        run(AttentionBackend::unfused, q.to(dt), k.to(dt), v.to(dt), Tensor(), true, gy.to(dt));
    BlockElements be(17);
    Grads f = run(AttentionBackend::fused, q.to(dt), k.to(dt), v.to(dt), Tensor(), true, gy.to(dt));
    CHECK(f.y.dtype() == dt);
    CHECK(f.k.dtype() == dt);
    SL_CHECK_CLOSE(f.y.to(DType::f32), u.y.to(DType::f32), rtol, atol);
    SL_CHECK_CLOSE(f.q.to(DType::f32), u.q.to(DType::f32), rtol, atol);
    SL_CHECK_CLOSE(f.k.to(DType::f32), u.k.to(DType::f32), rtol, atol);
    SL_CHECK_CLOSE(f.v.to(DType::f32), u.v.to(DType::f32), rtol, atol);
  }
  // under autocast both paths lower float32 q, k, v to bfloat16; gradients return as float32
  auto under_autocast = [&](AttentionBackend b) {
    AutocastGuard ac(DeviceKind::cpu, DType::bf16);
    return run(b, q, k, v, Tensor(), false, gy);
  };
  Grads u = under_autocast(AttentionBackend::unfused);
  BlockElements be(17);
  Grads f = under_autocast(AttentionBackend::fused);
  CHECK(f.y.dtype() == DType::bf16);
  CHECK(f.q.dtype() == DType::f32);
  SL_CHECK_CLOSE(f.y.to(DType::f32), u.y.to(DType::f32), 1.6e-2, 1e-2);
  SL_CHECK_CLOSE(f.k, u.k, 1.6e-2, 1e-2);
}

TEST_CASE("fused attention: keeps no probabilities for the backward, and blocks its scores") {
  manual_seed(93);
  const int64_t A = 2, B = 4, L = 256, S = 256, E = 16;
  Tensor q = randn({A, B, L, E}).requires_grad_(), k = randn({A, B, S, E}).requires_grad_(),
         v = randn({A, B, S, E}).requires_grad_();
  const int64_t out_bytes = A * B * L * E * 4, probs_bytes = A * B * L * S * 4;
  auto forward_bytes = [&](AttentionBackend backend) {
    AttentionBackendScope scope(backend);
    const int64_t before = memory_stats().live_bytes;
    reset_peak_memory_stats();
    Tensor y = scaled_dot_product_attention(q, k, v);
    // what stays alive for the backward beyond the inputs, and the forward's high-water mark
    return std::pair{memory_stats().live_bytes - before, memory_stats().peak_bytes - before};
  };
  BlockElements be(B * 32 * S);  // blocks of 32 queries of one leading entry: 128 Ki scores
  auto [fused_live, fused_peak] = forward_bytes(AttentionBackend::fused);
  auto [unfused_live, unfused_peak] = forward_bytes(AttentionBackend::unfused);
  // fused: q, k and v are saved as they are (contiguous: no copies), so only the output stays,
  // and the rows' statistics (Note [Attention row statistics]): two floats per query
  CHECK(fused_live == out_bytes + A * B * L * 2 * 4);
  // unfused: the output and the [A, B, L, S] probabilities (saved by the softmax and the product)
  CHECK(unfused_live >= out_bytes + probs_bytes);
  // the forward's peak: the unfused path holds the scores and the probabilities at once; the
  // blocked one a block's scores and probabilities (2 x 512 KiB) beside the output and one
  // block's output
  CHECK(unfused_peak >= out_bytes + 2 * probs_bytes);
  CHECK(fused_peak <= 2 * out_bytes + 2 * B * 32 * S * 4);
}

TEST_CASE("fused attention: the automatic backend takes the fused path only where it pays") {
  manual_seed(94);
  Tensor q = randn({2, 5, 4}).requires_grad_(), k = randn({2, 6, 4}), v = randn({2, 6, 3});
  auto path = [&](const Tensor& kk) {
    return std::string(scaled_dot_product_attention(q, kk, v).grad_fn()->name());
  };
  CHECK(attention_backend() == AttentionBackend::automatic);
  {
    BlockElements be(2 * 5 * 6);  // the whole score matrix fits one block: unfused
    CHECK(path(k) != "FusedAttentionBackward");
  }
  {
    BlockElements be(2 * 5 * 6 - 1);  // it does not: the blocked form saves memory
    CHECK(path(k) == "FusedAttentionBackward");
    // ... unless q and k differ in batch dims (broadcast), or there is dropout
    CHECK(path(randn({1, 6, 4})) != "FusedAttentionBackward");
    Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), 0.5);
    CHECK(std::string(y.grad_fn()->name()) != "FusedAttentionBackward");
    // forced unfused
    AttentionBackendScope unfused(AttentionBackend::unfused);
    CHECK(path(k) != "FusedAttentionBackward");
  }
  CHECK(attention_backend() == AttentionBackend::automatic);
  // the weights come from the unfused path whatever the backend
  AttentionBackendScope fused(AttentionBackend::fused);
  auto [y, w] = scaled_dot_product_attention_with_weights(q, k, v);
  CHECK(w.sizes() == Shape{2, 5, 6});
}

TEST_CASE("attention softmax: a causal row offset equals the same rows of the whole matrix") {
  manual_seed(95);
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    Tensor scores = randn({2, 3, 9, 7}, {.dtype = dt});
    Tensor mask = rand({9, 7}).gt(0.3);
    Tensor whole = ops::attention_softmax_forward(scores, mask, true, 0.7);
    for (int64_t r0 : {0, 2, 5, 8}) {
      CAPTURE(r0);
      Tensor part = ops::attention_softmax_forward(scores.narrow(2, r0, 9 - r0),
                                                   mask.narrow(0, r0, 9 - r0), true, 0.7, r0);
      // each row computed by the same code from the same values
      SL_CHECK_CLOSE(part, whole.narrow(2, r0, 9 - r0), 0, 0);
    }
  }
}

TEST_CASE("attention row statistics: the backward's recomputation gives the forward's bits") {
  manual_seed(96);
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    // mask 0: none; 1: bool, with a fully masked row; 2: additive, broadcast over batch dims
    for (int mask_kind : {0, 1, 2}) {
      for (int64_t offset : {-1, 0, 3}) {  // -1: not causal
        CAPTURE(mask_kind);
        CAPTURE(offset);
        const bool causal = offset >= 0;
        const int64_t A = 2, B = 3, L = 5, S = 37;  // S not a multiple of the 16 lanes
        Tensor scores = randn({A, B, L, S}, {.dtype = dt}).mul(3.0);
        Tensor mask;
        if (mask_kind == 1) {
          mask = rand({A, B, L, S}).gt(0.3);
          mask.select(3, 0).fill_(1);
          mask.select(0, 1).select(0, 2).select(0, 4).fill_(0);  // row (1, 2, 4): all masked
        } else if (mask_kind == 2) {
          mask = randn({1, 1, L, S}, {.dtype = dt}).expand({A, B, L, S});
        }
        const double scale = 0.6;
        Tensor expect = ops::attention_softmax_forward(scores, mask, causal, scale,
                                                       std::max<int64_t>(offset, 0));
        Tensor probs = empty_like(scores), stats = empty({A, B, L, 2}, {.dtype = dt});
        attention_softmax_stats_forward_kernel(DeviceKind::cpu, probs, stats, scores, mask, causal,
                                               scale, std::max<int64_t>(offset, 0));
        // the statistics kernel is the forward: the same bits
        SL_CHECK_CLOSE(probs, expect, 0, 0);
        // the statistics against f64 values computed here: max and 1 / sum of exp(y - max)
        Tensor y = scores.to(DType::f64).mul(scale);
        if (mask_kind == 1) y = y.masked_fill(mask.logical_not(), -INFINITY);
        if (mask_kind == 2) y = y.add(mask.to(DType::f64));
        if (causal) y = y.masked_fill(ones({L, S}).triu(1 + offset).gt(0), -INFINITY);
        Tensor mx = y.amax({3});
        Tensor inv = y.sub(mx.unsqueeze(3)).exp().sum({3}).reciprocal();
        Tensor st = stats.to(DType::f64);
        // the max is one of the rounded y: float32 rounds scale * s and then + mask, each by
        // half an ulp of values below 20 (|s| < 3 * 5.5 sigma, mask < 5.5 sigma): 2e-6 absolute
        SL_CHECK_CLOSE(st.select(3, 0), mx, dt == DType::f64 ? 1e-15 : 2e-7,
                       dt == DType::f64 ? 1e-14 : 2e-6);
        // the sum of S <= 37 exponentials, each within 2 ulp (core/cpu/math.h)
        SL_CHECK_CLOSE(st.select(3, 1), inv.masked_fill(mx.isinf(), NAN),
                       dt == DType::f64 ? 1e-14 : 1e-6, 0);

        // the recomputation: the forward's bits again; the score gradients as
        // attention_softmax_backward's, given the row dot product computed here in f64
        Tensor gp = randn({A, B, L, S}, {.dtype = dt});
        Tensor dot = gp.to(DType::f64).mul(expect.to(DType::f64)).sum({3}).to(dt);
        Tensor p2 = scores.clone(), gs = gp.clone();  // in place, as the fused backward calls it
        attention_softmax_recompute_backward_kernel(DeviceKind::cpu, p2, gs, p2, gs, mask, stats,
                                                    dot, causal, scale,
                                                    std::max<int64_t>(offset, 0));
        SL_CHECK_CLOSE(p2, expect, 0, 0);
        // the same formula on the same values; only the dot product's rounding differs (f32:
        // the kernel's is summed in double then rounded, so at most 1 ulp of the dot)
        SL_CHECK_CLOSE(gs, ops::attention_softmax_backward(gp, expect, scale),
                       dt == DType::f64 ? 1e-13 : 1e-5, dt == DType::f64 ? 1e-15 : 1e-6);
      }
    }
  }
}

TEST_CASE("fused attention: the backward from the forward's statistics, against without them") {
  manual_seed(97);
  for (const Case& c : kCases) {
    CAPTURE(c.name);
    for (DType dt : {DType::f64, DType::f32}) {
      CAPTURE(dt);
      auto [q, k, v, mask] = make_inputs(c, dt);
      const double scale = 0.45;
      for (int64_t budget : {int64_t{1}, int64_t{7}, int64_t{1} << 22}) {
        CAPTURE(budget);
        BlockElements be(budget);
        ops::AttentionForward f =
            ops::attention_fused_forward_with_stats(q, k, v, mask, c.causal, scale);
        REQUIRE(f.stats.defined());
        Shape st_shape(c.q.begin(), c.q.end() - 1);
        st_shape.push_back(2);
        CHECK(f.stats.sizes() == st_shape);
        SL_CHECK_CLOSE(f.out, ops::attention_fused_forward(q, k, v, mask, c.causal, scale), 0, 0);
        Tensor gy = randn(f.out.sizes(), {.dtype = dt});
        ops::AttentionGrads with =
            ops::attention_fused_backward(gy, q, k, v, mask, c.causal, scale, f.out, f.stats);
        ops::AttentionGrads without =
            ops::attention_fused_backward(gy, q, k, v, mask, c.causal, scale);
        // the same probabilities; the row dot product dO . O against sum_j dP_j p_j: equal in
        // exact arithmetic, here summed over <= 7 against <= 13 terms in the dtype's rounding
        const double rtol = dt == DType::f64 ? 1e-12 : 1e-5, atol = dt == DType::f64 ? 1e-13 : 2e-6;
        SL_CHECK_CLOSE(with.q, without.q, rtol, atol);
        SL_CHECK_CLOSE(with.k, without.k, rtol, atol);
        SL_CHECK_CLOSE(with.v, without.v, rtol, atol);
      }
    }
  }
  // 16-bit inputs on the CPU take the float32 softmax through casts: no statistics
  Tensor h = randn({2, 4, 3}).to(DType::bf16);
  CHECK_FALSE(
      ops::attention_fused_forward_with_stats(h, h, h, Tensor(), false, 1.0).stats.defined());
}

TEST_CASE("fused attention: the output is saved for the backward; changing it in place is caught") {
  AttentionBackendScope fused(AttentionBackend::fused);
  Tensor q = randn({2, 5, 4}).requires_grad_(), k = randn({2, 6, 4}), v = randn({2, 6, 3});
  Tensor y = scaled_dot_product_attention(q, k, v);
  y.mul_(2.0);
  SL_CHECK_THROWS(y.sum().backward(), AutogradError, "FusedAttentionBackward");
}

TEST_CASE("fused attention: error paths") {
  Tensor q = randn({2, 5, 4}), k = randn({2, 6, 4}), v = randn({2, 6, 3});
  AttentionBackendScope fused(AttentionBackend::fused);
  SL_CHECK_THROWS(scaled_dot_product_attention(q, k, v, Tensor(), 0.2), ValueError,
                  "scaled_dot_product_attention: the fused backend was forced but cannot run: "
                  "dropout_p > 0");
  SL_CHECK_THROWS(scaled_dot_product_attention(q, randn({1, 6, 4}), v), ValueError,
                  "differ in their batch dims");
  // the usual input checks come first on either path
  SL_CHECK_THROWS(scaled_dot_product_attention(q, randn({2, 6, 5}), v), ShapeError,
                  "differ in the embedding dim");
  SL_CHECK_THROWS(ops::set_attention_block_elements(0), ValueError,
                  "set_attention_block_elements: expected at least 1 element, got 0");
  SL_CHECK_THROWS(ops::attention_fused_forward(q, randn({3, 6, 4}), v, Tensor(), false, 1.0),
                  ShapeError, "attention_fused_forward: expected query [..., L, E]");
  SL_CHECK_THROWS(ops::attention_fused_forward(q, k, v.to(DType::f64), Tensor(), false, 1.0),
                  DTypeError, "one floating dtype");
  SL_CHECK_THROWS(ops::attention_fused_forward(q, k, v, ones({5, 5}).gt(0), false, 1.0), ShapeError,
                  "does not broadcast");
  SL_CHECK_THROWS(ops::attention_fused_backward(randn({2, 5, 4}), q, k, v, Tensor(), false, 1.0),
                  ShapeError,
                  "attention_fused_backward: grad_out of shape [2, 5, 4] for an output "
                  "of shape [2, 5, 3]");
  ops::AttentionForward f = ops::attention_fused_forward_with_stats(q, k, v, Tensor(), false, 1.0);
  Tensor gy = randn({2, 5, 3});
  SL_CHECK_THROWS(ops::attention_fused_backward(gy, q, k, v, Tensor(), false, 1.0, f.out),
                  ShapeError,
                  "attention_fused_backward: the forward's output and statistics go together, got "
                  "only the output");
  SL_CHECK_THROWS(
      ops::attention_fused_backward(gy, q, k, v, Tensor(), false, 1.0, f.out,
                                    f.stats.narrow(1, 0, 4)),
      ShapeError,
      "attention_fused_backward: expected the forward's output [2, 5, 3] and statistics [2, 5, 2], "
      "got [2, 5, 3] and [2, 4, 2]");
  SL_CHECK_THROWS(ops::attention_fused_backward(gy, q, k, v, Tensor(), false, 1.0, f.out,
                                                f.stats.to(DType::f64)),
                  DTypeError,
                  "attention_fused_backward: expected the forward's output and statistics in "
                  "float32, got float32 and float64");
  SL_CHECK_THROWS(ops::attention_softmax_forward(randn({3, 4}), Tensor(), true, 1.0, -1),
                  ValueError, "causal_offset must be >= 0, got -1");
}
