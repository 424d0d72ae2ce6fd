// GPU benchmark: Shardlight's CUDA kernels next to the reference each should approach, in one
// run, as markdown tables on stdout.
//   - matmul TFLOP/s against cuBLAS called directly on the same buffers (same compute type);
//   - linear + relu/gelu (linear_act: one cuBLASLt call with the activation epilogue) against
//     the same GEMM with the bias epilogue followed by the activation kernel;
//   - memory-bound ops (elementwise, reductions, LayerNorm and softmax when their CUDA kernels
//     exist) in GB/s against a device-to-device copy of the same bytes;
//   - index_add / scatter_add with few output columns and long indices (embedding backward),
//     in ms;
//   - scaled_dot_product_attention on the fused path against the unfused one (PyTorch's
//     F.scaled_dot_product_attention at the same shapes comes from tools/bench_gpu_torch.py);
//   - one training step of a small transformer encoder and a small ResNet (bench_gpu_train.cpp;
//     PyTorch's steps come from tools/bench_gpu_torch.py in the same gpu_check run).
// Usage: bench_gpu [--quick]   (--quick: smaller sizes and fewer iterations)
// Exits 77 (the "skipped" code of test harnesses) when no GPU is visible.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <shardlight/shardlight.h>

#include "core/cuda/cuda_api.h"
#include "core/cuda/index_plan.h"
#include "core/cuda/runtime.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/index.h"
#include "core/ops/matmul.h"
#include "core/ops/norm.h"
#include "core/ops/reduce.h"
#include "core/ops/softmax.h"

using namespace sl;

namespace sl::bench {

int g_warmup = 3, g_iters = 20;

/// Mean milliseconds per call of f over g_iters calls after g_warmup, timed with CUDA events
/// on the compute stream (host overhead included when it is larger than the GPU time).
double time_ms(const std::function<void()>& f) {
  for (int i = 0; i < g_warmup; ++i) f();
  cuda::synchronize(0);
  cuda::Event start, end;
  start.record(cuda::compute_stream(0));
  for (int i = 0; i < g_iters; ++i) f();
  end.record(cuda::compute_stream(0));
  end.synchronize();
  return static_cast<double>(start.elapsed_ms(end)) / g_iters;
}

void bench_training(bool quick);  // bench_gpu_train.cpp

}  // namespace sl::bench

using sl::bench::time_ms;

namespace {

const Device kGPU{DeviceKind::cuda, 0};

void row(const std::string& what, const std::string& dtype, const std::string& shape, double ours,
         double ref, const char* unit, const std::string& ref_name) {
  std::printf("| %s | %s | %s | %.1f %s | %.1f %s (%s) | %.0f%% |\n", what.c_str(), dtype.c_str(),
              shape.c_str(), ours, unit, ref, unit, ref_name.c_str(), 100.0 * ours / ref);
  std::fflush(stdout);
}

// ---- matmul ------------------------------------------------------------------------------

struct GemmCase {
  int64_t M, K, N;
};

/// out = a @ b through cuBLAS directly (row-major trick as in core/cuda/matmul.cpp).
void cublas_mm(const Tensor& a, const Tensor& b, const Tensor& out, bool tf32) {
  const int M = static_cast<int>(a.size(0)), K = static_cast<int>(a.size(1)),
            N = static_cast<int>(b.size(1));
  cudaDataType_t t = CUDA_R_32F;
  cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
  if (a.dtype() == DType::f16) t = CUDA_R_16F;
  if (a.dtype() == DType::bf16) t = CUDA_R_16BF;
  if (tf32) ct = CUBLAS_COMPUTE_32F_FAST_TF32;
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasGemmEx(cuda::cublas_handle(0), CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one,
                            b.data_ptr(), t, N, a.data_ptr(), t, K, &zero, out.data_ptr(), t, N, ct,
                            CUBLAS_GEMM_DEFAULT));
}

void bench_matmul(bool quick) {
  std::printf("\n### matmul (TFLOP/s; reference: cuBLAS cublasGemmEx on the same buffers)\n\n");
  std::printf(
      "| op | dtype | M x K x N | Shardlight | reference | ratio |\n|---|---|---|---|---|---|\n");
  std::vector<GemmCase> cases = {
      {4096, 4096, 4096}, {8192, 768, 3072}, {8192, 3072, 768}, {16384, 256, 256}};
  if (quick) cases = {{1024, 1024, 1024}, {2048, 768, 3072}};
  struct Mode {
    DType dt;
    bool tf32;
    const char* name;
  };
  for (Mode m : {Mode{DType::f32, false, "float32"}, Mode{DType::f32, true, "float32 (TF32)"},
                 Mode{DType::f16, false, "float16"}, Mode{DType::bf16, false, "bfloat16"}}) {
    for (const GemmCase& c : cases) {
      Tensor a = randn({c.M, c.K}, {.dtype = m.dt, .device = kGPU});
      Tensor b = randn({c.K, c.N}, {.dtype = m.dt, .device = kGPU});
      Tensor out = empty({c.M, c.N}, {.dtype = m.dt, .device = kGPU});
      cuda::set_allow_tf32(m.tf32);
      double ours = time_ms([&] { (void)ops::mm(a, b); });
      double ref = time_ms([&] { cublas_mm(a, b, out, m.tf32); });
      cuda::set_allow_tf32(false);
      double flops = 2.0 * static_cast<double>(c.M) * c.K * c.N;
      char shape[64];
      std::snprintf(shape, sizeof shape, "%lld x %lld x %lld", static_cast<long long>(c.M),
                    static_cast<long long>(c.K), static_cast<long long>(c.N));
      row("mm", m.name, shape, flops / ours / 1e9, flops / ref / 1e9, "TFLOP/s", "cuBLAS");
    }
  }
}

// ---- linear + activation ---------------------------------------------------------------------

void bench_linear_act(bool quick) {
  std::printf(
      "\n### linear + activation (TFLOP/s of the GEMM; reference: ops::linear with the bias "
      "epilogue, then the activation kernel)\n\n");
  std::printf(
      "| op | dtype | M x K x N | Shardlight | reference | ratio |\n|---|---|---|---|---|---|\n");
  // the feed-forward GEMM of a BERT-base layer (linear1: 768 -> 3072) at 8192 tokens
  GemmCase c = quick ? GemmCase{2048, 768, 3072} : GemmCase{8192, 768, 3072};
  struct Mode {
    DType dt;
    const char* name;
  };
  for (Mode m :
       {Mode{DType::f32, "float32"}, Mode{DType::f16, "float16"}, Mode{DType::bf16, "bfloat16"}}) {
    Tensor x = randn({c.M, c.K}, {.dtype = m.dt, .device = kGPU});
    Tensor w = randn({c.N, c.K}, {.dtype = m.dt, .device = kGPU});
    Tensor b = randn({c.N}, {.dtype = m.dt, .device = kGPU});
    for (Activation act : {Activation::relu, Activation::gelu_tanh, Activation::gelu}) {
      const UnaryOp uop = act == Activation::relu   ? UnaryOp::relu
                          : act == Activation::gelu ? UnaryOp::gelu
                                                    : UnaryOp::gelu_tanh;
      // inference (no pre-activation kept) and training (the backward's tensor kept)
      for (bool train : {false, true}) {
        double ours = time_ms([&] { (void)ops::linear_act_forward(x, w, b, act, train); });
        double ref = time_ms([&] { (void)ops::unary(uop, ops::linear(x, w, b)); });
        double flops = 2.0 * static_cast<double>(c.M) * c.K * c.N;
        char shape[64];
        std::snprintf(shape, sizeof shape, "%lld x %lld x %lld", static_cast<long long>(c.M),
                      static_cast<long long>(c.K), static_cast<long long>(c.N));
        std::string what = std::string("linear_act ") + activation_name(act) +
                           (train ? " (keeps pre-activation)" : "");
        row(what, m.name, shape, flops / ours / 1e9, flops / ref / 1e9, "TFLOP/s",
            "GEMM+bias, then activation");
      }
    }
  }
}

// ---- memory-bound ops ----------------------------------------------------------------------

void bench_bandwidth(bool quick) {
  std::printf(
      "\n### memory-bound ops (GB/s of bytes read + written; reference: "
      "cudaMemcpyAsync device-to-device of the same bytes)\n\n");
  std::printf(
      "| op | dtype | shape | Shardlight | reference | ratio |\n|---|---|---|---|---|---|\n");
  const int64_t n = quick ? (int64_t{1} << 22) : (int64_t{1} << 26);
  const int64_t D = 1024;
  for (DType dt : {DType::f32, DType::bf16}) {
    const double es = static_cast<double>(dtype_size(dt));
    Tensor x = randn({n / D, D}, {.dtype = dt, .device = kGPU});
    Tensor y = randn({n / D, D}, {.dtype = dt, .device = kGPU});
    Tensor w = randn({D}, {.dtype = dt, .device = kGPU});
    Tensor scratch = empty({n / D, D}, {.dtype = dt, .device = kGPU});
    // the reference: a plain copy moving `bytes` in total (half read, half written)
    auto copy_gbs = [&](double bytes) {
      size_t half = static_cast<size_t>(bytes / 2);
      Tensor src = empty({static_cast<int64_t>(half)}, {.dtype = DType::b8, .device = kGPU});
      Tensor dst = empty({static_cast<int64_t>(half)}, {.dtype = DType::b8, .device = kGPU});
      double ms = time_ms([&] {
        CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), half, cudaMemcpyDeviceToDevice,
                                   cuda::compute_stream(0)));
      });
      return bytes / ms / 1e6;
    };
    const std::string dts = dtype_name(dt);
    char shape[64];
    std::snprintf(shape, sizeof shape, "[%lld, %lld]", static_cast<long long>(n / D),
                  static_cast<long long>(D));
    struct Op {
      const char* name;
      double bytes;  // per call
      std::function<void()> run;
    };
    const double N = static_cast<double>(n);
    std::vector<Op> ops_list = {
        {"copy_ (Tensor)", 2 * N * es, [&] { ops::copy_(scratch, x); }},
        {"add", 3 * N * es, [&] { (void)ops::binary(BinaryOp::add, x, y); }},
        {"mul by scalar", 2 * N * es, [&] { (void)ops::binary(BinaryOp::mul, x, Scalar(1.5)); }},
        {"add row bias (broadcast)", 2 * N * es, [&] { (void)ops::binary(BinaryOp::add, x, w); }},
        {"gelu", 2 * N * es, [&] { (void)ops::unary(UnaryOp::gelu, x); }},
        {"gelu_backward", 3 * N * es, [&] { (void)ops::binary(BinaryOp::gelu_backward, x, y); }},
        {"sum (all)", N * es, [&] { (void)ops::reduce(ReduceOp::sum, x, {}, false); }},
        {"sum (last dim)", N * es, [&] { (void)ops::reduce(ReduceOp::sum, x, {1}, false); }},
        {"sum (first dim)", N * es, [&] { (void)ops::reduce(ReduceOp::sum, x, {0}, false); }},
        {"max (last dim)", N * es, [&] { (void)ops::reduce(ReduceOp::max, x, {1}, false); }},
    };
    if (softmax_kernel.has(DeviceKind::cuda)) {
      ops_list.push_back({"softmax (last dim)", 2 * N * es, [&] { (void)ops::softmax(x, 1); }});
    }
    if (layer_norm_forward_kernel.has(DeviceKind::cuda)) {
      ops_list.push_back({"layer_norm forward", 2 * N * es,
                          [&] { (void)ops::layer_norm_forward(x, {D}, w, w, 1e-5); }});
    }
    for (Op& op : ops_list) {
      double ms = time_ms(op.run);
      row(op.name, dts, shape, op.bytes / ms / 1e6, copy_gbs(op.bytes), "GB/s", "D2D copy");
    }
  }
}

// ---- the profiler's cost per kernel call ---------------------------------------------------

/// A small elementwise op timed plain and under the profiler (which brackets each kernel call
/// with device-timer markers, Note [Device timer]): what the recording adds per call on the
/// stream, and how long profiler::stop() takes to resolve the markers of those calls.
void bench_profiler_cost(bool quick) {
  std::printf(
      "\n### the profiler's cost per kernel call (a [1024] float32 add, a launch-bound op; "
      "ms per 1000 calls, timed with CUDA events)\n\n"
      "| run | ms per 1000 calls | extra per call | profiler::stop() |\n|---|---|---|---|\n");
  Tensor a = randn({1024}, {.device = kGPU}), b = randn({1024}, {.device = kGPU});
  const int calls = quick ? 100 : 1000;
  auto burst = [&] {
    for (int i = 0; i < calls; ++i) (void)ops::binary(BinaryOp::add, a, b);
  };
  const double plain = time_ms(burst) * 1000.0 / calls;
  std::printf("| plain | %.3f | - | - |\n", plain);
  profiler::start();
  double recorded = 0;
  try {
    recorded = time_ms(burst) * 1000.0 / calls;
  } catch (...) {
    (void)profiler::stop();
    throw;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const profiler::Profile prof = profiler::stop();
  const double stop_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const size_t events = prof.events.size();
  std::printf("| under the profiler | %.3f | %.2f us | %.2f ms for %zu events |\n", recorded,
              recorded - plain, stop_ms, events);
  std::fflush(stdout);
}

// ---- index_add / scatter_add with few columns -----------------------------------------------

/// embedding backward's index_add (outer 1, inner D, k tokens into V rows) and a 1-d scatter_add:
/// few output columns, many index entries, where the kernels may sort (Note [Sorted index_add] in
/// core/cuda/index_plan.h; the table names the path the cost model chose, to check it). The
/// kernels are called directly on a preallocated output (the ops copy `self` first, 100 MB here,
/// which would hide the kernels at small k), with indices known valid.
void bench_index_add(bool quick) {
  std::printf(
      "\n### index_add / scatter_add with few columns (ms per call, the kernel on a preallocated "
      "output; path: Note [Sorted index_add])\n\n| op | dtype | shape | path | ms |\n"
      "|---|---|---|---|---|\n");
  const int64_t V = 32768, D = 768;
  std::vector<int64_t> ks = {64, 255, 400, 1024, 8192};
  if (!quick) ks.push_back(65536);
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor self = zeros({1, V, D}, {.dtype = dt, .device = kGPU});
    for (int64_t k : ks) {
      Tensor ids = randint(0, V, {k}, {.dtype = DType::i64, .device = kGPU});
      Tensor rows = randn({1, k, D}, {.dtype = dt, .device = kGPU});
      const double ms =
          time_ms([&] { index_add_kernel(DeviceKind::cuda, self, ids, rows, 1, -1, "index_add"); });
      std::printf("| index_add (embedding backward) | %s | V %lld, D %lld, k %lld | %s | %.3f |\n",
                  dtype_name(dt), static_cast<long long>(V), static_cast<long long>(D),
                  static_cast<long long>(k), cuda::sorted_accumulate(D, k, 1) ? "sorted" : "simple",
                  ms);
      std::fflush(stdout);
    }
  }
  const int64_t n = quick ? (int64_t{1} << 16) : (int64_t{1} << 20);
  Tensor base = zeros({V}, {.device = kGPU});
  Tensor ids = randint(0, V, {n}, {.dtype = DType::i64, .device = kGPU});
  Tensor src = randn({n}, {.device = kGPU});
  const double ms =
      time_ms([&] { scatter_kernel(DeviceKind::cuda, base, 0, ids, src, true, "scatter_add"); });
  std::printf("| scatter_add (1-d) | float32 | %lld into %lld | %s | %.3f |\n",
              static_cast<long long>(n), static_cast<long long>(V),
              cuda::sorted_accumulate(1, n, 1) ? "sorted" : "simple", ms);
  std::fflush(stdout);
}

// ---- attention ------------------------------------------------------------------------------

/// scaled_dot_product_attention on the fused path (the one-pass kernel forward, the blocked
/// backward) next to the unfused one, at one BERT-large-like and one long-sequence shape.
void bench_attention(bool quick) {
  std::printf(
      "\n### scaled_dot_product_attention (forward TFLOP/s counting 4 N H L S E, halved when "
      "causal; forward + backward ms; reference: the unfused path)\n\n");
  std::printf(
      "| dtype | N x H x L x E | causal | fused fwd | unfused fwd | fwd ratio | fused fwd+bwd | "
      "unfused fwd+bwd |\n|---|---|---|---|---|---|---|---|\n");
  struct Config {
    int64_t N, H, L, E;
    DType dt;
  };
  // every dtype at the BERT-like shape, bfloat16 alone at the long one (time budget)
  std::vector<Config> configs = {{8, 16, 512, 64, DType::bf16},
                                 {8, 16, 512, 64, DType::f16},
                                 {8, 16, 512, 64, DType::f32},
                                 {2, 16, 4096, 64, DType::bf16}};
  if (quick) configs = {{2, 4, 256, 64, DType::bf16}};
  for (const Config& sh : configs) {
    const DType dt = sh.dt;
    for (bool causal : {false, true}) {
      TensorOptions o{.dtype = dt, .device = kGPU};
      Tensor q = randn({sh.N, sh.H, sh.L, sh.E}, o).requires_grad_();
      Tensor k = randn({sh.N, sh.H, sh.L, sh.E}, o).requires_grad_();
      Tensor v = randn({sh.N, sh.H, sh.L, sh.E}, o).requires_grad_();
      Tensor gy = randn({sh.N, sh.H, sh.L, sh.E}, o);
      auto fwd = [&](AttentionBackend b) {
        NoGradGuard ng;
        AttentionBackendScope scope(b);
        return time_ms([&] { (void)scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal); });
      };
      auto fwd_bwd = [&](AttentionBackend b) {
        AttentionBackendScope scope(b);
        return time_ms([&] {
          Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal);
          y.backward(gy);
          q.set_grad(Tensor());
          k.set_grad(Tensor());
          v.set_grad(Tensor());
        });
      };
      const double flops = 4.0 * static_cast<double>(sh.N * sh.H * sh.L) *
                           static_cast<double>(sh.L * sh.E) / (causal ? 2.0 : 1.0);
      const double f = fwd(AttentionBackend::fused), u = fwd(AttentionBackend::unfused);
      const double fb = fwd_bwd(AttentionBackend::fused), ub = fwd_bwd(AttentionBackend::unfused);
      std::printf(
          "| %s | %lld x %lld x %lld x %lld | %s | %.1f | %.1f | %.2f | %.2f ms | %.2f ms |\n",
          dtype_name(dt), static_cast<long long>(sh.N), static_cast<long long>(sh.H),
          static_cast<long long>(sh.L), static_cast<long long>(sh.E), causal ? "yes" : "no",
          flops / f / 1e9, flops / u / 1e9, u / f, fb, ub);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (!cuda::is_available()) {
    std::printf("bench_gpu: no GPU visible; skipped\n");
    return 77;
  }
  if (quick) {
    sl::bench::g_warmup = 1;
    sl::bench::g_iters = 3;
  }
  const cudaDeviceProp& p = cuda::device_props(0);
  std::printf(
      "## Shardlight GPU benchmark\n\nGPU: %s (compute capability %d.%d, %d SMs, %.0f GiB)\n",
      p.name, p.major, p.minor, p.multiProcessorCount,
      static_cast<double>(p.totalGlobalMem) / (1 << 30));
  try {
    bench_matmul(quick);
    bench_linear_act(quick);
    bench_bandwidth(quick);
    bench_attention(quick);
    bench_index_add(quick);
    bench_profiler_cost(quick);
    sl::bench::bench_training(quick);
  } catch (const std::exception& e) {
    std::printf("\nbench_gpu: failed: %s\n", e.what());
    return 1;
  }
  MemoryStats s = memory_stats(kGPU);
  std::printf(
      "\nGPU memory: peak %.2f GiB held by tensors, %.2f GiB reserved by the caching "
      "allocator\n",
      static_cast<double>(s.peak_bytes) / (1 << 30),
      static_cast<double>(s.reserved_bytes) / (1 << 30));
  return 0;
}
