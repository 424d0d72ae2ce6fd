// Autograd on CUDA tensors: forward and backward of a small network match the CPU, so does a
// second backward (create_graph, also through the convolutions), and 100 training steps leave the
// GPU's live memory where the first step left it.
#include "cuda_testing.h"

using namespace sl;
using sl::testing::kGPU;

namespace {

/// A two-layer network with the ops the backward passes exercise: matmul (both operands),
/// broadcast add (sum_to), gelu, tanh, division, mean.
Tensor net(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
  Tensor h = (x.matmul(w1) + b1).gelu();
  Tensor y = h.matmul(w2).tanh();
  return (y * y / 2.0).mean() + (h.sigmoid() - 0.5).abs().sum() * 1e-3;
}

}  // namespace

TEST_CASE("cuda: backward of a small network matches the CPU" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("autograd parity");
  manual_seed(8);
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    Tensor x = randn({16, 24}, {.dtype = dt});
    Tensor w1 = randn({24, 32}, {.dtype = dt}) * 0.2, b1 = randn({32}, {.dtype = dt}) * 0.1;
    Tensor w2 = randn({32, 8}, {.dtype = dt}) * 0.2;
    TensorList cpu_p = {w1.clone().requires_grad_(), b1.clone().requires_grad_(),
                        w2.clone().requires_grad_()};
    TensorList gpu_p = {w1.to(kGPU).requires_grad_(), b1.to(kGPU).requires_grad_(),
                        w2.to(kGPU).requires_grad_()};
    Tensor lc = net(x, cpu_p[0], cpu_p[1], cpu_p[2]);
    Tensor lg = net(x.to(kGPU), gpu_p[0], gpu_p[1], gpu_p[2]);
    lc.backward();
    lg.backward();
    // float32 matmuls accumulate in different orders (see test_cuda_matmul.cpp); double is
    // limited by the math library ulps.
    double tol = dt == DType::f64 ? 1e-11 : 1e-4;
    SL_CHECK_CLOSE(lg.cpu(), lc, tol, tol);
    for (size_t i = 0; i < cpu_p.size(); ++i) {
      CAPTURE(i);
      REQUIRE(gpu_p[i].grad().defined());
      CHECK(gpu_p[i].grad().is_cuda());
      SL_CHECK_CLOSE(gpu_p[i].grad().cpu(), cpu_p[i].grad(), tol, tol);
    }
  }
}

namespace {

/// The penalty mean((|d f(x) / d x| - 1)^2) (WGAN-GP's, norms over each sample) computed on dev,
/// followed by its gradients w.r.t. the parameters: the second backward runs through the first
/// one's recorded graph (Note [Double backward]). Returned on the CPU.
TensorList penalty_grads(const std::function<Tensor(const Tensor&, const TensorList&)>& f,
                         const Tensor& x, const TensorList& params, Device dev) {
  TensorList p;
  for (const Tensor& t : params) p.push_back(t.to(dev).requires_grad_());
  Tensor xi = x.to(dev).requires_grad_();
  variable_list gx = grad({f(xi, p)}, {xi}, {}, false, /*create_graph=*/true);
  Tensor pen = (gx[0].flatten(1).square().sum({1}).sqrt() - 1).square().mean();
  variable_list gp = grad({pen}, p);
  TensorList out = {pen.detach().cpu()};
  for (const Tensor& g : gp) {
    CHECK(g.device() == dev);
    out.push_back(g.cpu());
  }
  return out;
}

/// penalty_grads on the GPU equals the CPU's; float64, so only the math library's ulps differ.
void check_penalty_parity(const std::function<Tensor(const Tensor&, const TensorList&)>& f,
                          const Tensor& x, const TensorList& params) {
  TensorList cpu = penalty_grads(f, x, params, kCPU), gpu = penalty_grads(f, x, params, kGPU);
  for (size_t i = 0; i < cpu.size(); ++i) {
    CAPTURE(i);
    SL_CHECK_CLOSE(gpu[i], cpu[i], 1e-11, 1e-11);
  }
}

}  // namespace

TEST_CASE("cuda: double backward (a gradient penalty) matches the CPU" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("double backward parity");
  manual_seed(9);
  const DType dt = DType::f64;
  Tensor x = randn({6, 24}, {.dtype = dt});
  Tensor w1 = randn({24, 32}, {.dtype = dt}) * 0.2, b1 = randn({32}, {.dtype = dt}) * 0.1;
  Tensor w2 = randn({32, 8}, {.dtype = dt}) * 0.2;
  check_penalty_parity(
      [](const Tensor& xi, const TensorList& p) {
        Tensor h = (xi.matmul(p[0]) + p[1]).tanh();
        return h.matmul(p[2]).sigmoid().sum();
      },
      x, {w1, b1, w2});
}

TEST_CASE("cuda: double backward through norms, attention, pools, interpolate and cross_entropy" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("double backward parity of the layers");
  manual_seed(10);
  const DType dt = DType::f64;
  Tensor x = randn({2, 4, 8}, {.dtype = dt});
  Tensor lw = randn({8}, {.dtype = dt}), lb = randn({8}, {.dtype = dt}) * 0.1;
  Tensor w = randn({6, 8}, {.dtype = dt}) * 0.3, b = randn({6}, {.dtype = dt}) * 0.1;
  Tensor labels = from_vector(std::vector<int64_t>{0, 5, 2, 3, 1, 4, 4, 0});
  check_penalty_parity(
      [labels](const Tensor& xi, const TensorList& p) {
        Tensor h = layer_norm(xi, {8}, p[0], p[1]);
        Tensor a = scaled_dot_product_attention(h, h, h, Tensor(), 0.0, /*is_causal=*/true);
        Tensor f = linear_act(a, p[2], p[3], Activation::gelu).transpose(1, 2);  // [2, 6, 4]
        Tensor pooled = avg_pool1d(f, 2) + max_pool1d(f, 2);                     // [2, 6, 2]
        Tensor u = interpolate(pooled, {.size = {4}, .mode = "linear"});         // [2, 6, 4]
        Tensor logits = u.transpose(1, 2).reshape({8, 6});
        return nn::functional::cross_entropy(logits, labels.to(logits.device()));
      },
      x, {lw, lb, w, b});
}

TEST_CASE("cuda: double backward through the convolutions matches the CPU" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("conv double backward parity");
  manual_seed(10);
  // A penalty on |d D / d x| of a CNN with conv2d (groups, stride, dilation), conv_transpose2d
  // (output_padding past the stride) and conv1d, differentiated w.r.t. the parameters: the
  // second backward runs the recorded conv maps (Note [Conv double backward]), i.e. the cuDNN
  // forward, backward-data and backward-filter passes in every role. float64: cuDNN and the CPU
  // sum the same few hundred products in other orders, so 1e-11.
  const DType dt = DType::f64;
  Tensor x = randn({2, 4, 6, 6}, {.dtype = dt});
  TensorList p0 = {randn({4, 2, 3, 3}, {.dtype = dt}) * 0.4, randn({4}, {.dtype = dt}),
                   randn({4, 3, 2, 2}, {.dtype = dt}) * 0.4, randn({3}, {.dtype = dt}),
                   randn({2, 3, 3}, {.dtype = dt}) * 0.4};
  check_penalty_parity(
      [](const Tensor& xi, const TensorList& p) {
        Tensor h = conv2d(xi, p[0], p[1], 2, 1, 2, 2).tanh();                      // [2, 4, 2, 2]
        h = conv_transpose2d(h, p[2], p[3], {1, 2}, 0, {2, 1}, 1, {3, 1}).tanh();  // [2, 3, 7, 5]
        return conv1d(h.flatten(2), p[4], Tensor(), 2).square().sum();
      },
      x, p0);
}

TEST_CASE("cuda: 100 SGD steps do not grow GPU memory" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("memory across training steps");
  manual_seed(9);
  Tensor x = randn({64, 32}).to(kGPU), target = randn({64, 4}).to(kGPU);
  Tensor w1 = (randn({32, 64}) * 0.1).to(kGPU).requires_grad_();
  Tensor w2 = (randn({64, 4}) * 0.1).to(kGPU).requires_grad_();
  auto step = [&] {
    Tensor loss = ((x.matmul(w1).relu().matmul(w2) - target).square()).mean();
    loss.backward();
    {
      NoGradGuard ng;
      w1.sub_(w1.grad() * 0.01);
      w2.sub_(w2.grad() * 0.01);
    }
    w1.set_grad(Tensor());
    w2.set_grad(Tensor());
    return loss.item<float>();
  };
  float first = step();
  MemoryStats after_first = memory_stats(kGPU);
  float last = first;
  for (int i = 0; i < 99; ++i) last = step();
  MemoryStats after_last = memory_stats(kGPU);
  CHECK(after_last.live_bytes == after_first.live_bytes);
  CHECK(after_last.reserved_bytes == after_first.reserved_bytes);
  CHECK(last < first);  // it trains
}
