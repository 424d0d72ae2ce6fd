// Parity of the CUDA reduce family with the CPU: every reduction over single, multiple and all
// dims, for the shapes that select each kernel path (rows with 32 or 256 threads, columns, R cut
// into chunks), arg-reductions with ties and NaN, cumsum.
#include <cmath>

#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "cuda_testing.h"

using namespace sl;
using sl::testing::kGPU;
using sl::testing::reduce_tol;

namespace {

struct Case {
  Shape shape;
  std::vector<int64_t> dims;
  const char* path;  // which kernel path the shape selects (core/cuda/reduce.cuh)
};

const Case kCases[] = {
    {{50, 40}, {1}, "rows, 32 threads"},
    {{6, 3000}, {1}, "rows, 256 threads"},
    {{3, 9000}, {1}, "rows cut into chunks"},
    {{70000}, {}, "one row cut into chunks"},
    {{40, 50}, {0}, "columns"},
    {{2, 300, 7}, {1}, "columns cut into chunks"},
    {{4, 5, 6}, {0, 2}, "non-adjacent dims (permuted)"},
    {{4, 5, 6}, {}, "all dims"},
    {{3, 0, 4}, {1}, "zero-length reduction"},
};

}  // namespace

TEST_CASE("cuda parity: sum, mean, prod, var, norm, logsumexp, all, any" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("reduce parity");
  manual_seed(4);
  const ReduceOp ops_list[] = {ReduceOp::sum, ReduceOp::mean, ReduceOp::prod, ReduceOp::max,
                               ReduceOp::min, ReduceOp::var,  ReduceOp::norm, ReduceOp::logsumexp,
                               ReduceOp::all, ReduceOp::any};
  for (const Case& c : kCases) {
    Tensor x64 = randn(c.shape, {.dtype = DType::f64});
    for (ReduceOp op : ops_list) {
      bool empty_r = shape_numel(c.shape) == 0;
      if (empty_r && (op == ReduceOp::max || op == ReduceOp::min)) continue;
      for (DType dt :
           {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::b8}) {
        CAPTURE(reduce_op_name(op));
        CAPTURE(dt);
        CAPTURE(c.path);
        // prod of thousands of normals under/overflows: values near 1 for floats, and -1, 0, 1
        // (after truncation) for integers
        Tensor src = x64 * 3;
        if (op == ReduceOp::prod) {
          src = is_floating(dt) ? x64 * 0.01 + 1 : ops::clamp(x64, Scalar(-1.9), Scalar(1.9));
        }
        Tensor x = src.to(dt);
        if (!is_floating(dt) &&
            (op == ReduceOp::mean || op == ReduceOp::var || op == ReduceOp::norm)) {
          // no integer result dtype: both devices refuse, as PyTorch does
          CHECK_THROWS_AS(ops::reduce(op, x.to(kGPU), c.dims, false), DTypeError);
          CHECK_THROWS_AS(ops::reduce(op, x, c.dims, false), DTypeError);
          continue;
        }
        auto tol = reduce_tol(is_floating(dt) ? dt : DType::f32);
        if (op == ReduceOp::var || op == ReduceOp::norm || op == ReduceOp::logsumexp) {
          tol = {tol.rtol * 10, tol.atol * 10};  // two passes and exp/log/sqrt of the result
        }
        Tensor g = ops::reduce(op, x.to(kGPU), c.dims, false);
        Tensor h = ops::reduce(op, x, c.dims, false);
        CHECK(g.dtype() == h.dtype());
        SL_CHECK_CLOSE_TOL(g.cpu(), h, tol);
        if (op == ReduceOp::norm) {
          for (double p : {1.0, 3.0, double(INFINITY)}) {
            ReduceParams prm;
            prm.p = p;
            SL_CHECK_CLOSE_TOL(ops::reduce(op, x.to(kGPU), c.dims, true, prm).cpu(),
                               ops::reduce(op, x, c.dims, true, prm), tol);
          }
        }
        if (op == ReduceOp::var) {
          ReduceParams prm;
          prm.correction = 0;
          SL_CHECK_CLOSE_TOL(ops::reduce(op, x.to(kGPU), c.dims, false, prm).cpu(),
                             ops::reduce(op, x, c.dims, false, prm), tol);
        }
      }
    }
  }
}

TEST_CASE("cuda parity: NaN propagates through max, min and sum" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("reduce NaN");
  Tensor x = randn({8, 5000});
  x.select(0, 3).select(0, 4000).fill_(NAN);
  Tensor g = x.to(kGPU);
  for (ReduceOp op : {ReduceOp::max, ReduceOp::min, ReduceOp::sum, ReduceOp::norm}) {
    CAPTURE(reduce_op_name(op));
    SL_CHECK_CLOSE(ops::reduce(op, g, {1}, false).cpu(), ops::reduce(op, x, {1}, false), 1e-5,
                   1e-5);
    SL_CHECK_CLOSE(ops::reduce(op, g, {}, false).cpu(), ops::reduce(op, x, {}, false), 1e-5, 1e-5);
  }
}

TEST_CASE("cuda parity: max/min with indices: first extremum, ties, NaN" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("arg reductions");
  manual_seed(5);
  Tensor ties = tensor({1.0f, 3.0f, 3.0f, -2.0f, -2.0f, 0.0f, 3.0f}).view({1, 7});
  for (bool is_max : {true, false}) {
    auto [gv, gi] = ops::arg_reduce(is_max, ties.to(kGPU), 1, false);
    auto [cv, ci] = ops::arg_reduce(is_max, ties, 1, false);
    SL_CHECK_CLOSE(gv.cpu(), cv, 0, 0);
    SL_CHECK_CLOSE(gi.cpu(), ci, 0, 0);
  }
  Tensor withnan = tensor({1.0f, NAN, 5.0f, NAN}).view({1, 4});
  auto [nv, ni] = ops::arg_reduce(true, withnan.to(kGPU), 1, false);
  CHECK(ni.cpu().to_vector<int64_t>()[0] == 1);
  CHECK(std::isnan(nv.cpu().to_vector<float>()[0]));
  for (const Case& c : kCases) {
    if (c.dims.size() != 1 || shape_numel(c.shape) == 0) continue;
    for (DType dt :
         {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::b8}) {
      CAPTURE(c.path);
      CAPTURE(dt);
      Tensor x = (randn(c.shape) * 4).to(dt);  // integer casts create many ties
      for (bool is_max : {true, false}) {
        auto [gv, gi] = ops::arg_reduce(is_max, x.to(kGPU), c.dims[0], true);
        auto [cv, ci] = ops::arg_reduce(is_max, x, c.dims[0], true);
        SL_CHECK_CLOSE(gv.cpu(), cv, 0, 0);
        SL_CHECK_CLOSE(gi.cpu(), ci, 0, 0);
      }
    }
  }
}

TEST_CASE("cuda parity: cumsum along rows (tiled scan) and columns" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("cumsum");
  manual_seed(6);
  for (DType dt :
       {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::b8}) {
    CAPTURE(dt);
    Tensor x = (randn({3, 2500}) * 2).to(dt);
    // the running sums grow like sqrt(n): compare with the tolerance of a sum
    auto tol = reduce_tol(is_floating(dt) ? dt : DType::f32);
    for (int64_t d : {0, 1, -1}) {
      CAPTURE(d);
      SL_CHECK_CLOSE_TOL(ops::cumsum(x.to(kGPU), d).cpu(), ops::cumsum(x, d), tol);
    }
  }
}

TEST_CASE("cuda: reductions are deterministic run to run" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("reduce determinism");
  Tensor x = randn({3, 100000}).to(kGPU);
  Tensor a = ops::reduce(ReduceOp::sum, x, {1}, false).cpu();
  Tensor b = ops::reduce(ReduceOp::sum, x, {1}, false).cpu();
  SL_CHECK_CLOSE(a, b, 0, 0);
}
