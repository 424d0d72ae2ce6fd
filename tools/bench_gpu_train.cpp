// GPU benchmark, part 2: one training step (forward + backward + optimizer) of a small
// transformer encoder and of a ResNet-18-layout CNN, written with Shardlight's differentiable
// ops, with the shapes, layer order and optimizers of tools/bench_gpu_torch.py so the two
// timings compare like for like:
//   - encoder: 4 post-norm layers (PyTorch's nn.TransformerEncoderLayer default), d_model 256,
//     4 heads, FFN 1024 with GELU, no dropout, a 1000-way linear head, cross-entropy, AdamW;
//   - ResNet: 3x3 stem, 4 stages of 2 BasicBlocks (64..512 channels, 1x1 downsampling), batch
//     norm in training mode, global average pool, a 10-way head, cross-entropy, SGD momentum 0.9.
// Cross-entropy is logsumexp(logits) - <logits, one_hot(target)>, averaged (the same value as
// torch's cross_entropy; the one-hot matrix is built once, outside the timed step).
//   - ZeRO offload: an MLP of 8 Linear(2048, 2048) + ReLU layers (33.6M parameters) under zero2
//     on one rank, AdamW, with the optimizer state on the GPU and offloaded to the host
//     (StrategyOptions::offload_optimizer): step time and the GPU allocator's peak of each.
// With SL_BENCH_GPU_TRACE=PATH, one more encoder step runs under the profiler (core/profiler.h)
// and its Chrome trace goes to PATH, its summary after the table, with a ResNet step's summary
// (host times: a CUDA kernel's event is its launch; the step ends with a synchronize, so the window
// holds the GPU's work).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <shardlight/shardlight.h>

#include "core/allocator.h"
#include "core/cuda/cuda_api.h"
#include "core/cuda/runtime.h"
#include "dist/strategy.h"

namespace sl::bench {

double time_ms(const std::function<void()>& f);  // bench_gpu.cpp

namespace {

const Device kGPU{DeviceKind::cuda, 0};

std::string g_profile_summary;  // of the profiled steps, printed after the table
std::string g_conv_choices;     // the ResNet's cuDNN algorithms, printed after the profiles

/// A parameter initialised like PyTorch's Linear / Conv (uniform +-1/sqrt(fan_in)).
Tensor param(const Shape& s, int64_t fan_in, TensorList& all) {
  const double b = 1.0 / std::sqrt(static_cast<double>(fan_in));
  Tensor t = (rand(s, {.device = kGPU}) * (2 * b) - b).detach().requires_grad_();
  all.push_back(t);
  return t;
}
Tensor constant(const Shape& s, double v, TensorList& all) {
  Tensor t = full(s, v, {.device = kGPU}).requires_grad_();
  all.push_back(t);
  return t;
}

/// With SL_BENCH_GPU_TRACE=PATH: one more `step` under the profiler, its summary appended to
/// g_profile_summary (and its Chrome trace written to PATH when `trace`).
void profile_step(const std::string& name, const std::function<void()>& step, bool trace) {
  const char* path = std::getenv("SL_BENCH_GPU_TRACE");
  if (path == nullptr) return;
  profiler::start();
  {
    profiler::Scope scope(name.c_str(), profiler::Category::phase);
    step();
    cuda::synchronize();
  }
  const profiler::Profile p = profiler::stop();
  if (trace) p.write_chrome_trace(path, 0, "bench_gpu " + name);
  g_profile_summary += "\nOne " + name + " under the profiler" +
                       (trace ? " (trace: " + std::string(path) + ")" : std::string()) +
                       ":\n\n```\n" + p.summary(25) + "```\n";
}

Tensor one_hot_matrix(const Tensor& targets_cpu, int64_t classes) {
  std::vector<int64_t> t = targets_cpu.to_vector<int64_t>();
  Tensor m = zeros({static_cast<int64_t>(t.size()), classes});
  float* p = m.data_ptr<float>();
  for (size_t i = 0; i < t.size(); ++i) p[i * static_cast<size_t>(classes) + t[i]] = 1.0f;
  return m.to(kGPU);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& one_hot) {
  return (logsumexp(logits, {1}) - (logits * one_hot).sum({1})).mean();
}

// ---- transformer encoder ------------------------------------------------------------------

struct EncoderLayer {
  Tensor w_qkv, b_qkv, w_o, b_o, g1, be1, w1, b1, w2, b2, g2, be2;
  EncoderLayer(int64_t d, int64_t ff, TensorList& all)
      : w_qkv(param({3 * d, d}, d, all)),
        b_qkv(param({3 * d}, d, all)),
        w_o(param({d, d}, d, all)),
        b_o(param({d}, d, all)),
        g1(constant({d}, 1.0, all)),
        be1(constant({d}, 0.0, all)),
        w1(param({ff, d}, d, all)),
        b1(param({ff}, d, all)),
        w2(param({d, ff}, ff, all)),
        b2(param({d}, ff, all)),
        g2(constant({d}, 1.0, all)),
        be2(constant({d}, 0.0, all)) {}

  Tensor forward(const Tensor& x, int64_t heads) const {
    const int64_t B = x.size(0), S = x.size(1), D = x.size(2), Dh = D / heads;
    Tensor qkv = linear(x, w_qkv, b_qkv).reshape({B, S, 3, heads, Dh});
    Tensor q = qkv.select(2, 0).transpose(1, 2);
    Tensor k = qkv.select(2, 1).transpose(1, 2);
    Tensor v = qkv.select(2, 2).transpose(1, 2);
    Tensor a = scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape({B, S, D});
    Tensor h = layer_norm(x + linear(a, w_o, b_o), {D}, g1, be1);
    Tensor f = linear(gelu(linear(h, w1, b1)), w2, b2);
    return layer_norm(h + f, {D}, g2, be2);
  }
};

void bench_encoder(bool quick) {
  const int64_t B = quick ? 8 : 32, S = quick ? 64 : 128, D = 256, H = 4, FF = 1024, C = 1000;
  TensorList params;
  std::vector<EncoderLayer> layers;
  for (int i = 0; i < 4; ++i) layers.emplace_back(D, FF, params);
  Tensor w_head = param({C, D}, D, params), b_head = param({C}, D, params);
  optim::AdamW opt(params, {.lr = 1e-4});
  Tensor x = randn({B, S, D}, {.device = kGPU});
  Tensor oh = one_hot_matrix(randint(0, C, {B * S}, {.dtype = DType::i64}), C);
  auto step = [&] {
    opt.zero_grad();
    Tensor h = x;
    for (const EncoderLayer& l : layers) h = l.forward(h, H);
    Tensor logits = linear(h, w_head, b_head).reshape({B * S, C});
    cross_entropy(logits, oh).backward();
    opt.step();
  };
  std::printf("| transformer encoder (4 x 256, seq %lld) | %lld | float32 | %.2f ms |\n",
              static_cast<long long>(S), static_cast<long long>(B), time_ms(step));
  profile_step("encoder step", step, true);
}

// ---- ResNet-18 layout ---------------------------------------------------------------------

struct ConvBn {
  Tensor w, gamma, beta, rm, rv;
  int64_t stride, pad;
  ConvBn(int64_t cin, int64_t cout, int64_t k, int64_t s, TensorList& all)
      : w(param({cout, cin, k, k}, cin * k * k, all)),
        gamma(constant({cout}, 1.0, all)),
        beta(constant({cout}, 0.0, all)),
        rm(zeros({cout}, {.device = kGPU})),
        rv(ones({cout}, {.device = kGPU})),
        stride(s),
        pad(k / 2) {}
  Tensor forward(const Tensor& x) const {
    return batch_norm(conv2d(x, w, Tensor(), stride, pad), rm, rv, gamma, beta, true);
  }
};

struct BasicBlock {
  ConvBn c1, c2;
  std::vector<ConvBn> down;
  BasicBlock(int64_t cin, int64_t cout, int64_t s, TensorList& all)
      : c1(cin, cout, 3, s, all), c2(cout, cout, 3, 1, all) {
    if (s != 1 || cin != cout) down.emplace_back(cin, cout, 1, s, all);
  }
  Tensor forward(const Tensor& x) const {
    Tensor y = c2.forward(relu(c1.forward(x)));
    return relu(y + (down.empty() ? x : down[0].forward(x)));
  }
};

void bench_resnet(bool quick) {
  const int64_t B = quick ? 16 : 128, C = 10;
  TensorList params;
  ConvBn stem(3, 64, 3, 1, params);
  std::vector<BasicBlock> blocks;
  int64_t cin = 64;
  for (auto [cout, s] :
       std::vector<std::pair<int64_t, int64_t>>{{64, 1}, {128, 2}, {256, 2}, {512, 2}}) {
    blocks.emplace_back(cin, cout, s, params);
    blocks.emplace_back(cout, cout, 1, params);
    cin = cout;
  }
  Tensor w_fc = param({C, 512}, 512, params), b_fc = param({C}, 512, params);
  optim::SGD opt(params, {.lr = 0.1, .momentum = 0.9});
  Tensor x = randn({B, 3, 32, 32}, {.device = kGPU});
  Tensor oh = one_hot_matrix(randint(0, C, {B}, {.dtype = DType::i64}), C);
  auto step = [&] {
    opt.zero_grad();
    Tensor h = relu(stem.forward(x));
    for (const BasicBlock& b : blocks) h = b.forward(h);
    Tensor logits = linear(adaptive_avg_pool2d(h, 1).reshape({B, 512}), w_fc, b_fc);
    cross_entropy(logits, oh).backward();
    opt.step();
  };
  // float32 as the library's defaults (FMA math, deterministic cuDNN algorithms from cuDNN's
  // heuristics), then with TF32, then also with any cuDNN algorithm: PyTorch's defaults for cuDNN
  // convolutions (torch.backends.cudnn.allow_tf32 = True, deterministic = False, benchmark =
  // False); then the algorithms chosen by timing them (set_cudnn_benchmark, as
  // torch.backends.cudnn.benchmark = True)
  struct Config {
    bool tf32, deterministic, benchmark;
    const char* name;
  };
  const Config configs[] = {
      {false, true, false, "float32"},
      {true, true, false, "float32 (TF32)"},
      {true, false, false, "float32 (TF32, any cuDNN algorithm)"},
      {false, true, true, "float32 (cuDNN benchmark)"},
      {false, false, true, "float32 (any cuDNN algorithm, cuDNN benchmark)"},
      {true, false, true, "float32 (TF32, any cuDNN algorithm, cuDNN benchmark)"}};
  struct Restore {
    ~Restore() {
      cuda::set_allow_tf32(false);
      cuda::set_cudnn_deterministic(true);
      cuda::set_cudnn_benchmark(false);
    }
  } restore;
  const size_t choices_before = cuda::cudnn_conv_choices().size();
  for (const Config& c : configs) {
    cuda::set_allow_tf32(c.tf32);
    cuda::set_cudnn_deterministic(c.deterministic);
    cuda::set_cudnn_benchmark(c.benchmark);
    std::printf("| ResNet-18 layout, 32x32 | %lld | %s | %.2f ms |\n", static_cast<long long>(B),
                c.name, time_ms(step));
    std::fflush(stdout);
    if (!c.tf32 && c.deterministic) {
      profile_step(c.benchmark ? "ResNet-18 step (cuDNN benchmark)" : "ResNet-18 step", step,
                   false);
    }
  }
  // Which algorithm each convolution got under each configuration (Note [Convolution algorithm
  // cache]), after the profiles.
  const std::vector<std::string> choices = cuda::cudnn_conv_choices();
  g_conv_choices =
      "\ncuDNN convolution algorithms chosen in the ResNet steps, per configuration:\n\n```\n";
  for (size_t i = choices_before; i < choices.size(); ++i) g_conv_choices += choices[i] + "\n";
  g_conv_choices += "```\n";
}

// ---- ZeRO optimizer offload ----------------------------------------------------------------

void bench_offload(bool quick) {
  const int64_t B = 64, D = quick ? 1024 : 2048, L = quick ? 4 : 8;
  auto group = dist::make_nccl_group(dist::make_single_group(), kGPU);
  for (bool offload : {false, true}) {
    manual_seed(0);
    auto net = std::make_shared<nn::Sequential>();
    for (int64_t i = 0; i < L; ++i) {
      net->push_back(std::make_shared<nn::Linear>(D, D));
      net->push_back(std::make_shared<nn::ReLU>());
    }
    net->to(kGPU);
    optim::AdamW opt(net->parameters(), {.lr = 1e-4});
    auto s = dist::make_strategy("zero2", net, opt, {.group = group, .offload_optimizer = offload});
    Tensor x = randn({B, D}, {.device = kGPU});
    auto step = [&] {
      s->zero_grad();
      s->backward(s->forward(x).square().mean());
      s->step();
    };
    step();
    cuda::synchronize(0);
    reset_peak_memory_stats(kGPU);
    const double ms = time_ms(step);
    const double peak = static_cast<double>(memory_stats(kGPU).peak_bytes) / (1 << 20);
    std::printf(
        "| MLP %lld x %lld, zero2 1 rank, optimizer %s (GPU peak %.0f MiB) | %lld | "
        "float32 | %.2f ms |\n",
        static_cast<long long>(L), static_cast<long long>(D),
        offload ? "offloaded to the host" : "on the GPU", peak, static_cast<long long>(B), ms);
    std::fflush(stdout);
  }
}

}  // namespace

/// Prints the training-step table (errors of one model are reported in its row).
void bench_training(bool quick) {
  std::printf(
      "\n### training step (ms per step, forward + backward + optimizer; PyTorch's in "
      "torch_bench.log)\n\n| model | batch | dtype | Shardlight |\n|---|---|---|---|\n");
  const std::pair<const char*, void (*)(bool)> models[] = {{"transformer encoder", &bench_encoder},
                                                           {"ResNet-18 layout", &bench_resnet},
                                                           {"MLP under zero2", &bench_offload}};
  for (const auto& [name, fn] : models) {
    try {
      fn(quick);
    } catch (const std::exception& e) {
      if (profiler::is_recording()) (void)profiler::stop();
      std::printf("| %s | - | float32 | failed: %s |\n", name, e.what());
    }
    std::fflush(stdout);
  }
  std::printf("%s%s", g_profile_summary.c_str(), g_conv_choices.c_str());
}

}  // namespace sl::bench
