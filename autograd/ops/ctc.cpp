// Differentiable CTC loss: the per-sample negative log-likelihood node (forward and backward
// kernels of the ctc family), then the reduction from differentiable ops.
#include "autograd/ops/ctc.h"

#include "autograd/function.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/ctc.h"
#include "core/ops/elementwise.h"

namespace sl {

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank, const std::string& reduction,
                bool zero_infinity) {
  SL_CHECK(reduction == "none" || reduction == "sum" || reduction == "mean",
           "ctc_loss: reduction must be 'none', 'sum' or 'mean', got '", reduction, "'");
  ops::CtcArgs a = ops::check_ctc(log_probs, targets, input_lengths, target_lengths, blank);
  auto [raw, log_alpha] = ops::ctc_loss_forward(a);
  Tensor nll = raw;
  if (zero_infinity) {
    nll = ops::where(ops::unary(UnaryOp::isinf, raw),
                     ops::scalar_tensor(0.0, raw.dtype(), raw.device()), raw);
  }
  nll = ops::cast(nll, log_probs.dtype());
  if (needs_grad(log_probs)) {
    DType dt = log_probs.dtype();
    // Saved as SavedTensor (a detached alias), not captured as Tensor: when nll is raw itself
    // (float32, no zero_infinity) a captured Tensor would own the node that owns it, a cycle
    // that leaked every CTC graph (found by LeakSanitizer).
    record("CtcLossBackward", {log_probs}, {&nll},
           [a, sraw = SavedTensor(raw), sla = SavedTensor(log_alpha), zero_infinity,
            dt](const BackwardCtx& c) {
             const char* name = "CtcLossBackward";
             return variable_list{ops::ctc_loss_backward(a, c.grad(), sraw.unpack(name),
                                                         sla.unpack(name), zero_infinity, dt)};
           });
  }
  if (a.unbatched) nll = nll.squeeze(0);
  if (reduction == "none") return nll;
  if (reduction == "sum") return nll.sum();
  // mean: each loss over its target length (at least 1), then the batch mean
  std::vector<double> denom;
  for (int64_t l : a.target_lengths_host)
    denom.push_back(static_cast<double>(std::max<int64_t>(l, 1)));
  Tensor d = from_vector(denom).to(log_probs.device(), log_probs.dtype());
  if (a.unbatched) d = d.squeeze(0);
  return div(nll, d).mean();
}

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets,
                const std::vector<int64_t>& input_lengths,
                const std::vector<int64_t>& target_lengths, int64_t blank,
                const std::string& reduction, bool zero_infinity) {
  return ctc_loss(log_probs, targets, from_vector(input_lengths), from_vector(target_lengths),
                  blank, reduction, zero_infinity);
}

}  // namespace sl
