#include "core/ops/attention.h"

#include "core/ops/copy.h"
#include "core/ops/view.h"

namespace sl {

SL_DEFINE_KERNEL(attention_softmax_forward_kernel,
                 void(const Tensor& probs, const Tensor& scores, const Tensor& mask, bool is_causal,
                      double scale, int64_t causal_offset));
SL_DEFINE_KERNEL(attention_softmax_backward_kernel,
                 void(const Tensor& grad_scores, const Tensor& grad_probs, const Tensor& probs,
                      double scale));

namespace ops {

namespace {

bool is_reduced_float(DType t) {
  return t == DType::f16 || t == DType::bf16;
}

/// [A, B, L, S] view sizes for a tensor of sizes [..., L, S]: B is the last batch dim, A the
/// product of the others.
Shape four_d(const Shape& s) {
  const size_t n = s.size();
  int64_t A = 1, B = 1;
  if (n >= 3) B = s[n - 3];
  for (size_t i = 0; i + 3 < n; ++i) A *= s[i];
  return {A, B, s[n - 2], s[n - 1]};
}

}  // namespace

void check_attention_mask(const char* op, const Shape& scores_shape, Device device,
                          const Tensor& mask) {
  if (!mask.defined()) return;
  SL_CHECK_DEVICE(mask.device() == device, op, ": attn_mask is on ", mask.device(),
                  " but the attention scores are on ", device);
  SL_CHECK_DTYPE(is_bool(mask.dtype()) || is_floating(mask.dtype()), op,
                 ": attn_mask must be bool or floating, got ", dtype_name(mask.dtype()));
  const Shape& m = mask.sizes();
  bool ok = m.size() <= scores_shape.size();
  for (size_t i = 0; ok && i < m.size(); ++i) {
    int64_t want = scores_shape[scores_shape.size() - m.size() + i];
    ok = m[i] == want || m[i] == 1;
  }
  SL_CHECK_SHAPE(ok, op, ": attn_mask of shape ", shape_str(m),
                 " does not broadcast to the attention scores' shape ", shape_str(scores_shape));
}

Tensor attention_softmax_forward(const Tensor& scores, const Tensor& mask, bool is_causal,
                                 double scale, int64_t causal_offset) {
  const char* op = "attention_softmax";
  check_defined(op, scores);
  SL_CHECK_SHAPE(scores.dim() >= 2, op, ": expected scores [..., L, S], got ",
                 shape_str(scores.sizes()));
  SL_CHECK_DTYPE(is_floating(scores.dtype()), op, ": expected floating scores, got ",
                 dtype_name(scores.dtype()));
  check_attention_mask(op, scores.sizes(), scores.device(), mask);
  SL_CHECK(causal_offset >= 0, op, ": causal_offset must be >= 0, got ", causal_offset);
  if (cpu_16bit_via_float32(scores)) {
    Tensor m = mask.defined() && !is_bool(mask.dtype()) ? cast(mask, DType::f32) : mask;
    return cast(
        attention_softmax_forward(cast(scores, DType::f32), m, is_causal, scale, causal_offset),
        scores.dtype());
  }
  Tensor s = contiguous(scores);
  Tensor probs = empty_like(s);
  if (s.numel() == 0) return probs;
  Shape s4 = four_d(s.sizes());
  Tensor m;
  if (mask.defined()) {
    // an additive mask in the scores' dtype; beside 16-bit scores one of another dtype is cast to
    // float32, as the CPU computes it, not rounded to 16 bits
    const DType mt =
        is_reduced_float(s.dtype()) && mask.dtype() != s.dtype() ? DType::f32 : s.dtype();
    m = is_bool(mask.dtype()) ? mask : cast(mask, mt);
    m = reshape(expand(m, s.sizes()), s4);  // a view unless the batch dims cannot be merged
  }
  attention_softmax_forward_kernel(s.device().kind, view(probs, s4), view(s, s4), m, is_causal,
                                   scale, causal_offset);
  return probs;
}

Tensor attention_softmax_backward(const Tensor& grad_probs, const Tensor& probs, double scale) {
  if (cpu_16bit_via_float32(probs)) {
    return cast(
        attention_softmax_backward(cast(grad_probs, DType::f32), cast(probs, DType::f32), scale),
        probs.dtype());
  }
  Tensor g = contiguous(grad_probs);
  Tensor gs = empty_like(probs);
  if (gs.numel() == 0) return gs;
  Shape s4 = four_d(probs.sizes());
  attention_softmax_backward_kernel(probs.device().kind, view(gs, s4), view(g, s4),
                                    view(contiguous(probs), s4), scale);
  return gs;
}

}  // namespace ops
}  // namespace sl
