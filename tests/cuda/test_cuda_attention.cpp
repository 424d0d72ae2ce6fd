// The fused attention path on CUDA (Note [Fused attention kernel], core/cuda/attention_fused.cu,
// and the generic blocked backward) against a float64 CPU reference of the unfused path.
//
// The reference is computed from the same (16-bit-rounded where the case is 16-bit) inputs cast
// to float64, so it carries no rounding of its own worth speaking of. Tolerances:
//   - float32: the kernel sums E products per score and S weighted values per output in float,
//     in another order than any reference: 2e-4 relative / absolute, the nn parity tolerance
//     (tests/cuda/test_cuda_nn.cpp), hundreds of float ulps;
//   - 16-bit forward: the kernel rounds each output once from float, so it is within one ulp of
//     the exact value plus the float error: two ulps (bf16 1.6e-2, f16 2e-3), atol for outputs near
//     zero where O(1) terms cancel (bf16 1e-3, f16 1e-4), as tol16 in test_cuda_nn.cpp;
//   - 16-bit gradients come from the generic backward in the storage dtype, which rounds the
//     recomputed scores, probabilities, dout v^T and the softmax gradient to 16 bits one after
//     the other: four ulps relative (bf16 3.2e-2, f16 4e-3) and an absolute term of two ulps of
//     the O(1) gradients (bf16 1.6e-2, f16 2e-3) for the cancellation in p * (dp - sum(p dp)).
//     The same for a 16-bit forward in the blocked form (head dims over 128). Run once with the
//     CPU standing in for the GPU (its 16-bit path rounds at the same points), every case passed
//     within these tolerances (the blocked form on both sides). The fake GPU of builds without
//     CUDA skips the 16-bit cases (Note [Fake GPU]).
#include <cmath>
#include <string>

#include "core/ops/attention.h"
#include "cuda_testing.h"

using namespace sl;
using sl::testing::kGPU;

namespace {

struct Tols {
  double fwd_r, fwd_a, grad_r, grad_a;
};

Tols tols(DType dt) {
  switch (dt) {
    case DType::bf16:
      return {1.6e-2, 1e-3, 3.2e-2, 1.6e-2};
    case DType::f16:
      return {2e-3, 1e-4, 4e-3, 2e-3};
    default:
      return {2e-4, 2e-4, 2e-4, 2e-4};
  }
}

struct Case {
  const char* name;
  int64_t N, H, L, S, E, Ev;
  int mask;  // 0 none, 1 bool [L, S], 2 additive [N, 1, 1, S] (float32 beside 16-bit inputs),
             // 3 additive [L, S] in the inputs' dtype, 4 bool [L, S] with a fully masked row (NaN
             // in that output row, and so in every dk and dv: the case checks the forward)
  bool causal;
};

// head dims on both kernel variants (<= 64, <= 128) and past them (the blocked form on the GPU);
// lengths that no tile divides; causal with L < S and L > S; many (a, b) pairs
const Case kCases[] = {
    {"E 40, Ev 64, bool mask", 2, 3, 37, 45, 40, 64, 1, false},
    {"E 128, Ev 96, causal L < S", 2, 2, 33, 70, 128, 96, 0, true},
    {"E 64, causal L > S, additive padding", 3, 2, 50, 20, 64, 32, 2, true},
    {"E 16, 64 heads, additive [L, S]", 8, 8, 19, 17, 16, 16, 3, false},
    {"E 160: blocked form on the GPU", 1, 2, 9, 11, 160, 24, 1, false},
    {"one query, one key", 1, 1, 1, 1, 8, 8, 0, true},
    {"a fully masked row", 2, 2, 12, 9, 32, 32, 4, false},
};

}  // namespace

TEST_CASE("cuda fused attention: forward and backward against a float64 CPU reference" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("fused attention parity");
  manual_seed(61);
  for (const Case& c : kCases) {
    const std::string name = c.name;
    CAPTURE(name);
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      CAPTURE(dt);
      const bool half = dt != DType::f32;
      if (half && !sl::testing::gpu_kernels_take_16bit("attention")) continue;
      // inputs rounded to dt first, so that both sides start from the same values
      Tensor q = randn({c.N, c.H, c.L, c.E}).to(dt), k = randn({c.N, c.H, c.S, c.E}).to(dt),
             v = randn({c.N, c.H, c.S, c.Ev}).to(dt), gy = randn({c.N, c.H, c.L, c.Ev}).to(dt);
      Tensor mask;
      if (c.mask == 1 || c.mask == 4) {
        mask = rand({c.L, c.S}).gt(0.3);
        mask.select(1, 0).fill_(1);
        if (c.mask == 4) mask.select(0, c.L / 2).fill_(0);  // NaN on both sides
      } else if (c.mask == 2) {
        mask = randn({c.N, 1, 1, c.S}, {.dtype = half ? DType::f32 : dt});
        mask.select(3, c.S - 1).fill_(-INFINITY);
      } else if (c.mask == 3) {
        mask = randn({c.L, c.S}).to(dt);
      }
      auto grads = [&](const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& m,
                       const Tensor& g, AttentionBackend b) {
        AttentionBackendScope scope(b);
        Tensor qq = q0.detach().requires_grad_(), kk = k0.detach().requires_grad_(),
               vv = v0.detach().requires_grad_();
        Tensor y = scaled_dot_product_attention(qq, kk, vv, m, 0.0, c.causal);
        y.backward(g);
        return std::vector<Tensor>{y.detach().cpu(), qq.grad().cpu(), kk.grad().cpu(),
                                   vv.grad().cpu()};
      };
      auto f64 = [](const Tensor& t) { return t.defined() ? t.to(DType::f64) : t; };
      const Tensor ref_mask = mask.defined() && mask.dtype() != DType::b8 ? f64(mask) : mask;
      auto ref = grads(f64(q), f64(k), f64(v), ref_mask, f64(gy), AttentionBackend::unfused);
      auto gpu = grads(q.to(kGPU), k.to(kGPU), v.to(kGPU), mask.defined() ? mask.to(kGPU) : mask,
                       gy.to(kGPU), AttentionBackend::fused);
      const Tols t = tols(dt);
      // the one-pass kernel rounds once; where it does not apply (head dims over 128, or a
      // device without it) the forward is the blocked form, rounding like the backward
      const bool kernel =
          attention_fused_forward_kernel.has(kGPU.kind) && c.E <= 128 && c.Ev <= 128;
      SL_CHECK_CLOSE(gpu[0].to(DType::f64), ref[0], kernel ? t.fwd_r : t.grad_r,
                     kernel ? t.fwd_a : t.grad_a);
      for (size_t i = 1; i < 4; ++i) {
        CAPTURE(i);
        SL_CHECK_CLOSE(gpu[i].to(DType::f64), ref[i], t.grad_r, t.grad_a);
      }
    }
  }
}

TEST_CASE("cuda fused attention: the kernel itself, against the blocked form on the GPU" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("fused attention kernel");
  // ops::attention_fused_forward takes the kernel where it applies; forcing its fallback (the
  // blocked form) on the same device compares the two forwards directly. float32 only: the
  // blocked form rounds scores and probabilities to 16 bits, the kernel does not.
  manual_seed(62);
  Tensor q = randn({2, 4, 70, 64}).to(kGPU), k = randn({2, 4, 90, 64}).to(kGPU),
         v = randn({2, 4, 90, 48}).to(kGPU);
  Tensor mask = rand({70, 90}).gt(0.2).to(kGPU);
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    Tensor fused = ops::attention_fused_forward(q, k, v, mask, causal, 0.125);
    // f64 on the GPU has no kernel: the same attention through the blocked form, in many blocks
    const int64_t prev = ops::set_attention_block_elements(4 * 90 * 7);
    Tensor blocked = ops::attention_fused_forward(q.to(DType::f64), k.to(DType::f64),
                                                  v.to(DType::f64), mask, causal, 0.125);
    ops::set_attention_block_elements(prev);
    SL_CHECK_CLOSE(fused.cpu().to(DType::f64), blocked.cpu(), 2e-4, 2e-4);  // see the file comment
  }
}

TEST_CASE("cuda fused attention: a NaN score makes its row NaN, even after masked keys" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("fused attention NaN scores");
  // Head dim 32: the kernel's key tiles hold 32 keys. In row 3 the first tile's keys are all
  // masked (-inf) but one whose additive mask is NaN, and the later tiles' are finite: the
  // kernel's running maximum is still -inf when it meets the NaN, where a weight of 0 would drop
  // it. The unfused softmax (the reference) gives NaN for the whole row. Row 7: a wholly masked
  // first tile, then finite keys, which must give that row's finite values.
  manual_seed(63);
  const int64_t L = 12, S = 80, E = 32;
  Tensor q = randn({1, 2, L, E}), k = randn({1, 2, S, E}), v = randn({1, 2, S, E});
  Tensor mask = randn({L, S});
  mask.select(0, 3).narrow(0, 0, 32).fill_(-INFINITY);
  mask.select(0, 3).narrow(0, 5, 1).fill_(NAN);
  mask.select(0, 7).narrow(0, 0, 32).fill_(-INFINITY);
  Tensor ref;
  {
    AttentionBackendScope scope(AttentionBackend::unfused);
    ref = scaled_dot_product_attention(q.to(DType::f64), k.to(DType::f64), v.to(DType::f64),
                                       mask.to(DType::f64), 0.0, false);
  }
  CHECK(ref.select(2, 3).isnan().all().item<bool>());
  CHECK(ref.select(2, 7).isfinite().all().item<bool>());
  Tensor gpu = ops::attention_fused_forward(q.to(kGPU), k.to(kGPU), v.to(kGPU), mask.to(kGPU),
                                            false, 1.0 / std::sqrt(double(E)));
  SL_CHECK_CLOSE(gpu.cpu().to(DType::f64), ref, 2e-4, 2e-4);  // NaN where ref is NaN
}

// The automatic backend takes the fused path for memory alone, on the GPU as on the CPU: the first
// GPU run measured the one-pass kernel several times slower than the unfused path (README).
TEST_CASE(
    "cuda attention: the automatic backend takes the fused path only for more scores "
    "than one block" *
    sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("attention backend choice");
  manual_seed(62);
  Tensor q = randn({2, 5, 8}).to(kGPU).requires_grad_(), k = randn({2, 6, 8}).to(kGPU),
         v = randn({2, 6, 8}).to(kGPU);
  auto path = [&] { return std::string(scaled_dot_product_attention(q, k, v).grad_fn()->name()); };
  REQUIRE(attention_backend() == AttentionBackend::automatic);
  const int64_t scores = 2 * 5 * 6;
  const int64_t prev = ops::set_attention_block_elements(scores);
  CHECK(path() != "FusedAttentionBackward");  // one block holds them all: unfused
  ops::set_attention_block_elements(scores - 1);
  CHECK(path() == "FusedAttentionBackward");
  ops::set_attention_block_elements(prev);
}
