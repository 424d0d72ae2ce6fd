#include "nn/attention.h"

#include <array>
#include <cmath>
#include <tuple>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/attention.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/matmul.h"
#include "autograd/view_tracking.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/view.h"
#include "nn/init.h"

namespace sl::nn {

namespace {
/// Linear's repr name inside MultiheadAttention, as PyTorch prints it.
class OutProj : public Linear {
 public:
  OutProj(int64_t e, bool bias, TensorOptions opts) : Linear(e, e, bias, opts) {
    set_type_name("NonDynamicallyQuantizableLinear");
  }
};
/// Head p of a [B, L, 3E] projection (p = 0, 1, 2 for q, k, v) as a [B, H, L, D] view.
Tensor head_view(const Tensor& proj, int64_t p, int64_t H) {
  const int64_t B = proj.size(0), L = proj.size(1), E = proj.size(2) / 3;
  return ops::transpose(ops::view(ops::narrow(proj, 2, p * E, E), {B, L, H, E / H}), 1, 2);
}

/// q, k, v [B, H, L, D] as views of the self-attention projection proj [B, L, 3E]. One node:
/// its backward copies the three head gradients straight into one [B, L, 3E] gradient (a strided
/// copy each), where chunk + view + transpose copied each back to [B, L, E] and then
/// concatenated them.
std::array<Tensor, 3> split_heads(const Tensor& proj, int64_t H) {
  std::array<Tensor, 3> qkv;
  for (int64_t p = 0; p < 3; ++p) qkv[p] = head_view(proj, p, H);
  if (needs_grad(proj)) {
    Shape shape = proj.sizes();
    record("SplitHeadsBackward", {proj}, {&qkv[0], &qkv[1], &qkv[2]},
           [shape, H](const BackwardCtx& c) -> variable_list {
             Tensor g = ops::empty(shape, c.grad(0).dtype(), c.grad(0).device());
             for (int64_t p = 0; p < 3; ++p) ops::copy_(head_view(g, p, H), c.grad(p));
             return {g};
           });
  }
  for (Tensor& t : qkv)
    detail::mark_view(t, proj, ViewCreation::multi_output, "SplitHeadsBackward");
  return qkv;
}
}  // namespace

Tensor causal_mask(int64_t L, int64_t S, Device device) {
  return ones({L, S}, {.dtype = DType::b8, .device = device}).triu(1);
}

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, double p, bool bias, bool bf,
                                       TensorOptions opts)
    : Module("MultiheadAttention"),
      embed_dim(e),
      num_heads(h),
      head_dim(h > 0 ? e / h : 0),
      dropout(p),
      batch_first(bf) {
  SL_CHECK(e > 0 && h > 0, "MultiheadAttention: embed_dim and num_heads must be positive, got ", e,
           " and ", h);
  SL_CHECK(e % h == 0, "MultiheadAttention: embed_dim (", e, ") must be divisible by num_heads (",
           h, ")");
  SL_CHECK(p >= 0.0 && p <= 1.0, "MultiheadAttention: dropout must be in [0, 1], got ", p);
  opts.requires_grad = false;
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}, opts));
  in_proj_bias = register_parameter("in_proj_bias", bias ? empty({3 * e}, opts) : Tensor());
  out_proj = register_module("out_proj", std::make_shared<OutProj>(e, bias, opts));
  reset_parameters();
}

void MultiheadAttention::reset_parameters() {
  init::xavier_uniform_(in_proj_weight);
  if (in_proj_bias.defined()) {
    init::zeros_(in_proj_bias);
    init::zeros_(out_proj->bias);
  }
}

Tensor MultiheadAttention::forward(const Tensor& x) {
  return forward(x, x, x, {.need_weights = false}).first;
}

std::pair<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key,
                                                      const Tensor& value,
                                                      const AttentionOptions& o) {
  const char* op = "MultiheadAttention";
  SL_CHECK(query.defined() && key.defined() && value.defined(), op,
           ": query, key and value must be defined");
  bool unbatched = query.dim() == 2;
  SL_CHECK_SHAPE(query.dim() == 3 || unbatched, op, ": query must be 3-d (batched) or 2-d, got ",
                 shape_str(query.sizes()));
  SL_CHECK_SHAPE(key.dim() == query.dim() && value.dim() == query.dim(), op,
                 ": query, key and value must have the same rank, got ", shape_str(query.sizes()),
                 ", ", shape_str(key.sizes()), ", ", shape_str(value.sizes()));
  // To [B, L, E].
  auto to_ble = [&](const Tensor& t) {
    if (unbatched) return t.unsqueeze(0);
    return batch_first ? t : t.transpose(0, 1);
  };
  Tensor q = to_ble(query), k = to_ble(key), v = to_ble(value);
  const int64_t B = q.size(0), L = q.size(1), S = k.size(1), E = embed_dim, H = num_heads,
                D = head_dim;
  SL_CHECK_SHAPE(q.size(2) == E && k.size(2) == E && v.size(2) == E, op,
                 ": the last dim of query, key and value must be embed_dim=", E, ", got ",
                 shape_str(query.sizes()), ", ", shape_str(key.sizes()), ", ",
                 shape_str(value.sizes()));
  SL_CHECK_SHAPE(k.size(0) == B && v.size(0) == B && v.size(1) == S, op,
                 ": key and value must have the query's batch size and one length, got ",
                 shape_str(key.sizes()), " and ", shape_str(value.sizes()));

  // Projections, as [B, H, len, D] heads: one matmul when query, key and value are the same
  // tensor (self-attention).
  Tensor qh, kh, vh;
  if (query.is_same(key) && key.is_same(value)) {
    auto qkv = split_heads(linear(q, in_proj_weight, in_proj_bias), H);
    qh = qkv[0];
    kh = qkv[1];
    vh = qkv[2];
  } else {
    auto w = in_proj_weight.chunk(3, 0);
    std::vector<Tensor> b(3);
    if (in_proj_bias.defined()) b = in_proj_bias.chunk(3, 0);
    qh = linear(q, w[0], b[0]).view({B, L, H, D}).transpose(1, 2);
    kh = linear(k, w[1], b[1]).view({B, S, H, D}).transpose(1, 2);
    vh = linear(v, w[2], b[2]).view({B, S, H, D}).transpose(1, 2);
  }

  // All masks folded into one additive float mask broadcastable to [B, H, L, S] (bool masks
  // here mean "not allowed", as nn.MultiheadAttention's; -inf there). is_causal is passed on.
  Tensor mask;
  auto add_mask = [&](const Tensor& m, const Shape& view_shape, const char* what) {
    SL_CHECK_DTYPE(m.dtype() == DType::b8 || m.is_floating_point(), op, ": ", what,
                   " must be bool or floating, got ", dtype_name(m.dtype()));
    Tensor mv = m.contiguous().view(view_shape);
    Tensor add = m.dtype() == DType::b8
                     ? zeros(view_shape, {.dtype = qh.dtype(), .device = qh.device()})
                           .masked_fill(mv, -INFINITY)
                     : mv.to(qh.dtype()).detach();
    mask = mask.defined() ? mask + add : add;
  };
  if (o.attn_mask.defined()) {
    const Tensor& m = o.attn_mask;
    if (m.dim() == 2) {
      SL_CHECK_SHAPE(m.size(0) == L && m.size(1) == S, op, ": attn_mask must be [", L, ", ", S,
                     "] or [", B * H, ", ", L, ", ", S, "], got ", shape_str(m.sizes()));
      add_mask(m, {1, 1, L, S}, "attn_mask");
    } else {
      SL_CHECK_SHAPE(m.dim() == 3 && m.size(0) == B * H && m.size(1) == L && m.size(2) == S, op,
                     ": attn_mask must be [", L, ", ", S, "] or [", B * H, ", ", L, ", ", S,
                     "], got ", shape_str(m.sizes()));
      add_mask(m, {B, H, L, S}, "attn_mask");
    }
  }
  if (o.key_padding_mask.defined()) {
    const Tensor& m = o.key_padding_mask;
    Shape expected = unbatched ? Shape{S} : Shape{B, S};
    SL_CHECK_SHAPE(m.sizes() == expected, op, ": key_padding_mask must be ", shape_str(expected),
                   ", got ", shape_str(m.sizes()));
    add_mask(m, {B, 1, 1, S}, "key_padding_mask");
  }
  double p = is_training() ? dropout : 0.0;
  double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Tensor ctx_h, attn;
  if (o.need_weights) {
    std::tie(ctx_h, attn) =
        scaled_dot_product_attention_with_weights(qh, kh, vh, mask, p, o.is_causal, scale);
  } else {
    ctx_h = scaled_dot_product_attention(qh, kh, vh, mask, p, o.is_causal, scale);
  }
  Tensor ctx = ctx_h.transpose(1, 2).reshape({B, L, E});  // [B, L, E]
  Tensor out = out_proj->forward(ctx);
  if (unbatched) {
    out = out.squeeze(0);
  } else if (!batch_first) {
    out = out.transpose(0, 1);
  }
  Tensor weights;
  if (o.need_weights) {
    weights = o.average_attn_weights ? attn.mean({1}) : attn;  // after dropout, as PyTorch
    if (unbatched) weights = weights.squeeze(0);
  }
  return {out, weights};
}

}  // namespace sl::nn
