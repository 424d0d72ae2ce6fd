// Parity of CUDA matmul (cuBLAS for floats, a plain kernel for integers) with the CPU: every
// dtype, transposed and strided operands, batch broadcasting, 1-d operands, beta accumulation,
// TF32; linear/addmm through the cuBLASLt bias epilogue and linear_act through its tanh-GELU
// epilogues (and the fallbacks: erf-gelu, relu, no algorithm).
#include <cmath>
#include <limits>

#include "core/amp.h"
#include "core/cuda/lt_rules.h"
#include "core/ops/matmul.h"
#include "cuda_testing.h"

using namespace sl;
using sl::testing::kGPU;

namespace {

/// Both sides accumulate in float32 (double for f64) in different orders: the error grows like
/// K * eps * |a||b|; inputs are N(0,1), so |a @ b| ~ sqrt(K). f16/bf16 outputs are also rounded
/// once (one ulp of the result).
sl::testing::Tol matmul_tol(DType dt, int64_t K) {
  double k = static_cast<double>(K);
  switch (dt) {
    case DType::f64:
      return {1e-12, 1e-12 * k};
    case DType::f32:
      return {1e-5, 2e-6 * k};
    case DType::f16:
      return {2e-3, 2e-4 * k};
    case DType::bf16:
      return {1.6e-2, 1e-3 * k};
    default:
      return {0, 0};
  }
}

}  // namespace

TEST_CASE("cuda parity: mm / bmm / matmul for every dtype and layout" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("matmul parity");
  manual_seed(7);
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32}) {
    CAPTURE(dt);
    const int64_t M = 37, K = 70, N = 45;
    Tensor a = randn({M, K}), b = randn({K, N});
    if (!is_floating(dt)) {
      a = a * 3;
      b = b * 3;
    }
    a = a.to(dt);
    b = b.to(dt);
    Tensor ga = a.to(kGPU), gb = b.to(kGPU);
    auto tol = matmul_tol(dt, K);
    SL_CHECK_CLOSE_TOL(ops::mm(ga, gb).cpu(), ops::mm(a, b), tol);
    // transposed operands (column-major layouts) and a row-strided slice
    Tensor gat = a.t().contiguous().to(kGPU).t(), gbt = b.t().contiguous().to(kGPU).t();
    CHECK(gat.stride(0) == 1);
    SL_CHECK_CLOSE_TOL(ops::mm(gat, gbt).cpu(), ops::mm(a, b), tol);
    SL_CHECK_CLOSE_TOL(ops::mm(gat, gb).cpu(), ops::mm(a, b), tol);
    Tensor wide = randn({M, 2 * K}).to(dt);
    Tensor sl_a = wide.slice(1, 0, 2 * K, 2);  // no unit stride: copied before cuBLAS
    SL_CHECK_CLOSE_TOL(ops::mm(wide.to(kGPU).slice(1, 0, 2 * K, 2), gb).cpu(), ops::mm(sl_a, b),
                       tol);
    // batched, and a batch broadcast (stride 0)
    Tensor ba = randn({3, M, K}).to(dt), bb = randn({3, K, N}).to(dt);
    if (!is_floating(dt)) {
      ba = (randn({3, M, K}) * 3).to(dt);
      bb = (randn({3, K, N}) * 3).to(dt);
    }
    SL_CHECK_CLOSE_TOL(ops::bmm(ba.to(kGPU), bb.to(kGPU)).cpu(), ops::bmm(ba, bb), tol);
    SL_CHECK_CLOSE_TOL(ops::matmul(ba.to(kGPU), gb).cpu(), ops::matmul(ba, b), tol);
    SL_CHECK_CLOSE_TOL(ops::matmul(ga, bb.to(kGPU)).cpu(), ops::matmul(a, bb), tol);
    // 1-d operands
    Tensor v = b.select(1, 0).contiguous();
    SL_CHECK_CLOSE_TOL(ops::matmul(ga, v.to(kGPU)).cpu(), ops::matmul(a, v), tol);
    SL_CHECK_CLOSE_TOL(ops::matmul(v.to(kGPU), gbt).cpu(), ops::matmul(v, b), tol);
  }
}

TEST_CASE("cuda parity: bmm_kernel with alpha and beta; empty inner dim" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("bmm alpha/beta");
  Tensor a = randn({2, 5, 4}), b = randn({2, 4, 3}), c = randn({2, 5, 3});
  Tensor gc = c.to(kGPU);
  bmm_kernel(DeviceKind::cuda, gc, a.to(kGPU), b.to(kGPU), Scalar(0.5), Scalar(2.0));
  Tensor cc = c.clone();
  bmm_kernel(DeviceKind::cpu, cc, a, b, Scalar(0.5), Scalar(2.0));
  SL_CHECK_CLOSE(gc.cpu(), cc, 1e-5, 1e-5);
  Tensor e = ops::mm(randn({3, 0}).to(kGPU), randn({0, 4}).to(kGPU));
  SL_CHECK_CLOSE(e.cpu(), zeros({3, 4}), 0, 0);
  SL_CHECK_THROWS(ops::mm(randn({3, 2}).to(kGPU), randn({3, 2}).to(kGPU)), ShapeError,
                  "mm: shapes [3, 2] and [3, 2] cannot be multiplied");
}

TEST_CASE("cuda: TF32 matmul is opt-in and close to float32" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("TF32");
  Tensor a = randn({256, 512}), b = randn({512, 128});
  Tensor ref = ops::mm(a, b);
  cuda::set_allow_tf32(true);
  Tensor t = ops::mm(a.to(kGPU), b.to(kGPU)).cpu();
  cuda::set_allow_tf32(false);
  // TF32 keeps 10 mantissa bits of each input: relative input error 2^-11, growing like sqrt(K)
  // over a sum of K products of unit normals (|result| ~ sqrt(K)).
  SL_CHECK_CLOSE(t, ref, 1e-2, 1e-2 * std::sqrt(512.0));
  Tensor full32 = ops::mm(a.to(kGPU), b.to(kGPU)).cpu();
  SL_CHECK_CLOSE(full32, ref, 1e-5, 1e-5 * 512);
}

TEST_CASE("cuda parity: linear and addmm through the cuBLASLt bias epilogue" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("linear/addmm bias epilogue");
  manual_seed(11);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    CAPTURE(dt);
    const int64_t rows = 37, in = 70, out = 45;
    // f32 reference from the same (rounded) inputs; the bias add is one more rounding of the
    // output, within matmul_tol's one-ulp allowance for 16-bit results.
    Tensor x = randn({rows, in}).to(dt), w = randn({out, in}).to(dt), b = randn({out}).to(dt);
    Tensor ref = ops::linear(x.to(DType::f32), w.to(DType::f32), b.to(DType::f32));
    auto tol = matmul_tol(dt, in);
    Tensor gx = x.to(kGPU), gw = w.to(kGPU), gb = b.to(kGPU);
    SL_CHECK_CLOSE_TOL(ops::linear(gx, gw, gb).cpu().to(DType::f32), ref, tol);
    // 3-d input, a transposed (column-major) weight, a strided bias
    Tensor x3 = randn({2, 5, in}).to(dt);
    Tensor ref3 = ops::linear(x3.to(DType::f32), w.to(DType::f32), b.to(DType::f32));
    Tensor gwt = w.t().contiguous().to(kGPU).t();
    Tensor wide_b = randn({2 * out}).to(dt);
    wide_b.slice(0, 0, 2 * out, 2).copy_(b);
    Tensor gb_strided = wide_b.to(kGPU).slice(0, 0, 2 * out, 2);
    SL_CHECK_CLOSE_TOL(ops::linear(x3.to(kGPU), gwt, gb_strided).cpu().to(DType::f32), ref3, tol);
    // addmm: a [M, K] @ b [K, N] + bias [N]; alpha/beta other than 1 take the unfused path
    Tensor a = randn({rows, in}).to(dt), m = randn({in, out}).to(dt);
    Tensor ref_mm = ops::addmm(b.to(DType::f32), a.to(DType::f32), m.to(DType::f32));
    SL_CHECK_CLOSE_TOL(ops::addmm(gb, a.to(kGPU), m.to(kGPU)).cpu().to(DType::f32), ref_mm, tol);
    Tensor ref_ab = ops::addmm(b.to(DType::f32), a.to(DType::f32), m.to(DType::f32), 0.5, 2.0);
    SL_CHECK_CLOSE_TOL(ops::addmm(gb, a.to(kGPU), m.to(kGPU), 0.5, 2.0).cpu().to(DType::f32),
                       ref_ab, tol);
  }
  // f64 has no epilogue path here: the unfused GEMM + add
  Tensor x = randn({4, 6}, {.dtype = DType::f64}), w = randn({3, 6}, {.dtype = DType::f64});
  Tensor b = randn({3}, {.dtype = DType::f64});
  SL_CHECK_CLOSE_TOL(ops::linear(x.to(kGPU), w.to(kGPU), b.to(kGPU)).cpu(), ops::linear(x, w, b),
                     matmul_tol(DType::f64, 6));
}

TEST_CASE("cuda parity: linear forward and backward" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("linear autograd");
  manual_seed(12);
  Tensor x = randn({3, 4, 16}).requires_grad_(), w = randn({8, 16}).requires_grad_();
  Tensor b = randn({8}).requires_grad_();
  // float32 GEMMs of K = 16 (forward) and K = 12 (weight gradient) terms: see matmul_tol
  auto tol = matmul_tol(DType::f32, 16);
  sl::testing::check_gpu_parity([](const TensorList& t) { return linear(t[0], t[1], t[2]); },
                                {x, w, b}, tol.rtol, tol.atol);
}

namespace {

const Activation kActs[] = {Activation::relu, Activation::gelu, Activation::gelu_tanh};

/// Values k * step, k a uniform integer in [-lim, lim], in dtype dt. With the steps used below
/// (powers of two) and at most a few hundred terms, every product and partial sum of a GEMM is a
/// small multiple of a power of two held exactly in float32 and, rounded once, in f16 and bf16
/// (at most 8 significant bits): the GEMMs of linear_act are exact on both devices, so the CPU
/// and the GPU see the same pre-activation and what remains to compare is the activation.
Tensor grid_values(const Shape& s, int64_t lim, double step, DType dt) {
  return (randint(-lim, lim + 1, s).to(DType::f32) * step).to(dt);
}

/// linear_act on the GPU against the CPU from the same grid inputs. relu (and its mask) is exact:
/// 0. The gelus differ by the activation's evaluation: CUDA's erff/tanhf against glibc's (a few
/// float ulps), and for the fused tanh-gelu cuBLASLt's own tanh, whose accuracy is undocumented:
/// float32 allows 1e-4, which still tells tanh-gelu from erf-gelu (up to 4.7e-4 apart near
/// |x| = 2). 16-bit results are rounded once or twice from float (f16: 2^-11, bf16: 2^-8 relative
/// per rounding, spacing near 1: 9.8e-4 and 7.8e-3); in the gradients those differences pass
/// through one exact-product GEMM with float32 accumulation and one more rounding.
sl::testing::Tol linear_act_tol(DType dt, Activation act) {
  if (act == Activation::relu) return {0, 0};
  switch (dt) {
    case DType::f32:
      return {1e-4, 1e-4};
    case DType::f16:
      return {2e-3, 1e-3};
    case DType::bf16:
      return {1.6e-2, 8e-3};
    default:
      return {1e-12, 1e-12};
  }
}

/// {output, grad x, grad w, grad bias} of linear_act on fresh leaf copies of x, w, b on `dev`,
/// with upstream gradient `up`; the count of fused calls it made is added to *fused.
TensorList linear_act_run(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& up,
                          Activation act, Device dev, int64_t* fused) {
  auto leaf = [dev](const Tensor& t) { return t.detach().to(dev).clone().requires_grad_(); };
  Tensor xl = leaf(x), wl = leaf(w), bl = b.defined() ? leaf(b) : Tensor();
  const int64_t before = ops::linear_act_fused_count();
  Tensor y = linear_act(xl, wl, bl, act);
  *fused += ops::linear_act_fused_count() - before;
  y.backward(up.to(dev));
  return {y.detach().cpu(), xl.grad().cpu(), wl.grad().cpu(),
          bl.defined() ? bl.grad().cpu() : Tensor()};
}

/// Whether this build's "GPU" has the epilogue kernel (the fake GPU of Note [Fake GPU] has not:
/// the CPU registers none): the fused counts below are expected only then.
bool gpu_has_epilogue() {
  return addmm_act_kernel.has(sl::testing::kGPU.kind);
}

void check_linear_act_parity(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& up,
                             Activation act, int64_t* fused_gpu) {
  int64_t fused_cpu = 0;
  TensorList ref = linear_act_run(x, w, b, up, act, kCPU, &fused_cpu);
  TensorList got = linear_act_run(x, w, b, up, act, sl::testing::kGPU, fused_gpu);
  CHECK(fused_cpu == 0);
  const auto tol = linear_act_tol(x.dtype(), act);
  for (size_t i = 0; i < ref.size(); ++i) {
    CAPTURE(i);  // 0: output, then the gradients of x, w, bias
    REQUIRE(got[i].defined() == ref[i].defined());
    if (ref[i].defined()) SL_CHECK_CLOSE_TOL(got[i], ref[i], tol);
  }
}

}  // namespace

TEST_CASE("cuda parity: linear_act through the cuBLASLt epilogues, forward and backward" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("linear_act epilogues");
  manual_seed(13);
  // Aligned sizes every dtype's Lt kernels take: the epilogue path must be the one that ran for
  // tanh-gelu (GELU_AUX_BIAS: the backward reads its pre-activation), and not for erf-gelu (Lt's
  // GELU is the tanh approximation) or relu (Lt's RELU is not documented to keep a NaN): BIAS
  // epilogue, then our activation kernel.
  const int64_t batch = 2, rows = 32, in = 64, out = 256;
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (Activation act : kActs) {
      for (bool with_bias : {true, false}) {
        CAPTURE(dt);
        const std::string act_name = activation_name(act);
        CAPTURE(act_name);
        CAPTURE(with_bias);
        Tensor x = grid_values({batch, rows, in}, 1, 0.5, dt);
        Tensor w = grid_values({out, in}, 1, 0.25, dt);
        Tensor b = with_bias ? grid_values({out}, 8, 0.125, dt) : Tensor();
        Tensor up = grid_values({batch, rows, out}, 1, 1.0, dt);
        int64_t fused = 0;
        check_linear_act_parity(x, w, b, up, act, &fused);
        const bool epilogue = gpu_has_epilogue() && act == Activation::gelu_tanh;
        CHECK_MESSAGE(fused == (epilogue ? 1 : 0), "the cuBLASLt epilogue path was "
                                                       << std::string(fused ? "" : "not ")
                                                       << "taken");
        // forward only (no_grad): GELU_BIAS without the pre-activation
        NoGradGuard ng;
        const int64_t before = ops::linear_act_fused_count();
        Tensor y = linear_act(x.to(sl::testing::kGPU), w.to(sl::testing::kGPU),
                              with_bias ? b.to(sl::testing::kGPU) : Tensor(), act);
        CHECK(ops::linear_act_fused_count() - before == (epilogue ? 1 : 0));
        SL_CHECK_CLOSE_TOL(y.cpu(), linear_act(x, w, b, act), linear_act_tol(dt, act));
      }
    }
  }
  // The parity above can tell the gelus apart: on these pre-activations they differ by more than
  // float32's allowance.
  Tensor pre = ops::linear(grid_values({rows, in}, 1, 0.5, DType::f32),
                           grid_values({out, in}, 1, 0.25, DType::f32), Tensor());
  Tensor gap = (gelu(pre, "none") - gelu(pre, "tanh")).abs().max();
  CHECK(gap.item<float>() > 2e-4);
}

TEST_CASE("cuda parity: linear_act where the epilogue is declined or Lt may have no algorithm" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("linear_act fallbacks");
  manual_seed(14);
  // Odd sizes (N = 45: the tanh-gelu pre-activation is stored with rows padded to 48, Lt's
  // multiple of 8) and an input whose data starts one element past an aligned address: Lt may or
  // may not offer an algorithm (its alignment rules depend on the kernel); either way the result
  // must match, and the path taken is reported.
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (Activation act : kActs) {
      CAPTURE(dt);
      const std::string act_name = activation_name(act);
      CAPTURE(act_name);
      Tensor x = grid_values({37, 71}, 1, 0.5, dt).narrow(1, 1, 70);  // misaligned start
      Tensor w = grid_values({45, 70}, 1, 0.25, dt);
      Tensor b = grid_values({45}, 8, 0.125, dt);
      Tensor up = grid_values({37, 45}, 1, 1.0, dt);
      // linear_act_run copies x to the GPU contiguously; misalign it there too
      int64_t fused = 0;
      check_linear_act_parity(x.contiguous(), w, b, up, act, &fused);
      MESSAGE("linear_act " << act_name << " " << std::string(dtype_name(dt))
                            << " [37, 70] x [45, 70]^T: "
                            << std::string(fused ? "fused" : "fallback"));
      Tensor gx = grid_values({37, 71}, 1, 0.5, dt).to(sl::testing::kGPU).narrow(1, 1, 70);
      SL_CHECK_CLOSE_TOL(
          linear_act(gx, w.to(sl::testing::kGPU), b.to(sl::testing::kGPU), act).cpu(),
          linear_act(gx.cpu(), w, b, act), linear_act_tol(dt, act));
    }
  }
  // float64: no Lt path (GEMM + add + activation); an empty input: nothing to multiply
  const int64_t before = ops::linear_act_fused_count();
  Tensor x = randn({5, 6}, {.dtype = DType::f64}), w = randn({4, 6}, {.dtype = DType::f64});
  Tensor b = randn({4}, {.dtype = DType::f64});
  int64_t fused = 0;
  check_linear_act_parity(x, w, b, randn({5, 4}, {.dtype = DType::f64}), Activation::gelu_tanh,
                          &fused);
  Tensor e = linear_act(randn({0, 6}).to(sl::testing::kGPU), randn({4, 6}).to(sl::testing::kGPU),
                        randn({4}).to(sl::testing::kGPU), Activation::relu);
  CHECK(e.sizes() == Shape{0, 4});
  CHECK(ops::linear_act_fused_count() == before);
  if (sl::testing::kGPU.kind != DeviceKind::cpu) {
    SL_CHECK_THROWS(
        linear_act(randn({3, 4}).to(sl::testing::kGPU), randn({2, 4}), Tensor(), Activation::relu),
        DeviceError, "linear_act: expected all tensors on the same device");
  }
}

TEST_CASE("cuda: linear_act relu keeps a NaN pre-activation NaN and passes its gradient" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("linear_act relu NaN");
  // PyTorch's linear then relu: a NaN in row 0 of x makes row 0 of the pre-activation NaN, which
  // relu keeps (an fmax-style RELU epilogue would give 0), and relu's backward passes the
  // gradient there.
  // Aligned sizes, so that a fused relu epilogue would be taken if it were offered.
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    CAPTURE(dt);
    Tensor x = grid_values({32, 64}, 1, 0.5, dt);
    x[0][5].fill_(std::numeric_limits<double>::quiet_NaN());
    Tensor w = grid_values({256, 64}, 1, 0.25, dt), b = grid_values({256}, 8, 0.125, dt);
    Tensor gb = b.to(sl::testing::kGPU).requires_grad_();
    Tensor y = linear_act(x.to(sl::testing::kGPU), w.to(sl::testing::kGPU), gb, Activation::relu);
    Tensor nan_row = y.cpu()[0].to(DType::f32);
    CHECK(nan_row.isnan().all().item<bool>());
    CHECK_FALSE(y.cpu().slice(0, 1, 32).isnan().any().item<bool>());
    y.backward(ones_like(y));
    // bias gradient: a column's count of rows whose output is > 0 or NaN; row 0 counts in every
    // column, so each entry is at least 1 (0 there would mean the NaN stopped the gradient)
    Tensor pass = y.detach().cpu().to(DType::f32).slice(0, 1, 32).gt(0).to(DType::f32).sum({0});
    SL_CHECK_CLOSE(gb.grad().cpu().to(DType::f32), pass + 1, 0, 0);
  }
}

TEST_CASE("cuBLASLt epilogue rules: degenerate and huge dimensions declined, bias alignment") {
  // Note [cuBLASLt epilogue limits]: every dimension in [2, 65535 * 32)
  CHECK(sl::cuda::lt_epilogue_dims_ok(2, 2, 2));
  CHECK(sl::cuda::lt_epilogue_dims_ok(64, 256, 64));
  CHECK_FALSE(sl::cuda::lt_epilogue_dims_ok(1, 256, 64));  // one row (batch-1 inference)
  CHECK_FALSE(sl::cuda::lt_epilogue_dims_ok(64, 1, 64));   // one output feature
  CHECK_FALSE(sl::cuda::lt_epilogue_dims_ok(64, 256, 1));  // K = 1
  CHECK_FALSE(sl::cuda::lt_epilogue_dims_ok(0, 256, 64));
  CHECK(sl::cuda::lt_epilogue_dims_ok(65535 * 32 - 1, 8, 8));
  CHECK_FALSE(sl::cuda::lt_epilogue_dims_ok(65535 * 32, 8, 8));
  CHECK_FALSE(sl::cuda::lt_epilogue_dims_ok(8, int64_t{1} << 40, 8));
  // a bias at a 16-byte multiple goes as it is; one sliced one float in is copied first
  CHECK(sl::cuda::lt_bias_aligned(0x1000));
  CHECK(sl::cuda::lt_bias_aligned(0x1010));
  CHECK_FALSE(sl::cuda::lt_bias_aligned(0x1004));
  CHECK_FALSE(sl::cuda::lt_bias_aligned(0x1008));
}

TEST_CASE("cuda parity: linear with a misaligned bias, one row, or one output" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("linear epilogue limits");
  manual_seed(16);
  // Note [cuBLASLt epilogue limits]: a bias sliced one element into a larger vector (copied to an
  // aligned buffer before the epilogue), and the shapes the epilogue path declines (a single row
  // or a single output: GEMM, then the bias add); each must match the CPU.
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    CAPTURE(dt);
    // f32 reference from the same (rounded) inputs, as in the bias-epilogue case above
    const int64_t in = 64;
    const auto tol = matmul_tol(dt, in);
    auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
    Tensor x = randn({48, in}).to(dt), w = randn({32, in}).to(dt);
    Tensor b_big = randn({33}).to(dt), b = b_big.narrow(0, 1, 32);
    Tensor gb = b_big.to(kGPU).narrow(0, 1, 32);  // 2 or 4 bytes past an aligned address
    SL_CHECK_CLOSE_TOL(f32(ops::linear(x.to(kGPU), w.to(kGPU), gb).cpu()),
                       ops::linear(f32(x), f32(w), f32(b)), tol);
    Tensor x1 = randn({1, in}).to(dt), w1 = randn({1, in}).to(dt), b1 = randn({1}).to(dt);
    SL_CHECK_CLOSE_TOL(f32(ops::linear(x1.to(kGPU), w.to(kGPU), gb).cpu()),
                       ops::linear(f32(x1), f32(w), f32(b)), tol);
    SL_CHECK_CLOSE_TOL(f32(ops::linear(x.to(kGPU), w1.to(kGPU), b1.to(kGPU)).cpu()),
                       ops::linear(f32(x), f32(w1), f32(b1)), tol);
  }
}

TEST_CASE("cuda parity: linear_act under autocast matches the CPU's autocast" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("linear_act autocast");
  manual_seed(15);
  // float32 leaves, a bfloat16 scope on each device: the product and relu run in bfloat16 (exact
  // on the grid), the gradients come back in float32. relu is not fused (Lt's RELU epilogue is
  // not documented to keep a NaN): the GEMM with the BIAS epilogue, then the relu kernel.
  Tensor x = grid_values({16, 64}, 1, 0.5, DType::f32),
         w = grid_values({128, 64}, 1, 0.25, DType::f32);
  Tensor b = grid_values({128}, 8, 0.125, DType::f32),
         up = grid_values({16, 128}, 1, 1.0, DType::bf16);
  TensorList res[2];
  int64_t fused[2] = {0, 0};
  const Device devs[2] = {kCPU, sl::testing::kGPU};
  for (int d = 0; d < 2; ++d) {
    AutocastGuard g(devs[d].kind, DType::bf16);
    res[d] = linear_act_run(x, w, b, up, Activation::relu, devs[d], &fused[d]);
  }
  CHECK(res[1][0].dtype() == DType::bf16);
  CHECK(res[1][2].dtype() == DType::f32);
  CHECK(fused[1] == 0);
  for (size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    SL_CHECK_CLOSE(res[1][i], res[0][i], 0, 0);
  }
}
