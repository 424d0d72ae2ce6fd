// bench_dist: step time, per-rank memory and communication of single, ddp, zero1 and zero2 on a
// small transformer encoder built from nn (about 13M parameters with the defaults), next to the
// ZeRO paper's memory prediction. Run it once per world size:
//   build/tools/bench_dist                                  # 1 rank: single, ddp, zero1, zero2
//   mpirun -np 2 --oversubscribe build/tools/bench_dist     # 2 ranks: ddp, zero1, zero2
//   mpirun -np 4 --oversubscribe build/tools/bench_dist
// Options: --d-model 512 --layers 4 --ffn 2048 --seq 32 --batch 8 (global) --steps 4
//          --warmup 1 --bucket-mb 25 --first-bucket-mb 1 --strategies single,ddp,zero1,zero2
//          --threads N
//          --optimizer adamw|lamb (Lamb's ZeRO step adds one all-reduce of 2 doubles a parameter)
//          --reduce-dtypes same,bf16 (each strategy once per dtype its gradients travel in:
//          StrategyOptions::reduce_dtype, "same" for the gradients' own)
// Rank 0 prints one Markdown row per strategy. Step times on an oversubscribed machine (more
// ranks than cores) measure contention, not the method; memory and bytes do not depend on it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <shardlight/shardlight.h>

#include "dist/accounting.h"
#include "dist/strategy.h"

using namespace sl;

namespace {

/// One post-LN encoder layer (BERT's): self-attention and a GELU feed-forward, from nn::Linear
/// and the functional layer_norm / scaled_dot_product_attention.
struct EncoderLayer : nn::Module {
  EncoderLayer(int64_t d, int64_t ffn, int64_t heads)
      : Module("EncoderLayer"), d_(d), heads_(heads) {
    qkv = register_module("qkv", std::make_shared<nn::Linear>(d, 3 * d));
    out = register_module("out", std::make_shared<nn::Linear>(d, d));
    ff1 = register_module("ff1", std::make_shared<nn::Linear>(d, ffn));
    ff2 = register_module("ff2", std::make_shared<nn::Linear>(ffn, d));
    ln1_w = register_parameter("ln1_weight", ones({d}));
    ln1_b = register_parameter("ln1_bias", zeros({d}));
    ln2_w = register_parameter("ln2_weight", ones({d}));
    ln2_b = register_parameter("ln2_bias", zeros({d}));
  }
  Tensor forward(const Tensor& x) override {  // x [B, S, d]
    int64_t b = x.size(0), s = x.size(1), hd = d_ / heads_;
    Tensor qkv_ = qkv->forward(x).view({b, s, 3, heads_, hd}).permute({2, 0, 3, 1, 4});
    Tensor a = scaled_dot_product_attention(qkv_[0], qkv_[1], qkv_[2]);  // [B, H, S, hd]
    a = a.permute({0, 2, 1, 3}).reshape({b, s, d_});
    Tensor h = layer_norm(x + out->forward(a), {d_}, ln1_w, ln1_b);
    return layer_norm(h + ff2->forward(ff1->forward(h).gelu()), {d_}, ln2_w, ln2_b);
  }
  int64_t d_, heads_;
  std::shared_ptr<nn::Linear> qkv, out, ff1, ff2;
  Tensor ln1_w, ln1_b, ln2_w, ln2_b;
};

struct Encoder : nn::Module {
  Encoder(int64_t d, int64_t ffn, int64_t layers) : Module("Encoder") {
    auto list = std::make_shared<nn::ModuleList>();
    for (int64_t i = 0; i < layers; ++i)
      list->push_back(std::make_shared<EncoderLayer>(d, ffn, d / 64));
    blocks = register_module("layers", list);
    head = register_module("head", std::make_shared<nn::Linear>(d, d));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& m : blocks->children()) h = m->forward(h);
    return head->forward(h);
  }
  std::shared_ptr<nn::ModuleList> blocks;
  std::shared_ptr<nn::Linear> head;
};

struct Args {
  int64_t d = 512, layers = 4, ffn = 2048, seq = 32, batch = 8;
  int steps = 4, warmup = 1;
  double bucket_mb = 25;
  double first_bucket_mb = 1;
  std::string strategies;
  int threads = 0;
  std::string optimizer = "adamw";
  std::string reduce_dtypes = "same";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      SL_CHECK(i + 1 < argc, "bench_dist: ", k, " needs a value");
      return argv[++i];
    };
    if (k == "--d-model")
      a.d = std::stoll(val());
    else if (k == "--layers")
      a.layers = std::stoll(val());
    else if (k == "--ffn")
      a.ffn = std::stoll(val());
    else if (k == "--seq")
      a.seq = std::stoll(val());
    else if (k == "--batch")
      a.batch = std::stoll(val());
    else if (k == "--steps")
      a.steps = std::stoi(val());
    else if (k == "--warmup")
      a.warmup = std::stoi(val());
    else if (k == "--bucket-mb")
      a.bucket_mb = std::stod(val());
    else if (k == "--first-bucket-mb")
      a.first_bucket_mb = std::stod(val());
    else if (k == "--strategies")
      a.strategies = val();
    else if (k == "--threads")
      a.threads = std::stoi(val());
    else if (k == "--optimizer")
      a.optimizer = val();
    else if (k == "--reduce-dtypes")
      a.reduce_dtypes = val();
    else
      SL_CHECK(false, "bench_dist: unknown option ", k);
  }
  return a;
}

double mib(double b) {
  return b / (1024.0 * 1024.0);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a = parse(argc, argv);
    auto pg = dist::world();
    const int n = pg->size(), rank = pg->rank();
    if (a.threads > 0) set_num_threads(a.threads);
    if (a.strategies.empty()) a.strategies = n == 1 ? "single,ddp,zero1,zero2" : "ddp,zero1,zero2";
    SL_CHECK(a.batch % n == 0, "bench_dist: --batch ", a.batch, " is not divisible by ", n,
             " ranks");
    auto split = [](const std::string& list) {
      std::vector<std::string> out;
      std::stringstream ss(list);
      for (std::string k; std::getline(ss, k, ',');) out.push_back(k);
      return out;
    };
    std::vector<std::pair<std::string, std::optional<DType>>> runs;  // strategy, reduce dtype
    for (const std::string& kind : split(a.strategies)) {
      if (kind == "single" && n > 1) continue;
      for (const std::string& rd : split(a.reduce_dtypes)) {
        if (rd == "same") {
          runs.emplace_back(kind, std::nullopt);
        } else if (kind != "single") {  // one rank communicates nothing
          runs.emplace_back(kind, parse_dtype(rd));
        }
      }
    }
    if (rank == 0) {
      std::printf(
          "| strategy | N | grads travel in | step ms | params MiB | grads MiB | optim MiB | "
          "predicted p/g/o MiB | comm buffers MiB | peak MiB | calls/step | sent MiB/step |\n");
      std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    }
    for (const auto& [kind, reduce_dtype] : runs) {
      reset_peak_memory_stats();
      manual_seed(0);
      auto model = std::make_shared<Encoder>(a.d, a.ffn, a.layers);
      std::unique_ptr<optim::Optimizer> opt;
      if (a.optimizer == "lamb") {
        opt = std::make_unique<optim::Lamb>(model->parameters(), optim::LambOptions{.lr = 1e-4});
      } else {
        SL_CHECK(a.optimizer == "adamw", "bench_dist: --optimizer must be adamw or lamb, got '",
                 a.optimizer, "'");
        opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-4});
      }
      auto strategy = dist::make_strategy(
          kind, model, *opt,
          {.group = pg,
           .bucket_cap_bytes = static_cast<int64_t>(a.bucket_mb * 1024 * 1024),
           .first_bucket_cap_bytes = static_cast<int64_t>(a.first_bucket_mb * 1024 * 1024),
           .max_grad_norm = 1.0,
           .reduce_dtype = reduce_dtype});
      Generator gen(42 + static_cast<uint64_t>(rank));
      int64_t local = a.batch / n;
      Tensor x = randn({local, a.seq, a.d}, {}, &gen);
      Tensor y = randn({local, a.seq, a.d}, {}, &gen);
      std::vector<double> times;
      dist::CommStats comm;
      for (int s = 0; s < a.warmup + a.steps; ++s) {
        pg->barrier()->wait();
        pg->reset_stats();
        auto t0 = std::chrono::steady_clock::now();
        strategy->zero_grad();
        strategy->backward((strategy->forward(x) - y).square().mean());
        strategy->step();
        pg->barrier()->wait();  // the step ends when every rank's step ends
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
        comm = pg->stats();
        if (s >= a.warmup) times.push_back(ms);
      }
      std::sort(times.begin(), times.end());
      double median = times[times.size() / 2];
      dist::MemoryReport m = strategy->memory_report();
      dist::MemoryPrediction p = dist::predict_memory(dist::parse_strategy(kind), m.numel, n, 4, 8);
      // the barrier that ends the step is the benchmark's, not the strategy's
      int64_t calls = comm.total().calls - 1;
      if (rank == 0) {
        std::printf(
            "| %s | %d | %s | %.0f | %.1f | %.1f | %.1f | %.1f / %.1f / %.1f | %.1f | %.1f | "
            "%lld | %.1f |\n",
            kind.c_str(), n, reduce_dtype ? dtype_name(*reduce_dtype) : "float32", median,
            mib(m.param_bytes), mib(m.grad_bytes),
            mib(m.optimizer_state_bytes + m.master_weight_bytes), mib(p.param_bytes),
            mib(p.grad_bytes), mib(p.optimizer_state_bytes), mib(m.comm_buffer_bytes),
            mib(m.allocator_peak_bytes), static_cast<long long>(calls),
            mib(comm.total().sent_bytes));
        std::fflush(stdout);
      }
    }
    if (rank == 0)
      std::printf("\nPsi = %lld parameters\n",
                  static_cast<long long>(
                      std::make_shared<Encoder>(a.d, a.ffn, a.layers)->num_parameters()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_dist: %s\n", e.what());
    return 1;
  }
  return 0;
}
