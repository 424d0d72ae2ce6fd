// Parity of the nn-facing CUDA families with the CPU, forward and backward through autograd:
// layer norm, batch norm, dropout, conv, conv_transpose, pooling, attention softmax, LSTM / GRU.
// float64 runs show the kernels compute the same functions (tolerances at double rounding); float32
// runs use tolerances a few hundred float ulps wide (reductions and products accumulate in
// different orders). float16 / bfloat16 runs of the norm, pool and attention-softmax families
// compare the CUDA kernels' native 16-bit path with the CPU's float32 computation of the same
// 16-bit values (tol16).
#include "core/ops/norm.h"
#include "cuda_testing.h"

using namespace sl;
using sl::testing::check_gpu_parity;
using sl::testing::kGPU;

namespace {
/// (rtol, atol) per dtype for the nn parity cases (see the file comment).
std::pair<double, double> tol(DType dt) {
  return dt == DType::f64 ? std::pair{1e-10, 1e-10} : std::pair{2e-4, 2e-4};
}
/// (rtol, atol) for the 16-bit cases. Both devices compute in float from the same 16-bit values
/// (the CPU after casting them to float32, the CUDA kernels natively) and round each result to
/// 16 bits once, so results differ only where float values that differ by the order of sums (or
/// by the few float ulps between CUDA's and glibc's expf) straddle a 16-bit rounding boundary:
/// one 16-bit ulp, at most 2^-7 = 7.8e-3 relative for bf16 (8 significant bits) and
/// 2^-10 = 9.8e-4 for f16 (11 bits). rtol is two ulps (bf16 1.6e-2, f16 2e-3), since a gradient
/// that reads a 16-bit forward output (attention's probabilities) can inherit one ulp from it;
/// atol (bf16 1e-3, f16 1e-4) covers results near zero, where the float differences of
/// cancelling O(1) terms are absolute rather than relative.
std::pair<double, double> tol16(DType dt) {
  return dt == DType::bf16 ? std::pair{1.6e-2, 1e-3} : std::pair{2e-3, 1e-4};
}
Tensor rnd(const Shape& s, DType dt, bool grad = true) {
  Tensor t = randn(s, {.dtype = dt});
  if (grad) t.requires_grad_();
  return t;
}
}  // namespace

TEST_CASE("cuda parity: layer_norm forward and backward" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("layer_norm parity");
  manual_seed(11);
  // 16-bit inputs: the CUDA kernels read and write them natively, the CPU computes in float32
  for (DType dt : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    if ((dt == DType::f16 || dt == DType::bf16) &&
        !sl::testing::gpu_kernels_take_16bit("layer_norm"))
      continue;
    CAPTURE(dt);
    const bool half = dt == DType::f16 || dt == DType::bf16;
    auto [rt, at] = half ? tol16(dt) : tol(dt);
    // D <= 1024 (a warp per row) and D > 1024 (a block per row); with and without affine;
    // beside 16-bit inputs, float32 weight and bias (mixed precision) for D > 1024
    const DType pdt = half ? DType::f32 : dt;
    check_gpu_parity([](const TensorList& t) { return layer_norm(t[0], {37}, t[1], t[2]); },
                     {rnd({6, 5, 37}, dt), rnd({37}, dt), rnd({37}, dt)}, rt, at);
    check_gpu_parity(
        [](const TensorList& t) {
          return layer_norm(t[0], {2, 700}, t[1], t[2]);
        },
        {rnd({3, 2, 700}, dt), rnd({2, 700}, pdt), rnd({2, 700}, pdt)}, rt, at);
    check_gpu_parity(
        [](const TensorList& t) {
          return layer_norm(t[0], {2, 700}, t[1]);
        },
        {rnd({3, 2, 700}, dt), rnd({2, 700}, dt)}, rt, at);
    check_gpu_parity([](const TensorList& t) { return layer_norm(t[0], {16}); },
                     {rnd({300, 16}, dt)}, rt, at);
    if (!half) continue;
    // through a float32 leaf (the cast's backward meets the 16-bit gradient)
    check_gpu_parity([dt](const TensorList& t) { return layer_norm(t[0].to(dt), {64}); },
                     {rnd({8, 64}, DType::f32)}, rt, at);
    // the saved statistics are float32 on both devices, and agree to float rounding (both are
    // double sums of the same 16-bit values, in different orders)
    Tensor x = randn({5, 40}, {.dtype = dt});
    ops::NormForward fc = ops::layer_norm_forward(x, {40}, Tensor(), Tensor(), 1e-5);
    ops::NormForward fg = ops::layer_norm_forward(x.to(kGPU), {40}, Tensor(), Tensor(), 1e-5);
    CHECK(fg.out.dtype() == dt);
    CHECK(fg.mean.dtype() == DType::f32);
    CHECK(fg.rstd.dtype() == DType::f32);
    CHECK(fc.mean.dtype() == DType::f32);
    SL_CHECK_CLOSE(fg.mean.cpu(), fc.mean, 1e-6, 1e-7);
    SL_CHECK_CLOSE(fg.rstd.cpu(), fc.rstd, 1e-6, 1e-7);
  }
}

TEST_CASE("cuda parity: batch_norm training, running statistics, evaluation" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("batch_norm parity");
  manual_seed(12);
  // 16-bit inputs: native on CUDA, float32 on the CPU; weight, bias and running statistics in
  // the input's dtype, or in float32 (mixed precision)
  for (DType dt : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    if ((dt == DType::f16 || dt == DType::bf16) &&
        !sl::testing::gpu_kernels_take_16bit("batch_norm"))
      continue;
    const bool half = dt == DType::f16 || dt == DType::bf16;
    auto [rt, at] = half ? tol16(dt) : tol(dt);
    for (DType pdt : {dt, DType::f32}) {
      if (pdt == DType::f32 && !half) continue;
      CAPTURE(dt);
      CAPTURE(pdt);
      Tensor rm = randn({5}, {.dtype = pdt}), rv = rand({5}, {.dtype = pdt}) + 0.5;
      Tensor grm = rm.to(kGPU), grv = rv.to(kGPU);
      Tensor crm = rm.clone(), crv = rv.clone();
      check_gpu_parity(
          [&](const TensorList& t) {
            bool gpu = t[0].is_cuda();
            return batch_norm(t[0], gpu ? grm : crm, gpu ? grv : crv, t[1], t[2], true, 0.1, 1e-5);
          },
          {rnd({8, 5, 7, 3}, dt), rnd({5}, pdt), rnd({5}, pdt)}, rt, at);
      CHECK(grm.dtype() == pdt);
      SL_CHECK_CLOSE(grm.cpu(), crm, rt, at);
      SL_CHECK_CLOSE(grv.cpu(), crv, rt, at);
      check_gpu_parity(
          [&](const TensorList& t) {
            bool gpu = t[0].is_cuda();
            return batch_norm(t[0], gpu ? grm : crm, gpu ? grv : crv, t[1], Tensor(), false);
          },
          {rnd({4, 5, 6}, dt), rnd({5}, pdt)}, rt, at);
    }
    // many channels, long batch: several chunks per channel
    check_gpu_parity(
        [](const TensorList& t) {
          return batch_norm(t[0], Tensor(), Tensor(), Tensor(), Tensor(), true);
        },
        {rnd({300, 3, 40}, dt)}, rt, at);
  }
}

TEST_CASE("cuda parity: dropout keeps the same elements as the CPU" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("dropout parity");
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    CAPTURE(dt);
    Tensor x = randn({37, 11}).to(dt);
    Generator gc(77), gg(77);
    Tensor yc = dropout(x, 0.3, true, &gc);
    Tensor yg = dropout(x.to(kGPU), 0.3, true, &gg);
    SL_CHECK_CLOSE(yg.cpu(), yc, 0, 0);
  }
  check_gpu_parity(
      [](const TensorList& t) {
        return dropout_seeded(t[0], 0.25, {5, 0});
      },
      {rnd({64, 9}, DType::f32)}, 0, 0);
}

TEST_CASE("cuda parity: conv2d / conv1d through cuDNN" *
          sl::testing::needs_cudnn(/*on_fake=*/true)) {
  SL_REQUIRE_CUDA("conv parity");
  if (!conv2d_forward_kernel.has(DeviceKind::cuda)) {
    sl::testing::report_skip("CUDA test: conv parity", "built without cuDNN");
    return;
  }
  manual_seed(13);
  // with cuDNN's choice of any algorithm too (cuda::set_cudnn_deterministic(false), PyTorch's
  // default), and with algorithms chosen by timing them (cuda::set_cudnn_benchmark(true)): the
  // same tolerance, the sums only run in another order
  struct RestoreSwitches {
    ~RestoreSwitches() {
      cuda::set_cudnn_deterministic(true);
      cuda::set_cudnn_benchmark(false);
    }
  } restore;
  const bool real_gpu = !sl::testing::fake_gpu_installed();
  for (auto [deterministic, benchmark] : {std::pair{true, false}, std::pair{false, false},
                                          std::pair{true, true}, std::pair{false, true}}) {
    CAPTURE(deterministic);
    CAPTURE(benchmark);
    cuda::set_cudnn_deterministic(deterministic);
    cuda::set_cudnn_benchmark(benchmark);
    const size_t choices_before = cuda::cudnn_conv_choices().size();
    for (DType dt : {DType::f64, DType::f32}) {
      CAPTURE(dt);
      auto [rt, at] = tol(dt);
      check_gpu_parity([](const TensorList& t) { return conv2d(t[0], t[1], t[2], 2, 1); },
                       {rnd({2, 3, 11, 9}, dt), rnd({4, 3, 3, 3}, dt), rnd({4}, dt)}, rt, at);
      check_gpu_parity(
          [](const TensorList& t) {
            return conv2d(t[0], t[1], Tensor(), 1, {2, 1}, {2, 1}, 2);
          },
          {rnd({2, 4, 8, 8}, dt), rnd({6, 2, 3, 3}, dt)}, rt, at);
      // "same" with an even kernel: asymmetric padding through an explicitly padded input
      check_gpu_parity([](const TensorList& t) { return conv1d(t[0], t[1], t[2], 1, "same"); },
                       {rnd({3, 5, 17}, dt), rnd({7, 5, 4}, dt), rnd({7}, dt)}, rt, at);
    }
    if (!real_gpu) continue;  // the fake GPU runs the CPU's convolution: no cuDNN choices
    // Note [Convolution algorithm cache]: 3 geometries x 2 dtypes x 3 passes chosen once each
    // under these switches (check_gpu_parity runs each forward and backward once on the GPU).
    const std::vector<std::string> choices = cuda::cudnn_conv_choices();
    CHECK(choices.size() == choices_before + 18);
    for (size_t i = choices_before; i < choices.size(); ++i) {
      CAPTURE(choices[i]);
      CHECK(choices[i].find(benchmark ? "benchmark)" : "heuristics)") != std::string::npos);
      CHECK((choices[i].find("ms measured") != std::string::npos) == benchmark);
    }
    // The same geometries again: every choice is reused.
    Tensor x = rnd({2, 3, 11, 9}, DType::f32).to(kGPU), w = rnd({4, 3, 3, 3}, DType::f32).to(kGPU);
    conv2d(x, w, Tensor(), 2, 1).sum().backward();
    CHECK(cuda::cudnn_conv_choices().size() == choices.size());
  }
}

TEST_CASE("cuda parity: conv_transpose2d / conv_transpose1d through cuDNN" *
          sl::testing::needs_cudnn(/*on_fake=*/true)) {
  SL_REQUIRE_CUDA("conv_transpose parity");
  if (!conv2d_forward_kernel.has(DeviceKind::cuda)) {
    sl::testing::report_skip("CUDA test: conv_transpose parity", "built without cuDNN");
    return;
  }
  manual_seed(14);
  // Note [Transposed convolution]: the forward is cuDNN's backward-data pass (with output rows
  // of output_padding beyond the formula's floor), the input gradient its forward, the weight
  // gradient its backward-filter pass; output_padding >= stride (dilated) pads the input.
  const auto cases = [](DType dt) {
    std::vector<std::pair<std::function<Tensor(const TensorList&)>, TensorList>> c;
    c.emplace_back([](const TensorList& t) { return conv_transpose2d(t[0], t[1], t[2], 2, 1, 1); },
                   TensorList{rnd({2, 3, 5, 4}, dt), rnd({3, 4, 3, 3}, dt), rnd({4}, dt)});
    c.emplace_back(
        [](const TensorList& t) {
          return conv_transpose2d(t[0], t[1], Tensor(), {1, 2}, {2, 0}, {1, 0}, 2, 2);
        },
        TensorList{rnd({2, 4, 6, 5}, dt), rnd({4, 3, 3, 2}, dt)});
    c.emplace_back([](const TensorList& t) { return conv_transpose1d(t[0], t[1], t[2], 3, 1, 2); },
                   TensorList{rnd({3, 5, 9}, dt), rnd({5, 2, 4}, dt), rnd({2}, dt)});
    return c;
  };
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    auto [rt, at] = tol(dt);
    for (auto& [fn, in] : cases(dt)) check_gpu_parity(fn, in, rt, at);
  }
  // 16-bit: both devices compute in float32 from the same 16-bit values and round once (the
  // conv family's ops layer casts), so they differ by at most a 16-bit ulp: tol16
  for (DType dt : {DType::f16, DType::bf16}) {
    CAPTURE(dt);
    auto [rt, at] = tol16(dt);
    for (auto& [fn, in] : cases(dt)) check_gpu_parity(fn, in, rt, at);
  }
}

TEST_CASE("cuda parity: max, average and adaptive pooling" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("pool parity");
  manual_seed(14);
  // 16-bit: native on CUDA (max-pool backward sums overlapping windows in float), float32 on
  // the CPU
  for (DType dt : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    if ((dt == DType::f16 || dt == DType::bf16) && !sl::testing::gpu_kernels_take_16bit("pooling"))
      continue;
    CAPTURE(dt);
    const bool half = dt == DType::f16 || dt == DType::bf16;
    auto [rt, at] = half ? tol16(dt) : tol(dt);
    // Max pooling exactly (tolerance 0) in f32 / f64, with overlapping windows: the forward picks
    // an input value, and the backward gathers, per input element, the gradients of the windows
    // whose maximum it is in ascending output order, the order in which the CPU's scatter adds
    // them (Note [Max-pool backward order] in core/ops/pool.h), so the sums are the CPU's bits.
    const double mrt = half ? rt : 0, mat = half ? at : 0;
    // ResNet's stem (kernel 3, stride 2, padding 1): up to 4 windows over one element
    check_gpu_parity([](const TensorList& t) { return max_pool2d(t[0], 3, 2, 1); },
                     {rnd({2, 3, 11, 10}, dt)}, mrt, mat);
    // stride 1: up to 9 windows over one element, on few distinct values (ties: the first wins)
    check_gpu_parity([](const TensorList& t) { return max_pool2d(t[0], 3, 1, 1); },
                     {round(randn({2, 3, 13, 12})).to(dt).requires_grad_()}, mrt, mat);
    check_gpu_parity(
        [](const TensorList& t) {
          return max_pool2d(t[0], {2, 3}, {2, 1}, 0, 2, true);
        },
        {rnd({1, 2, 9, 9}, dt)}, mrt, mat);
    check_gpu_parity([](const TensorList& t) { return avg_pool2d(t[0], 3, 2, 1, true, false); },
                     {rnd({2, 3, 10, 7}, dt)}, rt, at);
    check_gpu_parity([](const TensorList& t) { return avg_pool2d(t[0], 2, {}, 0, false, true, 3); },
                     {rnd({2, 2, 6, 8}, dt)}, rt, at);
    check_gpu_parity(
        [](const TensorList& t) {
          return adaptive_avg_pool2d(t[0], {3, 5});
        },
        {rnd({2, 3, 7, 11}, dt)}, rt, at);
  }
}

TEST_CASE("cuda parity: attention softmax with masks, and scaled dot-product attention" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("attention parity");
  manual_seed(15);
  // 16-bit: native on CUDA (max, exponentials and sums in float), float32 on the CPU
  for (DType dt : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    if ((dt == DType::f16 || dt == DType::bf16) &&
        !sl::testing::gpu_kernels_take_16bit("attention softmax"))
      continue;
    CAPTURE(dt);
    const bool half = dt == DType::f16 || dt == DType::bf16;
    auto [rt, at] = half ? tol16(dt) : tol(dt);
    Tensor bool_mask = rand({5, 7}).gt(0.3);
    bool_mask.select(0, 2).fill_(false);  // a fully masked row: NaN on both devices
    check_gpu_parity(
        [&](const TensorList& t) {
          return attention_softmax(t[0], bool_mask.to(t[0].device()), false, 0.5);
        },
        {randn({2, 3, 5, 7}, {.dtype = dt})}, rt, at);
    // S > 1024: a block per row; beside 16-bit scores a float32 additive mask stays float32
    Tensor add_mask = randn({1, 1, 6, 1300}, {.dtype = half ? DType::f32 : dt});
    check_gpu_parity(
        [&](const TensorList& t) { return attention_softmax(t[0], add_mask.to(t[0].device())); },
        {rnd({2, 2, 6, 1300}, dt)}, rt, at);
    check_gpu_parity(
        [](const TensorList& t) { return attention_softmax(t[0], Tensor(), true, 0.3); },
        {rnd({3, 9, 12}, dt)}, rt, at);
    if (half) {
      // an additive mask in the scores' 16-bit dtype, broadcast over the batch dims
      Tensor mask16 = randn({9, 12}, {.dtype = dt});
      check_gpu_parity(
          [&](const TensorList& t) {
            return attention_softmax(t[0], mask16.to(t[0].device()), false, 0.7);
          },
          {rnd({2, 3, 9, 12}, dt)}, rt, at);
      continue;  // scaled_dot_product_attention's 16-bit matmuls need their own tolerances
    }
    check_gpu_parity(
        [](const TensorList& t) {
          return scaled_dot_product_attention(t[0], t[1], t[2], Tensor(), 0.0, true);
        },
        {rnd({2, 4, 10, 16}, dt), rnd({2, 4, 10, 16}, dt), rnd({2, 4, 10, 8}, dt)}, rt, at);
  }
}

TEST_CASE("cuda parity: LSTM and GRU with lengths, two layers, bidirectional" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("rnn parity");
  manual_seed(16);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    auto [rt, at] = tol(dt);
    const int64_t T = 6, N = 3, I = 5, H = 4;
    Tensor lengths = from_vector<int64_t>({6, 2, 4});
    for (bool is_lstm : {true, false}) {
      CAPTURE(is_lstm);
      const int64_t G = is_lstm ? 4 * H : 3 * H;
      TensorList in = {rnd({T, N, I}, dt)};
      for (int64_t layer = 0; layer < 2; ++layer) {
        for (int d = 0; d < 2; ++d) {
          const int64_t in_size = layer == 0 ? I : 2 * H;
          in.push_back(rnd({G, in_size}, dt));
          in.push_back(rnd({G, H}, dt));
          in.push_back(rnd({G}, dt));
          in.push_back(rnd({G}, dt));
        }
      }
      check_gpu_parity(
          [&](const TensorList& t) {
            TensorList params(t.begin() + 1, t.end());
            Tensor len = lengths.to(t[0].device());
            if (is_lstm) {
              auto [out, hn, cn] =
                  lstm(t[0], Tensor(), Tensor(), params, true, 2, 0.0, true, true, false, len);
              return out.sum() + hn.square().sum() + cn.sum();
            }
            auto [out, hn] = gru(t[0], Tensor(), params, true, 2, 0.0, true, true, false, len);
            return out.sum() + hn.square().sum();
          },
          in, rt, at);
    }
  }
}
