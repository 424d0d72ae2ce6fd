// CUDA glue of the ctc family.
#include "core/ops/ctc.h"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/runtime.h"
#include "core/ops/copy.h"

namespace sl::cuda {
namespace {

const int64_t* i64(const Tensor& t) {
  return static_cast<const int64_t*>(t.data_ptr());
}

void ctc_forward_cuda(const Tensor& nll, const Tensor& log_alpha, const Tensor& log_probs,
                      const Tensor& targets, const Tensor& input_lengths,
                      const Tensor& target_lengths, int64_t blank) {
  Tensor tg = ops::contiguous(targets), il = ops::contiguous(input_lengths),
         tl = ops::contiguous(target_lengths);
  DeviceGuard g(log_probs.device());
  launch_ctc_forward(log_probs.dtype(), nll.data_ptr(), log_alpha.data_ptr(), log_probs.data_ptr(),
                     i64(tg), i64(il), i64(tl), log_probs.size(0), log_probs.size(1),
                     log_probs.size(2), tg.size(1), blank, compute_stream(log_probs.device()));
}

void ctc_backward_cuda(const Tensor& grad, const Tensor& grad_nll, const Tensor& log_probs,
                       const Tensor& targets, const Tensor& input_lengths,
                       const Tensor& target_lengths, const Tensor& nll, const Tensor& log_alpha,
                       int64_t blank, bool zero_infinity) {
  Tensor tg = ops::contiguous(targets), il = ops::contiguous(input_lengths),
         tl = ops::contiguous(target_lengths), gn = ops::contiguous(grad_nll);
  Tensor beta = ops::empty_like(log_alpha);
  DeviceGuard g(log_probs.device());
  launch_ctc_backward(log_probs.dtype(), grad.data_ptr(), gn.data_ptr(), log_probs.data_ptr(),
                      i64(tg), i64(il), i64(tl), nll.data_ptr(), log_alpha.data_ptr(),
                      beta.data_ptr(), log_probs.size(0), log_probs.size(1), log_probs.size(2),
                      tg.size(1), blank, zero_infinity, compute_stream(log_probs.device()));
}

SL_REGISTER_KERNEL(ctc_loss_forward_kernel, DeviceKind::cuda, &ctc_forward_cuda);
SL_REGISTER_KERNEL(ctc_loss_backward_kernel, DeviceKind::cuda, &ctc_backward_cuda);

}  // namespace
}  // namespace sl::cuda
