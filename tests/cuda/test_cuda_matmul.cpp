// Parity of CUDA matmul (cuBLAS for floats, a plain kernel for integers) with the CPU: every
// dtype, transposed and strided operands, batch broadcasting, 1-d operands, beta accumulation,
// TF32.
#include <cmath>

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
