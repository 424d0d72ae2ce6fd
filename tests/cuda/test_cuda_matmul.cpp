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

TEST_CASE("cuda parity: mm / bmm / matmul for every dtype and layout") {
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

TEST_CASE("cuda parity: bmm_kernel with alpha and beta; empty inner dim") {
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

TEST_CASE("cuda: TF32 matmul is opt-in and close to float32") {
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
