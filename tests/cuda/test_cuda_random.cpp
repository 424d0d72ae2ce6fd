// The same Philox stream on CPU and GPU (Note [Random streams]): the same seed gives the same
// numbers for every distribution and dtype.
#include "cuda_testing.h"

using namespace sl;
using sl::testing::kGPU;

TEST_CASE("cuda: rand/randn/randint/bernoulli give the CPU's numbers for the same seed" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("random parity");
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    CAPTURE(dt);
    Generator gc(1234), gg(1234);
    SL_CHECK_CLOSE(rand({1001}, {.dtype = dt, .device = kGPU}, &gg).cpu(),
                   rand({1001}, {.dtype = dt}, &gc), 0, 0);
    // Box-Muller in double: CUDA's log/sin/cos are within 2 ulp of glibc's, which can move the
    // last bit of a double (not of the rounded float, in practice).
    double rt = dt == DType::f64 ? 1e-14 : 0;
    SL_CHECK_CLOSE(randn({1003}, {.dtype = dt, .device = kGPU}, &gg).cpu(),
                   randn({1003}, {.dtype = dt}, &gc), rt, rt);
    Tensor p = full({999}, 0.3, {.dtype = dt});
    SL_CHECK_CLOSE(bernoulli(p.to(kGPU), &gg).cpu(), bernoulli(p, &gc), 0, 0);
    CHECK(gg.state() == gc.state());
  }
  for (DType dt : {DType::i64, DType::i32, DType::f32}) {
    CAPTURE(dt);
    Generator gc(99), gg(99);
    SL_CHECK_CLOSE(randint(-5, 1000, {777}, {.dtype = dt, .device = kGPU}, &gg).cpu(),
                   randint(-5, 1000, {777}, {.dtype = dt}, &gc), 0, 0);
  }
  // uniform_/normal_ with parameters, and on a non-contiguous view
  Generator gc(5), gg(5);
  Tensor h = zeros({20, 30}), d = zeros({20, 30}, {.device = kGPU});
  h.t().uniform_(-2, 3, &gc);
  d.t().uniform_(-2, 3, &gg);
  SL_CHECK_CLOSE(d.cpu(), h, 0, 0);
  h.normal_(1.5, 0.25, &gc);
  d.normal_(1.5, 0.25, &gg);
  SL_CHECK_CLOSE(d.cpu(), h, 0, 0);
}
