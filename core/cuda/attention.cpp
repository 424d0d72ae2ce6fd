// CUDA glue of the attention family.
#include "core/ops/attention.h"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/runtime.h"

namespace sl::cuda {
namespace {

void attention_softmax_forward_cuda(const Tensor& probs, const Tensor& scores, const Tensor& mask,
                                    bool is_causal, double scale, int64_t causal_offset) {
  DeviceGuard g(scores.device());
  const bool has_mask = mask.defined();
  // the kernel checks the mask's dtype (bool, the scores', or float32 beside 16-bit scores)
  launch_attention_softmax_forward(
      scores.dtype(), probs.data_ptr(), scores.data_ptr(), has_mask ? mask.data_ptr() : nullptr,
      has_mask ? mask.dtype() : DType::b8, scores.size(0), scores.size(1), scores.size(2),
      scores.size(3), has_mask ? mask.stride(0) : 0, has_mask ? mask.stride(1) : 0,
      has_mask ? mask.stride(2) : 0, has_mask ? mask.stride(3) : 0, is_causal, causal_offset, scale,
      compute_stream(scores.device()));
}

void attention_softmax_backward_cuda(const Tensor& grad_scores, const Tensor& grad_probs,
                                     const Tensor& probs, double scale) {
  DeviceGuard g(probs.device());
  const int64_t S = probs.size(3);
  launch_attention_softmax_backward(probs.dtype(), grad_scores.data_ptr(), grad_probs.data_ptr(),
                                    probs.data_ptr(), probs.numel() / S, S, scale,
                                    compute_stream(probs.device()));
}

/// The fused kernel takes float32 / 16-bit inputs with head dims up to 128; anything else is left
/// to the blocked generic form (returns false).
bool attention_fused_forward_cuda(const Tensor& out, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const Tensor& mask, bool is_causal,
                                  double scale) {
  const DType dt = q.dtype();
  const int64_t E = q.size(3), Ev = v.size(3);
  if (dt == DType::f64 || E > kFusedAttentionMaxHeadDim || Ev > kFusedAttentionMaxHeadDim) {
    return false;
  }
  DeviceGuard g(q.device());
  const bool has_mask = mask.defined();
  launch_attention_fused_forward(
      dt, out.data_ptr(), q.data_ptr(), k.data_ptr(), v.data_ptr(),
      has_mask ? mask.data_ptr() : nullptr, has_mask ? mask.dtype() : DType::b8, q.size(0),
      q.size(1), q.size(2), k.size(2), E, Ev, has_mask ? mask.stride(0) : 0,
      has_mask ? mask.stride(1) : 0, has_mask ? mask.stride(2) : 0, has_mask ? mask.stride(3) : 0,
      is_causal, scale, compute_stream(q.device()));
  return true;
}

SL_REGISTER_KERNEL(attention_fused_forward_kernel, DeviceKind::cuda, &attention_fused_forward_cuda);
SL_REGISTER_KERNEL(attention_softmax_forward_kernel, DeviceKind::cuda,
                   &attention_softmax_forward_cuda);
SL_REGISTER_KERNEL(attention_softmax_backward_kernel, DeviceKind::cuda,
                   &attention_softmax_backward_cuda);

}  // namespace
}  // namespace sl::cuda
