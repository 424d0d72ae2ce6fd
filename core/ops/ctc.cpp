#include "core/ops/ctc.h"

#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/view.h"

namespace sl {

SL_DEFINE_KERNEL(ctc_loss_forward_kernel,
                 void(const Tensor& nll, const Tensor& log_alpha, const Tensor& log_probs,
                      const Tensor& targets, const Tensor& input_lengths,
                      const Tensor& target_lengths, int64_t blank));
SL_DEFINE_KERNEL(ctc_loss_backward_kernel,
                 void(const Tensor& grad, const Tensor& grad_nll, const Tensor& log_probs,
                      const Tensor& targets, const Tensor& input_lengths,
                      const Tensor& target_lengths, const Tensor& nll, const Tensor& log_alpha,
                      int64_t blank, bool zero_infinity));

namespace ops {

namespace {

std::vector<int64_t> host_lengths(const char* what, const Tensor& t, int64_t N, bool unbatched) {
  check_defined("ctc_loss", t, what);
  SL_CHECK_DTYPE(is_integral(t.dtype()), "ctc_loss: ", what, " must be an integer tensor, got ",
                 dtype_name(t.dtype()));
  SL_CHECK_SHAPE((t.dim() == 1 && t.size(0) == N) || (unbatched && t.dim() == 0),
                 "ctc_loss: ", what, " must hold one value per sample (", N, "), got shape ",
                 shape_str(t.sizes()));
  return t.to_vector<int64_t>();
}

}  // namespace

CtcArgs check_ctc(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                  const Tensor& target_lengths, int64_t blank) {
  const char* op = "ctc_loss";
  check_defined(op, log_probs, "log_probs");
  check_defined(op, targets, "targets");
  SL_CHECK_DTYPE(is_floating(log_probs.dtype()), op, ": log_probs must be floating, got ",
                 dtype_name(log_probs.dtype()));
  SL_CHECK_SHAPE(log_probs.dim() == 3 || log_probs.dim() == 2, op,
                 ": expected log_probs [T, N, C] (or [T, C] unbatched), got ",
                 shape_str(log_probs.sizes()));
  SL_CHECK_DTYPE(is_integral(targets.dtype()), op, ": targets must be an integer tensor, got ",
                 dtype_name(targets.dtype()));
  CtcArgs a;
  a.unbatched = log_probs.dim() == 2;
  Tensor lp = a.unbatched ? unsqueeze(log_probs, 1) : log_probs;
  const int64_t T = lp.size(0), N = lp.size(1), C = lp.size(2);
  SL_CHECK(blank >= 0 && blank < C, op, ": blank must be in [0, ", C, "), got ", blank);
  std::vector<int64_t> il = host_lengths("input_lengths", input_lengths, N, a.unbatched);
  std::vector<int64_t> tl = host_lengths("target_lengths", target_lengths, N, a.unbatched);
  // targets: padded [N, S] or 1-d concatenation (unbatched: [S])
  Tensor tg = targets;
  bool concatenated = false;
  if (a.unbatched) {
    SL_CHECK_SHAPE(tg.dim() == 1, op, ": unbatched targets must be 1-d, got ",
                   shape_str(tg.sizes()));
    tg = unsqueeze(tg, 0);
  } else if (tg.dim() == 1) {
    concatenated = true;
  } else {
    SL_CHECK_SHAPE(tg.dim() == 2 && tg.size(0) == N, op,
                   ": targets must be [N, S] padded or 1-d concatenated, got ",
                   shape_str(tg.sizes()), " for N = ", N);
  }
  std::vector<int64_t> tv = tg.to_vector<int64_t>();
  int64_t total = 0, smax = 0;
  for (int64_t b = 0; b < N; ++b) {
    const int64_t in = il[static_cast<size_t>(b)], tl_b = tl[static_cast<size_t>(b)];
    SL_CHECK(in >= 0 && in <= T, op, ": input_lengths[", b, "] = ", in,
             " is out of range for log_probs with ", T, " time steps");
    SL_CHECK(tl_b >= 0, op, ": target_lengths[", b, "] = ", tl_b, " is negative");
    // A target longer than its input (tl_b > in) is accepted, as PyTorch does: it has no
    // alignment, so the kernels give that sample nll = +inf (Note [CTC impossible samples]).
    if (!concatenated) {
      SL_CHECK(tl_b <= tg.size(1), op, ": target_lengths[", b, "] = ", tl_b,
               " exceeds the padded targets' length ", tg.size(1));
    }
    total += tl_b;
    smax = std::max(smax, tl_b);
  }
  if (concatenated) {
    SL_CHECK_SHAPE(tg.size(0) == total, op, ": 1-d targets hold ", tg.size(0),
                   " labels but target_lengths sum to ", total);
  }
  // padded [N, smax] i64 on the host, every label checked
  Tensor padded = ops::empty({N, std::max<int64_t>(smax, 1)}, DType::i64, kCPU);
  int64_t* pp = padded.data_ptr<int64_t>();
  int64_t offset = 0;
  for (int64_t b = 0; b < N; ++b) {
    const int64_t tl_b = tl[static_cast<size_t>(b)];
    for (int64_t s = 0; s < std::max<int64_t>(smax, 1); ++s) {
      int64_t v = 0;
      if (s < tl_b) {
        v = tv[static_cast<size_t>(concatenated ? offset + s : b * tg.size(1) + s)];
        SL_CHECK_INDEX(v >= 0 && v < C, op, ": target label ", v, " (sample ", b, ", position ", s,
                       ") is out of range for ", C, " classes");
        SL_CHECK(v != blank, op, ": target label ", v, " (sample ", b, ", position ", s,
                 ") is the blank index");
      }
      pp[b * std::max<int64_t>(smax, 1) + s] = v;
    }
    offset += tl_b;
  }
  const Device dev = log_probs.device();
  a.log_probs = contiguous(log_probs.dtype() == DType::f64 ? lp : cast(lp, DType::f32));
  a.targets = to_device(padded, dev);
  a.input_lengths = to_device(from_vector(il), dev);
  a.target_lengths = to_device(from_vector(tl), dev);
  a.target_lengths_host = tl;
  a.blank = blank;
  return a;
}

std::pair<Tensor, Tensor> ctc_loss_forward(const CtcArgs& a) {
  const int64_t T = a.log_probs.size(0), N = a.log_probs.size(1), S = a.targets.size(1);
  const Device dev = a.log_probs.device();
  Tensor nll = ops::empty({N}, a.log_probs.dtype(), dev);
  Tensor log_alpha = ops::empty({N, T, 2 * S + 1}, a.log_probs.dtype(), dev);
  if (N > 0) {
    ctc_loss_forward_kernel(dev.kind, nll, log_alpha, a.log_probs, a.targets, a.input_lengths,
                            a.target_lengths, a.blank);
  }
  return {nll, log_alpha};
}

Tensor ctc_loss_backward(const CtcArgs& a, const Tensor& grad_nll, const Tensor& nll,
                         const Tensor& log_alpha, bool zero_infinity, DType out_dtype) {
  Tensor grad = ops::empty_like(a.log_probs);
  if (grad.numel() > 0) {
    ctc_loss_backward_kernel(a.log_probs.device().kind, grad,
                             contiguous(cast(grad_nll, a.log_probs.dtype())), a.log_probs,
                             a.targets, a.input_lengths, a.target_lengths, nll, log_alpha, a.blank,
                             zero_infinity);
  }
  if (a.unbatched) grad = squeeze(grad, 1);
  return cast(grad, out_dtype);
}

}  // namespace ops
}  // namespace sl
