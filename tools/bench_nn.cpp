// Forward+backward timings of nn layers at model-like shapes (issue 3, section 9), printed as
// "case<TAB>ms" lines; tools/bench_nn.sh runs each case next to PyTorch's (tools/bench_nn.py,
// the same cases with the same protocol) and prints the ratios.
//
//   build/tools/bench_nn [--threads N] [--filter SUBSTR | --case NAME] [--reps R] [--list]
//                        [--blas-core]
//
// Each case (tools/bench_cases.h): one warm-up iteration, then the median of R timed iterations of
// forward -> backward(ones) with the gradients cleared first (set to none, as PyTorch's
// zero_grad). The layers are the functional ops with PyTorch's default parameter init:
// conv2d; max_pool2d and batch_norm (training); gru / lstm; the nn::MultiheadAttention and
// nn::TransformerEncoderLayer modules (self-attention); scaled_dot_product_attention at a long
// sequence on the fused and unfused paths (PyTorch 1.13 has no such function: its side is the same
// math written out); softmax / log_softmax over the last dim and over a dim that is not the last
// (forward alone, and forward + backward); cumsum over dim 0 (forward); and one AdamW step over 10M
// parameters.
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <shardlight/shardlight.h>

#include "bench_cases.h"

using namespace sl;
using bench::Case;

namespace {

/// U(-bound, bound) leaf tensor: PyTorch's default init of RNN weights (bound 1/sqrt(H)) and
/// the kaiming_uniform(a=sqrt(5)) of Conv / Linear weights (bound 1/sqrt(fan_in)).
Tensor uniform_param(const Shape& shape, double bound) {
  Tensor t = empty(shape);
  t.uniform_(-bound, bound);
  return t.requires_grad_();
}

/// forward -> backward(ones) with the gradients of `leaves` set to none first.
std::function<void()> fwd_bwd(std::vector<Tensor> leaves, std::function<Tensor()> forward) {
  return [leaves, forward]() mutable {
    for (Tensor& t : leaves) t.set_grad(Tensor());
    Tensor y = forward();
    y.backward(ones_like(y));
  };
}

/// The same for a module: its gradients set to none (zero_grad) and the input's.
std::function<void()> module_fwd_bwd(std::shared_ptr<nn::Module> m, Tensor x,
                                     std::function<Tensor()> forward) {
  return [m, x, forward]() mutable {
    m->zero_grad();
    x.set_grad(Tensor());
    Tensor y = forward();
    y.backward(ones_like(y));
  };
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  // ResNet-like 3x3 convolutions, batch 8, no bias (followed by BatchNorm in ResNet): the
  // stride-1 convolution of each stage and a stride-2 downsampling one.
  struct ConvShape {
    int64_t c_in, c_out, hw, stride;
  };
  for (ConvShape s :
       {ConvShape{64, 64, 56, 1}, ConvShape{128, 128, 28, 1}, ConvShape{256, 256, 14, 1},
        ConvShape{512, 512, 7, 1}, ConvShape{128, 256, 28, 2}}) {
    std::string name = "conv2d b8 " + std::to_string(s.c_in) + "->" + std::to_string(s.c_out) +
                       " " + std::to_string(s.hw) + "x" + std::to_string(s.hw) + " k3 s" +
                       std::to_string(s.stride);
    cs.push_back(
        {name, 5, [s] {
           Tensor w = uniform_param({s.c_out, s.c_in, 3, 3}, 1.0 / std::sqrt(9.0 * s.c_in));
           Tensor x = randn({8, s.c_in, s.hw, s.hw}).requires_grad_();
           return fwd_bwd({x, w}, [x, w, s] { return conv2d(x, w, Tensor(), s.stride, 1); });
         }});
  }
  // Max pooling and training-mode batch norm at the zoo's shapes: ResNet's stem pool (k3 s2 p1
  // on 64x112x112) and a ResNet stage-1 batch norm, batch 8; the FashionCNN's first pool (k2)
  // and batch norm, batch 128. Batch norm with PyTorch's default init (weight 1, bias 0).
  struct PoolShape {
    int64_t b, c, hw, k, stride, pad;
  };
  for (PoolShape s : {PoolShape{8, 64, 112, 3, 2, 1}, PoolShape{128, 32, 28, 2, 2, 0}}) {
    std::string name = "max_pool2d b" + std::to_string(s.b) + " " + std::to_string(s.c) + "x" +
                       std::to_string(s.hw) + "x" + std::to_string(s.hw) + " k" +
                       std::to_string(s.k) + " s" + std::to_string(s.stride) + " p" +
                       std::to_string(s.pad);
    cs.push_back({name, 10, [s] {
                    Tensor x = randn({s.b, s.c, s.hw, s.hw}).requires_grad_();
                    return fwd_bwd({x}, [x, s] { return max_pool2d(x, s.k, s.stride, s.pad); });
                  }});
  }
  struct BnShape {
    int64_t b, c, hw;
  };
  for (BnShape s : {BnShape{8, 64, 56}, BnShape{128, 32, 28}}) {
    std::string name = "batch_norm2d train b" + std::to_string(s.b) + " " + std::to_string(s.c) +
                       "x" + std::to_string(s.hw) + "x" + std::to_string(s.hw);
    cs.push_back({name, 10, [s] {
                    Tensor x = randn({s.b, s.c, s.hw, s.hw}).requires_grad_();
                    Tensor w = ones({s.c}).requires_grad_(), b = zeros({s.c}).requires_grad_();
                    Tensor rm = zeros({s.c}), rv = ones({s.c});
                    return fwd_bwd({x, w, b}, [x, w, b, rm, rv] {
                      return batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
                    });
                  }});
  }
  // SyncBatchNorm's compute on one rank (Note [SyncBatchNorm]: statistics, normalisation, local
  // sums and input gradient from batch norm's kernels; the collectives are a copy here). PyTorch
  // 1.13 has no SyncBatchNorm on the CPU: its side is BatchNorm2d, the same math fused.
  {
    struct OneRank final : nn::StatsSync {
      int world_size() const override { return 1; }
      Tensor all_gather(const Tensor& local) override { return local.reshape({1, local.numel()}); }
      void all_reduce_sum(const Tensor&) override {}
    };
    cs.push_back({"sync_batch_norm2d train b8 64x56x56 (1 rank)", 10, [] {
                    Tensor x = randn({8, 64, 56, 56}).requires_grad_();
                    Tensor w = ones({64}).requires_grad_(), b = zeros({64}).requires_grad_();
                    Tensor rm = zeros({64}), rv = ones({64});
                    auto sync = std::make_shared<OneRank>();
                    return fwd_bwd({x, w, b}, [x, w, b, rm, rv, sync] {
                      return nn::sync_batch_norm(x, rm, rv, w, b, 0.1, 1e-5, sync);
                    });
                  }});
  }
  // DeepSpeech2-like bidirectional RNNs: batch 8, 200 steps, input size = hidden, biases.
  for (const char* kind : {"gru", "lstm"}) {
    for (int64_t h : {256, 512, 1024}) {
      const bool is_gru = std::string(kind) == "gru";
      std::string name = std::string(kind) + " bi b8 T200 h" + std::to_string(h);
      cs.push_back({name, h >= 1024 ? 1 : 3, [is_gru, h] {
                      const int64_t G = is_gru ? 3 : 4;
                      const double bound = 1.0 / std::sqrt(static_cast<double>(h));
                      TensorList params;
                      for (int dir = 0; dir < 2; ++dir) {
                        params.push_back(uniform_param({G * h, h}, bound));  // w_ih
                        params.push_back(uniform_param({G * h, h}, bound));  // w_hh
                        params.push_back(uniform_param({G * h}, bound));     // b_ih
                        params.push_back(uniform_param({G * h}, bound));     // b_hh
                      }
                      Tensor x = randn({200, 8, h}).requires_grad_();
                      std::vector<Tensor> leaves(params.begin(), params.end());
                      leaves.push_back(x);
                      return fwd_bwd(leaves, [is_gru, x, params] {
                        if (is_gru)
                          return gru(x, Tensor(), params, true, 1, 0.0, true, true, false).first;
                        return std::get<0>(
                            lstm(x, Tensor(), Tensor(), params, true, 1, 0.0, true, true, false));
                      });
                    }});
    }
  }
  // BERT-like self-attention (batch_first), batch 16, sequence 128, head dim 64: the
  // nn::MultiheadAttention module, weights not returned (as PyTorch's need_weights=False).
  for (auto [e, heads] : {std::pair<int64_t, int64_t>{256, 4}, {512, 8}, {768, 12}}) {
    std::string name = "mha b16 L128 E" + std::to_string(e) + " h" + std::to_string(heads);
    cs.push_back({name, 7, [e, heads] {
                    auto m = std::make_shared<nn::MultiheadAttention>(e, heads, 0.0, true, true);
                    Tensor x = randn({16, 128, e}).requires_grad_();
                    return module_fwd_bwd(m, x, [m, x] {
                      nn::AttentionOptions o;
                      o.need_weights = false;
                      return m->forward(x, x, x, o).first;
                    });
                  }});
  }
  // Long-sequence self-attention, batch 2, 8 heads, 2048 queries and keys, head dim 64 (scores:
  // 64 Mi elements): scaled_dot_product_attention on each path (Note [Fused attention]). The
  // fused one holds 4 Mi scores at a time and recomputes them in the backward.
  for (AttentionBackend b : {AttentionBackend::fused, AttentionBackend::unfused}) {
    const bool fused = b == AttentionBackend::fused;
    cs.push_back({fused ? "sdpa b2 h8 L2048 E64 fused" : "sdpa b2 h8 L2048 E64 unfused", 3, [b] {
                    Tensor q = randn({2, 8, 2048, 64}).requires_grad_();
                    Tensor k = randn({2, 8, 2048, 64}).requires_grad_();
                    Tensor v = randn({2, 8, 2048, 64}).requires_grad_();
                    return fwd_bwd({q, k, v}, [b, q, k, v] {
                      AttentionBackendScope scope(b);
                      return scaled_dot_product_attention(q, k, v);
                    });
                  }});
  }
  // One BERT-base encoder layer (post-LN, GELU, E 768, 12 heads, feed-forward 3072), batch 8,
  // sequence 128, dropout 0 (so both sides time the same arithmetic), training mode.
  cs.push_back({"encoder b8 L128 E768 h12 ff3072", 7, [] {
                  auto m = std::make_shared<nn::TransformerEncoderLayer>(
                      768, 12,
                      nn::TransformerEncoderLayerOptions{.dim_feedforward = 3072,
                                                         .dropout = 0.0,
                                                         .activation = "gelu",
                                                         .batch_first = true});
                  Tensor x = randn({8, 128, 768}).requires_grad_();
                  return module_fwd_bwd(m, x, [m, x] { return m->forward(x); });
                }});
  // softmax / log_softmax over the last dim (rows) and over a dim that is not the last (Note
  // [Softmax over a non-last dim]): the forward alone, and forward + backward as the other cases.
  struct SoftmaxCase {
    const char* name;
    Shape shape;
    int64_t dim;
    bool log;
  };
  for (const SoftmaxCase& c :
       {SoftmaxCase{"softmax dim1 [1024,1024]", {1024, 1024}, 1, false},
        SoftmaxCase{"log_softmax dim1 [4096,250]", {4096, 250}, 1, true},
        SoftmaxCase{"softmax dim0 [1024,1024]", {1024, 1024}, 0, false},
        SoftmaxCase{"log_softmax dim1 [64,256,64]", {64, 256, 64}, 1, true}}) {
    for (bool backward : {false, true}) {
      cs.push_back({std::string(c.name) + (backward ? " fwd+bwd" : " fwd"), 20, [c, backward] {
                      Tensor x = randn(c.shape).requires_grad_();
                      auto forward = [c, x] {
                        return c.log ? log_softmax(x, c.dim) : softmax(x, c.dim);
                      };
                      if (backward) return fwd_bwd({x}, forward);
                      return std::function<void()>([forward] {
                        NoGradGuard no_grad;
                        forward();
                      });
                    }});
    }
  }
  // A running sum down the rows (cumsum over dim 0), forward only.
  cs.push_back({"cumsum dim0 [4096,1024] fwd", 10, [] {
                  Tensor x = randn({4096, 1024});
                  return std::function<void()>([x] { x.cumsum(0); });
                }});
  // One AdamW step over 10M f32 parameters (one tensor), gradients fixed.
  cs.push_back({"adamw step 10M params", 10, [] {
                  Tensor p = randn({10'000'000}).requires_grad_();
                  p.set_grad(randn({10'000'000}));
                  auto opt = std::make_shared<optim::AdamW>(
                      TensorList{p}, optim::AdamWOptions{.lr = 1e-3, .weight_decay = 0.01});
                  opt->step();  // state allocated before timing
                  return std::function<void()>([opt] { opt->step(); });
                }});
  return cs;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::bench_main(argc, argv, cases());
}
