// Batch norm and average pooling through cuDNN against the own CUDA kernels and the CPU (Note
// [cuDNN routing]): each case runs on the CPU, on the GPU with sl::cuda::set_cudnn_enabled(true)
// and with it off, and compares outputs, saved statistics, running statistics and gradients.
// Every case also states, through the host routing function, whether it is one cuDNN takes, so
// a routed case is known to have exercised cuDNN. Needs a GPU and a build with cuDNN (skipped,
// and counted as skipped, otherwise).
#include "core/cuda/cudnn_routing.h"
#include "core/ops/norm.h"
#include "core/ops/pool.h"
#include "cuda_testing.h"

using namespace sl;
using sl::testing::kGPU;

namespace {

/// Sets cudnn_enabled for a scope and restores the previous value.
struct CudnnSwitch {
  bool prev = cuda::cudnn_enabled();
  explicit CudnnSwitch(bool on) { cuda::set_cudnn_enabled(on); }
  ~CudnnSwitch() { cuda::set_cudnn_enabled(prev); }
};

bool half(DType dt) {
  return dt == DType::f16 || dt == DType::bf16;
}

/// Tolerances, each side of a comparison computing the same function:
///  - f64: both GPU paths and the CPU compute in double; results agree to a few double ulps
///    (sums of a few hundred terms in different orders), 1e-10 leaves a wide margin.
///  - f32: the own kernels and the CPU sum in double, cuDNN in float: per-channel sums of
///    n = N * S = 168 float terms carry a relative error up to about n * 2^-24 = 1e-5 (random
///    rounding makes it ~sqrt(n) * 2^-24 = 8e-7 in practice), and outputs and gradients are O(1)
///    (normalised data, randn weights and upstream gradients): 1e-4 absolute and relative.
///  - f16 / bf16: every path computes in float from the same 16-bit values and rounds each result
///    to 16 bits once, so results differ where float values straddle a 16-bit rounding boundary:
///    two 16-bit ulps relative (bf16 2 * 2^-7 = 1.6e-2, f16 2 * 2^-10 = 2e-3) as in
///    test_cuda_nn.cpp, with atol (bf16 1e-2, f16 2e-3) for values near zero, where the float
///    differences of cancelling O(1) terms are absolute.
///  - statistics (save_mean, save_invstd, running statistics) have the compute dtype (float32
///    for 16-bit inputs), so 16-bit cases compare them with the f32 tolerance.
sl::testing::Tol bn_tol(DType dt) {
  switch (dt) {
    case DType::f64:
      return {1e-10, 1e-10};
    case DType::f16:
      return {2e-3, 2e-3};
    case DType::bf16:
      return {1.6e-2, 1e-2};
    default:
      return {1e-4, 1e-4};
  }
}
sl::testing::Tol stat_tol(DType dt) {
  return dt == DType::f64 ? bn_tol(DType::f64) : bn_tol(DType::f32);
}

/// Average pooling: window sums of at most 9 terms and one division (f32 a few ulps: 1e-5;
/// f64 1e-12); 16-bit as for batch norm.
sl::testing::Tol pool_tol(DType dt) {
  switch (dt) {
    case DType::f64:
      return {1e-12, 1e-12};
    case DType::f16:
      return {2e-3, 1e-4};
    case DType::bf16:
      return {1.6e-2, 1e-3};
    default:
      return {1e-5, 1e-6};
  }
}

/// Skips (visibly) in builds without cuDNN, where both GPU paths are the own kernels.
#define SL_REQUIRE_CUDNN(what)                                                                \
  do {                                                                                        \
    if (!SL_HAVE_CUDNN) {                                                                     \
      ::sl::testing::report_skip(std::string("CUDA test: ") + (what), "built without cuDNN"); \
      return;                                                                                 \
    }                                                                                         \
  } while (0)

/// One batch-norm run: forward (ops layer, for the saved statistics), running statistics after
/// the update, and the gradients of sum(out * up) through the ops-level backward.
struct BnRun {
  Tensor out, mean, invstd, rm, rv, gx, gw, gb;
};

BnRun run_bn(Device d, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rm0,
             const Tensor& rv0, const Tensor& up, bool training, double eps) {
  BnRun r;
  auto on = [&](const Tensor& t) { return t.defined() ? t.to(d, /*force_copy=*/true) : t; };
  Tensor xd = on(x), wd = on(w), bd = on(b);
  r.rm = on(rm0);
  r.rv = on(rv0);
  ops::NormForward f = ops::batch_norm_forward(xd, r.rm, r.rv, wd, bd, training, 0.1, eps);
  r.out = f.out.cpu();
  r.mean = f.mean.cpu();
  r.invstd = f.rstd.cpu();
  const DType bias_dtype = b.defined() ? b.dtype() : x.dtype();
  auto g = ops::batch_norm_backward(on(up), xd, f, wd, bias_dtype, training, eps,
                                    {true, w.defined(), b.defined()});
  r.gx = g[0].cpu();
  if (g[1].defined()) r.gw = g[1].cpu();
  if (g[2].defined()) r.gb = g[2].cpu();
  if (r.rm.defined()) {
    r.rm = r.rm.cpu();
    r.rv = r.rv.cpu();
  }
  return r;
}

void check_bn_close(const BnRun& a, const BnRun& ref, DType dt) {
  const auto t = bn_tol(dt), st = stat_tol(dt);
  SL_CHECK_CLOSE_TOL(a.out, ref.out, t);
  SL_CHECK_CLOSE_TOL(a.mean, ref.mean, st);
  SL_CHECK_CLOSE_TOL(a.invstd, ref.invstd, st);
  SL_CHECK_CLOSE_TOL(a.gx, ref.gx, t);
  REQUIRE(a.gw.defined() == ref.gw.defined());
  if (a.gw.defined()) SL_CHECK_CLOSE_TOL(a.gw, ref.gw, st);
  if (a.gb.defined()) SL_CHECK_CLOSE_TOL(a.gb, ref.gb, st);
  REQUIRE(a.rm.defined() == ref.rm.defined());
  if (a.rm.defined()) {
    SL_CHECK_CLOSE_TOL(a.rm, ref.rm, st);
    SL_CHECK_CLOSE_TOL(a.rv, ref.rv, st);
  }
}

}  // namespace

TEST_CASE("cudnn parity: batch norm, cuDNN vs own kernels vs CPU" *
          sl::testing::needs_cudnn(/*on_fake=*/false)) {
  SL_REQUIRE_CUDA("cuDNN batch norm parity");
  SL_REQUIRE_CUDNN("cuDNN batch norm parity");
  manual_seed(31);
  const Shape xs{8, 5, 7, 3};  // S = 21 > 1: a shape cuDNN takes
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    // routed parameter dtype (f64 beside f64, else f32), and 16-bit parameters (own kernels)
    std::vector<DType> pdts{dt == DType::f64 ? DType::f64 : DType::f32};
    if (half(dt)) pdts.push_back(dt);
    for (DType pdt : pdts) {
      for (bool affine : {true, false}) {
        for (bool training : {true, false}) {
          for (bool running : {true, false}) {
            if (!training && !running) continue;  // evaluation needs running statistics
            CAPTURE(dt);
            CAPTURE(pdt);
            CAPTURE(affine);
            CAPTURE(training);
            CAPTURE(running);
            Tensor x = randn(xs, {.dtype = dt});
            Tensor w = affine ? randn({5}, {.dtype = pdt}) : Tensor();
            Tensor b = affine ? randn({5}, {.dtype = pdt}) : Tensor();
            Tensor rm = running ? randn({5}, {.dtype = pdt}) : Tensor();
            Tensor rv = running ? rand({5}, {.dtype = pdt}) + 0.5 : Tensor();
            Tensor up = randn(xs, {.dtype = dt});
            cuda::BatchNormCall call{false, training, dt, std::nullopt, 8, 5, 21, 1e-5};
            if (affine || running) call.params = pdt;
            const bool routed = cuda::batch_norm_uses_cudnn(call);
            // f16 with f32 parameters (or none) and f32/f64 go to cuDNN; bf16 never does
            CHECK(routed ==
                  (dt != DType::bf16 && (pdt != dt || !half(dt) || (!affine && !running))));
            BnRun cpu = run_bn(kCPU, x, w, b, rm, rv, up, training, 1e-5);
            BnRun own, dnn;
            {
              CudnnSwitch off(false);
              own = run_bn(kGPU, x, w, b, rm, rv, up, training, 1e-5);
            }
            {
              CudnnSwitch on(true);
              dnn = run_bn(kGPU, x, w, b, rm, rv, up, training, 1e-5);
            }
            check_bn_close(own, cpu, dt);
            check_bn_close(dnn, cpu, dt);
            check_bn_close(dnn, own, dt);
          }
        }
      }
    }
  }
}

TEST_CASE("cudnn parity: batch norm backward takes either path's saved statistics, eps 0.5" *
          sl::testing::needs_cudnn(/*on_fake=*/false)) {
  SL_REQUIRE_CUDA("cuDNN batch norm saved statistics");
  SL_REQUIRE_CUDNN("cuDNN batch norm saved statistics");
  // A large eps makes 1 / sqrt(var + eps) far from 1 / sqrt(var): a cuDNN backward that
  // normalised with another epsilon than the forward's (0.5, which it is handed) instead of
  // reading save_invstd would be off by tens of percent.
  manual_seed(32);
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    Tensor x = (randn({6, 4, 5, 5}, {.dtype = dt}) * 0.5).to(kGPU);
    Tensor w = randn({4}, {.dtype = dt}).to(kGPU), b = randn({4}, {.dtype = dt}).to(kGPU);
    Tensor up = randn({6, 4, 5, 5}, {.dtype = dt}).to(kGPU);
    for (bool fwd_cudnn : {false, true}) {
      CAPTURE(fwd_cudnn);
      ops::NormForward f;
      {
        CudnnSwitch s(fwd_cudnn);
        f = ops::batch_norm_forward(x, Tensor(), Tensor(), w, b, true, 0.1, 0.5);
      }
      std::array<Tensor, 3> own, dnn;
      {
        CudnnSwitch off(false);
        own = ops::batch_norm_backward(up, x, f, w, dt, true, 0.5, {true, true, true});
      }
      {
        CudnnSwitch on(true);
        dnn = ops::batch_norm_backward(up, x, f, w, dt, true, 0.5, {true, true, true});
      }
      for (size_t i = 0; i < 3; ++i) {
        CAPTURE(i);
        SL_CHECK_CLOSE_TOL(dnn[i].cpu(), own[i].cpu(), bn_tol(dt));
      }
    }
  }
}

TEST_CASE("cudnn parity: batch norm of 2-d (own kernels) and 3-d (cuDNN) inputs through autograd" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("batch norm fallback parity");
  manual_seed(33);
  // 2-d input (S == 1) and a 3-d [N, C, L] input with L > 1 (routed), through autograd
  for (const Shape& xs : {Shape{16, 6}, Shape{4, 6, 9}}) {
    CAPTURE(shape_str(xs));
    cuda::BatchNormCall call{
        false, true, DType::f32, DType::f32, xs[0], 6, xs.size() == 3 ? xs[2] : 1, 1e-5};
    CHECK(cuda::batch_norm_uses_cudnn(call) == (xs.size() == 3));
    for (bool on : {false, true}) {
      CAPTURE(on);
      CudnnSwitch s(on);
      Tensor rm = zeros({6}), rv = ones({6});
      Tensor grm = rm.to(kGPU), grv = rv.to(kGPU);
      sl::testing::check_gpu_parity(
          [&](const TensorList& t) {
            const bool gpu = t[0].is_cuda();
            return batch_norm(t[0], gpu ? grm : rm, gpu ? grv : rv, t[1], t[2], true, 0.1, 1e-5);
          },
          {randn(xs).requires_grad_(), randn({6}).requires_grad_(), randn({6}).requires_grad_()},
          1e-4, 1e-4);
      SL_CHECK_CLOSE(grm.cpu(), rm, 1e-4, 1e-4);
      SL_CHECK_CLOSE(grv.cpu(), rv, 1e-4, 1e-4);
    }
  }
}

TEST_CASE("cudnn parity: average pooling, cuDNN vs own kernels vs CPU" *
          sl::testing::needs_cudnn(/*on_fake=*/false)) {
  SL_REQUIRE_CUDA("cuDNN average pooling parity");
  SL_REQUIRE_CUDNN("cuDNN average pooling parity");
  manual_seed(34);
  struct Case {
    const char* what;
    Shape sizes;
    ExpandingArray<2> k, s, p;
    bool ceil_mode, include_pad;
    std::optional<int64_t> divisor;
    bool routed;
  };
  const std::vector<Case> cases = {
      {"k3 s2 p1 include", {2, 3, 10, 7}, 3, 2, 1, false, true, {}, true},
      {"k3 s2 p1 exclude", {2, 3, 10, 7}, 3, 2, 1, false, false, {}, true},
      {"k2", {2, 2, 6, 8}, 2, {}, 0, false, true, {}, true},
      {"k {3, 2} s {1, 2} p {1, 0} exclude",
       {1, 4, 9, 7},
       {3, 2},
       {1, 2},
       {1, 0},
       false,
       false,
       {},
       true},
      {"ceil_mode adding no window", {2, 3, 11, 7}, 3, 2, 1, true, false, {}, true},
      {"many planes: 300 * 250 as n 2, c 37500", {300, 250, 4, 4}, 2, 2, 0, false, true, {}, true},
      {"ceil_mode adding a window (own)", {2, 3, 10, 7}, 3, 2, 1, true, false, {}, false},
      {"divisor_override (own)", {2, 2, 6, 8}, 2, {}, 0, false, true, 3, false},
  };
  for (const Case& c : cases) {
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      CAPTURE(c.what);
      CAPTURE(dt);
      cuda::AvgPoolCall call;
      call.input = dt;
      call.P = c.sizes[0] * c.sizes[1];
      call.H = c.sizes[2];
      call.W = c.sizes[3];
      call.g = ops::pool2d_geometry("avg_pool2d", zeros(c.sizes), c.k, c.s, c.p, {}, c.ceil_mode);
      call.g.count_include_pad = c.include_pad;
      call.g.divisor_override = c.divisor.value_or(0);
      CHECK(cuda::avg_pool_uses_cudnn(call) == (c.routed && dt != DType::bf16));
      const auto tol = pool_tol(dt);
      Tensor x = randn(c.sizes, {.dtype = dt});
      auto pool = [&](const Tensor& in) {
        return avg_pool2d(in, c.k, c.s, c.p, c.ceil_mode, c.include_pad, c.divisor);
      };
      // forward and input gradient on each path (the gradient of sum(y * up))
      auto run = [&](Device d) {
        Tensor xi = x.to(d, true).requires_grad_();
        Tensor y = pool(xi);
        Generator gen(4343);
        Tensor up = randn(y.sizes(), {.dtype = dt}, &gen).to(d);
        y.backward(up);
        return std::pair{y.cpu(), xi.grad().cpu()};
      };
      auto cpu = run(kCPU);
      std::pair<Tensor, Tensor> own, dnn;
      {
        CudnnSwitch off(false);
        own = run(kGPU);
      }
      {
        CudnnSwitch on(true);
        dnn = run(kGPU);
      }
      SL_CHECK_CLOSE_TOL(own.first, cpu.first, tol);
      SL_CHECK_CLOSE_TOL(own.second, cpu.second, tol);
      SL_CHECK_CLOSE_TOL(dnn.first, cpu.first, tol);
      SL_CHECK_CLOSE_TOL(dnn.second, cpu.second, tol);
      SL_CHECK_CLOSE_TOL(dnn.first, own.first, tol);
      SL_CHECK_CLOSE_TOL(dnn.second, own.second, tol);
    }
  }
}
