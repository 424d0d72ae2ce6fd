// Differentiable attention: matmuls from the matmul family around the fused masked softmax,
// whose backward is recorded beside its forward here.
#include "autograd/ops/attention.h"

#include <cmath>

#include "autograd/function.h"
#include "autograd/ops/dropout.h"
#include "autograd/ops/matmul.h"
#include "core/ops/attention.h"
#include "core/ops/copy.h"
#include "core/ops/dropout.h"

namespace sl {

Tensor attention_softmax(const Tensor& scores, const Tensor& attn_mask, bool is_causal,
                         double scale) {
  Tensor probs = ops::attention_softmax_forward(scores, attn_mask, is_causal, scale);
  if (needs_grad(scores)) {
    record("AttentionSoftmaxBackward", {scores}, {&probs},
           [sp = SavedTensor(probs), scale](const BackwardCtx& c) -> variable_list {
             return {ops::attention_softmax_backward(c.grad(),
                                                     sp.unpack("AttentionSoftmaxBackward"), scale)};
           });
  }
  return probs;
}

std::pair<Tensor, Tensor> scaled_dot_product_attention_with_weights(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, double dropout_p,
    bool is_causal, std::optional<double> scale, Generator* gen) {
  const char* op = "scaled_dot_product_attention";
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
  const double sc = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  Tensor scores = matmul(q, k.transpose(-2, -1));
  Tensor probs = attention_softmax(scores, attn_mask, is_causal, sc);
  if (dropout_p > 0.0) probs = dropout(probs, dropout_p, true, gen);
  return {matmul(probs, v), probs};
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Generator* gen) {
  return scaled_dot_product_attention_with_weights(q, k, v, attn_mask, dropout_p, is_causal, scale,
                                                   gen)
      .first;
}

}  // namespace sl
