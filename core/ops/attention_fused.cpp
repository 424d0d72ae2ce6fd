// Fused attention in generic code: the blocked forward and backward of Note [Fused attention]
// (core/ops/attention.h), and the dispatch to a device's one-pass forward kernel.
#include <algorithm>
#include <atomic>

#include "core/creation.h"
#include "core/ops/attention.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/matmul.h"
#include "core/ops/reduce.h"
#include "core/ops/view.h"

namespace sl {

SL_DEFINE_KERNEL(attention_fused_forward_kernel,
                 bool(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& mask, bool is_causal, double scale));
SL_DEFINE_KERNEL(attention_softmax_stats_forward_kernel,
                 void(const Tensor& probs, const Tensor& stats, const Tensor& scores,
                      const Tensor& mask, bool is_causal, double scale, int64_t causal_offset));
SL_DEFINE_KERNEL(attention_softmax_recompute_backward_kernel,
                 void(const Tensor& probs, const Tensor& grad_scores, const Tensor& scores,
                      const Tensor& grad_probs, const Tensor& mask, const Tensor& stats,
                      const Tensor& dot, bool is_causal, double scale, int64_t causal_offset));

namespace ops {
namespace {

std::atomic<int64_t> g_block_elements{int64_t{1} << 22};

/// The inputs viewed as [A, B, rows, cols] (B the last batch dim, A the product of the others),
/// and the mask cast once and broadcast to [A, B, L, S].
struct Problem {
  Shape batch;
  int64_t A = 1, B = 1, L = 0, S = 0, E = 0, Ev = 0;
  Tensor q, k, v, mask;
};

Shape with_tail(Shape s, int64_t a, int64_t b) {
  s.push_back(a);
  s.push_back(b);
  return s;
}

Problem make_problem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& mask) {
  check_fused_attention_inputs(op, q, k, v, mask);
  Problem p;
  p.batch.assign(q.sizes().begin(), q.sizes().end() - 2);
  p.L = q.size(-2);
  p.S = k.size(-2);
  p.E = q.size(-1);
  p.Ev = v.size(-1);
  const size_t n = p.batch.size();
  if (n >= 1) p.B = p.batch[n - 1];
  for (size_t i = 0; i + 1 < n; ++i) p.A *= p.batch[i];
  p.q = reshape(contiguous(q), {p.A, p.B, p.L, p.E});
  p.k = reshape(contiguous(k), {p.A, p.B, p.S, p.E});
  p.v = reshape(contiguous(v), {p.A, p.B, p.S, p.Ev});
  if (mask.defined()) {
    // the dtype attention_softmax_forward would give it, so that no block casts it again
    const DType dt = q.dtype();
    const bool half = dt == DType::f16 || dt == DType::bf16;
    const DType mt = half && mask.dtype() != dt ? DType::f32 : dt;
    Tensor m = is_bool(mask.dtype()) ? mask : cast(mask, mt);
    p.mask = reshape(expand(m, with_tail(p.batch, p.L, p.S)), {p.A, p.B, p.L, p.S});
  }
  return p;
}

/// A block of the blocked form: leading-dim entries [a0, a0 + na), queries [r0, r0 + nr), and
/// the keys [0, nk) those queries can see.
struct Block {
  int64_t a0, na, r0, nr, nk;
};

/// Splits the problem so that one block holds at most attention_block_elements() scores:
/// whole queries of several leading entries when that fits, else rows of one entry.
template <class F>
void for_each_block(const Problem& p, bool is_causal, F&& f) {
  const int64_t budget = attention_block_elements();
  const int64_t per_row = std::max<int64_t>(1, p.B * p.S);
  const int64_t rows_fit = std::max<int64_t>(1, budget / per_row);
  int64_t na = 1, nr = p.L;
  if (rows_fit >= p.L) {
    na = std::min(p.A, rows_fit / std::max<int64_t>(1, p.L));
  } else {
    nr = rows_fit;
  }
  for (int64_t a0 = 0; a0 < p.A; a0 += na) {
    for (int64_t r0 = 0; r0 < p.L; r0 += nr) {
      Block b{a0, std::min(na, p.A - a0), r0, std::min(nr, p.L - r0), p.S};
      if (is_causal) b.nk = std::min(p.S, b.r0 + b.nr);  // top-left causal: key j <= query i
      f(b);
    }
  }
}

/// t[a0 : a0 + na, :, r0 : r0 + nr, c0 : c0 + nc] of a 4-d tensor.
Tensor slice(const Tensor& t, int64_t a0, int64_t na, int64_t r0, int64_t nr, int64_t c0,
             int64_t nc) {
  return narrow(narrow(narrow(t, 0, a0, na), 2, r0, nr), 3, c0, nc);
}

bool single_block(const Problem& p, const Block& b) {
  return b.na == p.A && b.nr == p.L && b.nk == p.S;
}

/// Whether the blocked form keeps and uses the rows' statistics (Note [Attention row
/// statistics]): float32 / float64 on a device with both kernels.
bool uses_stats(const Problem& p) {
  const DeviceKind kind = p.q.device().kind;
  const DType dt = p.q.dtype();
  return (dt == DType::f32 || dt == DType::f64) &&
         attention_softmax_stats_forward_kernel.has(kind) &&
         attention_softmax_recompute_backward_kernel.has(kind);
}

/// The block's masked, scaled attention probabilities [na, B, nr, nk]; with stats defined
/// ([A, B, L, 2]) the block's rows' statistics are written there too.
Tensor block_probs(const Problem& p, const Block& b, bool is_causal, double scale,
                   const Tensor& stats) {
  Tensor qb = slice(p.q, b.a0, b.na, b.r0, b.nr, 0, p.E);
  Tensor kb = slice(p.k, b.a0, b.na, 0, b.nk, 0, p.E);
  Tensor mb = p.mask.defined() ? slice(p.mask, b.a0, b.na, b.r0, b.nr, 0, b.nk) : Tensor();
  Tensor scores = contiguous(matmul(qb, transpose(kb, -2, -1)));
  if (!stats.defined()) {
    return attention_softmax_forward(scores, mb, is_causal, scale, b.r0);
  }
  attention_softmax_stats_forward_kernel(p.q.device().kind, scores,
                                         slice(stats, b.a0, b.na, b.r0, b.nr, 0, 2), scores, mb,
                                         is_causal, scale, b.r0);
  return scores;  // the probabilities, computed in place
}

}  // namespace

int64_t attention_block_elements() {
  return g_block_elements.load(std::memory_order_relaxed);
}

int64_t set_attention_block_elements(int64_t n) {
  SL_CHECK(n >= 1, "set_attention_block_elements: expected at least 1 element, got ", n);
  return g_block_elements.exchange(n);
}

void check_fused_attention_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& mask) {
  check_defined(op, q, "query");
  check_defined(op, k, "key");
  check_defined(op, v, "value");
  check_same_device(op, {&q, &k, &v});
  SL_CHECK_SHAPE(q.dim() >= 2 && q.dim() == k.dim() && q.dim() == v.dim(), op,
                 ": query, key and value need the same rank of at least 2, got ",
                 shape_str(q.sizes()), ", ", shape_str(k.sizes()), ", ", shape_str(v.sizes()));
  bool same_batch = true;
  for (int64_t d = 0; d + 2 < q.dim(); ++d) {
    same_batch = same_batch && q.size(d) == k.size(d) && q.size(d) == v.size(d);
  }
  SL_CHECK_SHAPE(same_batch && q.size(-1) == k.size(-1) && k.size(-2) == v.size(-2), op,
                 ": expected query [..., L, E], key [..., S, E] and value [..., S, Ev] with the "
                 "same batch dims, got ",
                 shape_str(q.sizes()), ", ", shape_str(k.sizes()), ", ", shape_str(v.sizes()));
  SL_CHECK_DTYPE(is_floating(q.dtype()) && q.dtype() == k.dtype() && q.dtype() == v.dtype(), op,
                 ": query, key and value must have one floating dtype, got ", dtype_name(q.dtype()),
                 ", ", dtype_name(k.dtype()), ", ", dtype_name(v.dtype()));
  Shape scores(q.sizes().begin(), q.sizes().end() - 1);
  scores.push_back(k.size(-2));
  check_attention_mask(op, scores, q.device(), mask);
}

namespace {

AttentionForward fused_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& mask, bool is_causal, double scale, bool want_stats) {
  const Problem p = make_problem("attention_fused_forward", q, k, v, mask);
  const Shape out_shape = with_tail(p.batch, p.L, p.Ev);
  Tensor out = empty({p.A, p.B, p.L, p.Ev}, q.dtype(), q.device());
  if (out.numel() == 0) return {reshape(out, out_shape), Tensor()};
  const DeviceKind kind = q.device().kind;
  if (p.S > 0 && attention_fused_forward_kernel.has(kind) &&
      attention_fused_forward_kernel(kind, out, p.q, p.k, p.v, p.mask, is_causal, scale)) {
    return {reshape(out, out_shape), Tensor()};
  }
  Tensor stats;
  if (want_stats && uses_stats(p)) stats = empty({p.A, p.B, p.L, 2}, q.dtype(), q.device());
  for_each_block(p, is_causal, [&](const Block& b) {
    Tensor ob = matmul(block_probs(p, b, is_causal, scale, stats),
                       slice(p.v, b.a0, b.na, 0, b.nk, 0, p.Ev));
    if (single_block(p, b)) {
      out = ob;
    } else {
      copy_(slice(out, b.a0, b.na, b.r0, b.nr, 0, p.Ev), ob);
    }
  });
  return {reshape(out, out_shape),
          stats.defined() ? reshape(stats, with_tail(p.batch, p.L, 2)) : Tensor()};
}

}  // namespace

Tensor attention_fused_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& mask, bool is_causal, double scale) {
  return fused_forward(q, k, v, mask, is_causal, scale, false).out;
}

AttentionForward attention_fused_forward_with_stats(const Tensor& q, const Tensor& k,
                                                    const Tensor& v, const Tensor& mask,
                                                    bool is_causal, double scale) {
  return fused_forward(q, k, v, mask, is_causal, scale, true);
}

AttentionGrads attention_fused_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const Tensor& mask, bool is_causal,
                                        double scale, const Tensor& out, const Tensor& stats) {
  const char* op = "attention_fused_backward";
  const Problem p = make_problem(op, q, k, v, mask);
  const Shape out_shape = with_tail(p.batch, p.L, p.Ev);
  check_defined(op, grad_out, "grad_out");
  SL_CHECK_SHAPE(grad_out.sizes() == out_shape, op, ": grad_out of shape ",
                 shape_str(grad_out.sizes()), " for an output of shape ", shape_str(out_shape));
  const DType dt = q.dtype();
  const Device dev = q.device();
  Tensor go = reshape(contiguous(cast(grad_out, dt)), {p.A, p.B, p.L, p.Ev});
  // dk and dv sum over blocks of queries: in float32 for 16-bit inputs
  const DType acc_dt = dt == DType::f16 || dt == DType::bf16 ? DType::f32 : dt;
  // with the forward's statistics: each row's sum_j dP_j p_j as dO . O (Note [Attention row
  // statistics]), [A, B, L]
  Tensor st4, dot;
  if (out.defined() || stats.defined()) {
    SL_CHECK_SHAPE(out.defined() && stats.defined(), op,
                   ": the forward's output and statistics go together, got only the ",
                   out.defined() ? "output" : "statistics");
    const Shape stats_shape = with_tail(p.batch, p.L, 2);
    SL_CHECK_SHAPE(out.sizes() == out_shape && stats.sizes() == stats_shape, op,
                   ": expected the forward's output ", shape_str(out_shape), " and statistics ",
                   shape_str(stats_shape), ", got ", shape_str(out.sizes()), " and ",
                   shape_str(stats.sizes()));
    SL_CHECK_DTYPE(out.dtype() == dt && stats.dtype() == dt, op,
                   ": expected the forward's output and statistics in ", dtype_name(dt), ", got ",
                   dtype_name(out.dtype()), " and ", dtype_name(stats.dtype()));
    SL_CHECK_DEVICE(out.device() == dev && stats.device() == dev, op,
                    ": the forward's output and statistics must be on ", dev);
    if (uses_stats(p)) {
      st4 = reshape(contiguous(stats), {p.A, p.B, p.L, 2});
      dot = reduce(ReduceOp::sum,
                   binary(BinaryOp::mul, go, reshape(contiguous(out), {p.A, p.B, p.L, p.Ev})), {3},
                   false);
    }
  }
  Tensor dq, dk, dv;
  for_each_block(p, is_causal, [&](const Block& b) {
    Tensor qb = slice(p.q, b.a0, b.na, b.r0, b.nr, 0, p.E);
    Tensor kb = slice(p.k, b.a0, b.na, 0, b.nk, 0, p.E);
    Tensor vb = slice(p.v, b.a0, b.na, 0, b.nk, 0, p.Ev);
    Tensor gb = slice(go, b.a0, b.na, b.r0, b.nr, 0, p.Ev);
    Tensor pb, ds;
    if (st4.defined()) {
      // probabilities and score gradients in one pass, both in place (the kernel takes
      // contiguous rows: fresh matmul outputs are, so contiguous() copies nothing)
      pb = contiguous(matmul(qb, transpose(kb, -2, -1)));
      ds = contiguous(matmul(gb, transpose(vb, -2, -1)));
      Tensor mb = p.mask.defined() ? slice(p.mask, b.a0, b.na, b.r0, b.nr, 0, b.nk) : Tensor();
      attention_softmax_recompute_backward_kernel(
          dev.kind, pb, ds, pb, ds, mb, slice(st4, b.a0, b.na, b.r0, b.nr, 0, 2),
          narrow(narrow(dot, 0, b.a0, b.na), 2, b.r0, b.nr), is_causal, scale, b.r0);
    } else {
      pb = block_probs(p, b, is_causal, scale, Tensor());
      ds = attention_softmax_backward(matmul(gb, transpose(vb, -2, -1)), pb, scale);
    }
    Tensor dvb = matmul(transpose(pb, -2, -1), gb);
    Tensor dqb = matmul(ds, kb);
    Tensor dkb = matmul(transpose(ds, -2, -1), qb);
    if (single_block(p, b)) {
      dq = dqb;
      dk = dkb;
      dv = dvb;
      return;
    }
    if (!dq.defined()) {
      dq = empty({p.A, p.B, p.L, p.E}, dt, dev);
      dk = zeros({p.A, p.B, p.S, p.E}, {.dtype = acc_dt, .device = dev});
      dv = zeros({p.A, p.B, p.S, p.Ev}, {.dtype = acc_dt, .device = dev});
    }
    copy_(slice(dq, b.a0, b.na, b.r0, b.nr, 0, p.E), dqb);
    binary_(BinaryOp::add, slice(dk, b.a0, b.na, 0, b.nk, 0, p.E), cast(dkb, acc_dt));
    binary_(BinaryOp::add, slice(dv, b.a0, b.na, 0, b.nk, 0, p.Ev), cast(dvb, acc_dt));
  });
  if (!dq.defined()) {  // no block: L == 0
    dq = empty({p.A, p.B, p.L, p.E}, dt, dev);
    dk = zeros({p.A, p.B, p.S, p.E}, {.dtype = dt, .device = dev});
    dv = zeros({p.A, p.B, p.S, p.Ev}, {.dtype = dt, .device = dev});
  }
  return {reshape(dq, with_tail(p.batch, p.L, p.E)),
          reshape(cast(dk, dt), with_tail(p.batch, p.S, p.E)),
          reshape(cast(dv, dt), with_tail(p.batch, p.S, p.Ev))};
}

}  // namespace ops
}  // namespace sl
