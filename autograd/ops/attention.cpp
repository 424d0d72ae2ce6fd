// Differentiable attention: the unfused path (matmuls from the matmul family around the fused
// masked softmax) and the fused one (Note [Fused attention]); each backward is recorded beside
// its forward here.
#include "autograd/ops/attention.h"

#include <atomic>
#include <cmath>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/activation_derivative.h"
#include "autograd/ops/dropout.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/matmul.h"
#include "autograd/ops/reduce.h"
#include "core/amp.h"
#include "core/ops/attention.h"
#include "core/ops/copy.h"
#include "core/ops/dropout.h"

namespace sl {

namespace {
/// The gradient w.r.t. the scores of p = softmax(scale * scores + mask) along the last dim, as
/// differentiable ops for a backward that records a graph (Note [Double backward] in
/// autograd/engine.cpp). Masked entries have p = 0, so 0.
Tensor softmax_grad_graph(const Tensor& g, const Tensor& p, double scale) {
  return mul(detail::softmax_backward_ops(g, p, -1), scale);
}
}  // namespace

Tensor attention_softmax(const Tensor& scores, const Tensor& attn_mask, bool is_causal,
                         double scale) {
  Tensor probs = ops::attention_softmax_forward(scores, attn_mask, is_causal, scale);
  if (needs_grad(scores)) {
    record(
        "AttentionSoftmaxBackward", {scores}, {&probs},
        [sp = SavedTensor::output(probs), scale](const BackwardCtx& c) -> variable_list {
          Tensor p = sp.unpack("AttentionSoftmaxBackward");
          return {GradMode::is_enabled() ? softmax_grad_graph(c.grad(), p, scale)
                                         : ops::attention_softmax_backward(c.grad(), p, scale)};
        },
        DoubleBackward::supported);
  }
  return probs;
}

namespace {

std::atomic<AttentionBackend> g_backend{AttentionBackend::automatic};

/// Checks the inputs as the unfused path needs them; returns the scale to use.
double check_sdpa(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& attn_mask, double dropout_p, std::optional<double> scale) {
  ops::check_defined(op, q, "query");
  ops::check_defined(op, k, "key");
  ops::check_defined(op, v, "value");
  ops::check_same_device(op, {&q, &k, &v});
  SL_CHECK_SHAPE(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, op,
                 ": query, key and value need at least 2 dims, got ", shape_str(q.sizes()), ", ",
                 shape_str(k.sizes()), ", ", shape_str(v.sizes()));
  SL_CHECK_SHAPE(q.size(-1) == k.size(-1), op, ": query of shape ", shape_str(q.sizes()),
                 " and key of shape ", shape_str(k.sizes()), " differ in the embedding dim");
  SL_CHECK_SHAPE(k.size(-2) == v.size(-2), op, ": key of shape ", shape_str(k.sizes()),
                 " and value of shape ", shape_str(v.sizes()), " differ in the sequence length");
  SL_CHECK_DTYPE(is_floating(q.dtype()) && q.dtype() == k.dtype() && q.dtype() == v.dtype(), op,
                 ": query, key and value must have one floating dtype, got ", dtype_name(q.dtype()),
                 ", ", dtype_name(k.dtype()), ", ", dtype_name(v.dtype()));
  SL_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, op, ": dropout_p must be in [0, 1), got ",
           dropout_p);
  Shape scores_shape = broadcast_shapes(Shape(q.sizes().begin(), q.sizes().end() - 2),
                                        Shape(k.sizes().begin(), k.sizes().end() - 2), op);
  scores_shape.insert(scores_shape.end(), {q.size(-2), k.size(-2)});
  ops::check_attention_mask(op, scores_shape, q.device(), attn_mask);
  return scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
}

/// Why the fused path cannot take these inputs (null when it can).
const char* fused_obstacle(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p) {
  if (dropout_p > 0.0) return "dropout_p > 0 (the fused path has no dropout)";
  bool same = q.dim() == k.dim() && q.dim() == v.dim();
  for (int64_t d = 0; same && d + 2 < q.dim(); ++d) {
    same = q.size(d) == k.size(d) && q.size(d) == v.size(d);
  }
  if (!same)
    return "query, key and value differ in their batch dims (the fused path does not broadcast "
           "them)";
  return nullptr;
}

/// Whether the fused path pays under AttentionBackend::automatic.
/// Memory, not speed: on the H200 the CUDA one-pass kernel took 2 to 6 times as long as the
/// unfused path (cuBLAS products around the attention softmax kernel) at 8 x 16 x 512 x 64 and
/// 2 x 16 x 4096 x 64 (bench_gpu, README), so every device takes it only for score matrices
/// larger than one block.
bool fused_pays(const Tensor& q, const Tensor& k) {
  int64_t scores = k.size(-2);
  for (int64_t d = 0; d + 1 < q.dim(); ++d) scores *= q.size(d);
  return scores > ops::attention_block_elements();
}

Tensor fused_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                       const Tensor& attn_mask, bool is_causal, double scale) {
  Tensor q = autocast(q_in, AmpPolicy::lower), k = autocast(k_in, AmpPolicy::lower),
         v = autocast(v_in, AmpPolicy::lower);
  if (!needs_grad(q, k, v))
    return ops::attention_fused_forward(q, k, v, attn_mask, is_causal, scale);
  // the output and the rows' statistics (where the forward gave them) save the backward most of
  // its softmax (Note [Attention row statistics])
  ops::AttentionForward fwd =
      ops::attention_fused_forward_with_stats(q, k, v, attn_mask, is_causal, scale);
  Tensor out = fwd.out;
  const bool with_stats = fwd.stats.defined();
  record(
      "FusedAttentionBackward", {q, k, v}, {&out},
      [sq = SavedTensor(q), sk = SavedTensor(k), sv = SavedTensor(v),
       so = with_stats ? SavedTensor(out) : SavedTensor(), stats = fwd.stats, mask = attn_mask,
       is_causal, scale](const BackwardCtx& c) -> variable_list {
        const char* name = "FusedAttentionBackward";
        if (GradMode::is_enabled()) {
          // create_graph: the unfused formulas as recorded ops, the probabilities recomputed
          // from q and k attached to their history
          Tensor qv = sq.unpack(name), kv = sk.unpack(name), vv = sv.unpack(name);
          const Tensor& g = c.grad();
          Tensor p = attention_softmax(matmul(qv, kv.transpose(-2, -1)), mask, is_causal, scale);
          Tensor gs = softmax_grad_graph(matmul(g, vv.transpose(-2, -1)), p, scale);
          return {matmul(gs, kv), matmul(gs.transpose(-2, -1), qv), matmul(p.transpose(-2, -1), g)};
        }
        ops::AttentionGrads g = ops::attention_fused_backward(
            c.grad(), sq.unpack(name), sk.unpack(name), sv.unpack(name), mask, is_causal, scale,
            so.defined() ? so.unpack(name) : Tensor(), stats);
        return {g.q, g.k, g.v};
      },
      DoubleBackward::supported);
  return out;
}

}  // namespace

AttentionBackend attention_backend() {
  return g_backend.load();
}

AttentionBackend set_attention_backend(AttentionBackend backend) {
  return g_backend.exchange(backend);
}

std::pair<Tensor, Tensor> scaled_dot_product_attention_with_weights(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, double dropout_p,
    bool is_causal, std::optional<double> scale, Generator* gen) {
  const double sc =
      check_sdpa("scaled_dot_product_attention", q, k, v, attn_mask, dropout_p, scale);
  Tensor scores = matmul(q, k.transpose(-2, -1));
  Tensor probs = attention_softmax(scores, attn_mask, is_causal, sc);
  if (dropout_p > 0.0) probs = dropout(probs, dropout_p, true, gen);
  return {matmul(probs, v), probs};
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Generator* gen) {
  const char* op = "scaled_dot_product_attention";
  const double sc = check_sdpa(op, q, k, v, attn_mask, dropout_p, scale);
  const AttentionBackend backend = attention_backend();
  if (backend != AttentionBackend::unfused) {
    const char* obstacle = fused_obstacle(q, k, v, dropout_p);
    SL_CHECK(backend != AttentionBackend::fused || obstacle == nullptr, op,
             ": the fused backend was forced but cannot run: ", obstacle ? obstacle : "");
    if (obstacle == nullptr && (backend == AttentionBackend::fused || fused_pays(q, k))) {
      return fused_attention(q, k, v, attn_mask, is_causal, sc);
    }
  }
  return scaled_dot_product_attention_with_weights(q, k, v, attn_mask, dropout_p, is_causal, sc,
                                                   gen)
      .first;
}

}  // namespace sl
