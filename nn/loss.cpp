#include "nn/loss.h"

#include <algorithm>
#include <cmath>

#include "autograd/function.h"
#include "autograd/ops/ctc.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/softmax.h"
#include "core/amp.h"
#include "core/creation.h"
#include "core/ops/index.h"
#include "nn/loss_common.h"

namespace sl::nn {

Reduction parse_reduction(const std::string& s, const char* op) {
  if (s == "none") return Reduction::none;
  if (s == "mean") return Reduction::mean;
  if (s == "sum") return Reduction::sum;
  detail::throw_error<ValueError>(op, ": reduction must be 'none', 'mean' or 'sum', got '", s, "'");
}

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::none:
      return "none";
    case Reduction::mean:
      return "mean";
    case Reduction::sum:
      return "sum";
  }
  return "?";
}

namespace functional {

using detail::check_broadcasts_to;
using detail::check_floating;
using detail::check_same_shape;
using detail::reduce;
using detail::same_shape_operands;

namespace {

/// [1, C, 1, ...] view of a per-class vector for broadcasting against [N, C, d...] (or [C]).
Tensor class_view(const Tensor& w, const Tensor& input, int64_t cdim) {
  Shape s(static_cast<size_t>(input.dim()), 1);
  s[static_cast<size_t>(cdim)] = w.numel();
  return w.view(s);
}

/// Shared by cross_entropy (class indices) and nll_loss: `logp` holds log-probabilities.
Tensor nll_core(const char* op, const Tensor& logp, const Tensor& target,
                const CrossEntropyOptions& o) {
  int64_t cdim = logp.dim() == 1 ? 0 : 1;
  int64_t C = logp.size(cdim);
  SL_CHECK_DTYPE(target.dtype() == DType::i64 || target.dtype() == DType::i32, op,
                 ": class-index targets must be int64 (or int32), got ",
                 dtype_name(target.dtype()));
  Shape expected = logp.sizes();
  expected.erase(expected.begin() + cdim);
  SL_CHECK_SHAPE(target.sizes() == expected, op, ": input of shape ", shape_str(logp.sizes()),
                 " needs a target of shape ", shape_str(expected), ", got ",
                 shape_str(target.sizes()));
  SL_CHECK_DEVICE(target.device() == logp.device(), op, ": input is on ", logp.device(),
                  " but target is on ", target.device());
  Tensor tgt = target.to(DType::i64);
  Tensor valid = tgt.ne(o.ignore_index);
  // Reading the targets back synchronises a GPU; in CUDA's unchecked indexing mode the gather
  // below guards them instead and reports a bad one later (Note [Index checks]).
  if (ops::index_checks_on_host(tgt.device())) {
    for (int64_t t : tgt.masked_select(valid).to_vector<int64_t>()) {
      SL_CHECK_INDEX(t >= 0 && t < C, op, ": target ", t, " is out of bounds for ", C, " classes");
    }
  }
  // Note [Ignored rows]: an ignored row gathers class 0 as a placeholder, and its log-probs may
  // hold -inf (a masked logit); scaling by a zero weight would make that NaN, so ignored rows are
  // zeroed with masked_fill instead. Its gradient is exactly zero there even when the incoming
  // one is not finite, as with the 0/0 mean of an all-ignored batch: PyTorch's loss is NaN
  // there and its gradient zero, and so are ours.
  Tensor ignored = valid.logical_not();
  Tensor safe = tgt.masked_fill(ignored, 0);
  Tensor picked = logp.gather(cdim, safe.unsqueeze(cdim)).squeeze(cdim).masked_fill(ignored, 0);
  Tensor wt = valid.to(logp.dtype());
  if (o.weight.defined()) {
    SL_CHECK_SHAPE(o.weight.dim() == 1 && o.weight.numel() == C, op, ": weight must have shape [",
                   C, "], got ", shape_str(o.weight.sizes()));
    wt = o.weight.to(logp.dtype()).detach().index_select(0, safe.flatten()).view(safe.sizes()) * wt;
  }
  Tensor nll = -(picked * wt);
  Tensor nll_red = o.reduction == Reduction::mean ? nll.sum() / wt.sum() : reduce(nll, o.reduction);
  if (o.label_smoothing == 0.0) return nll_red;
  Tensor per_class = logp;
  if (o.weight.defined()) per_class = logp * class_view(o.weight.to(logp.dtype()), logp, cdim);
  Tensor smooth = (-per_class.sum({cdim})).masked_fill(ignored, 0);
  Tensor smooth_red =
      o.reduction == Reduction::mean ? smooth.sum() / wt.sum() : reduce(smooth, o.reduction);
  return nll_red * (1.0 - o.label_smoothing) + smooth_red * (o.label_smoothing / C);
}

void check_common(const char* op, const Tensor& input, const CrossEntropyOptions& o) {
  check_floating(input, op, "input");
  SL_CHECK_SHAPE(input.dim() >= 1, op, ": input must have at least 1 dim, got a 0-d tensor");
  SL_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0, op,
           ": label_smoothing must be in [0, 1], got ", o.label_smoothing);
}

}  // namespace

// Every loss opts in to autocast's `fp32` policy (Note [Autocast] in core/amp.h): inside a scope
// its 16-bit floating inputs are cast to float32 first.
Tensor cross_entropy(const Tensor& input_in, const Tensor& target_in,
                     const CrossEntropyOptions& o) {
  const char* op = "cross_entropy";
  const Tensor input = autocast(input_in, AmpPolicy::fp32);
  const Tensor target = autocast(target_in, AmpPolicy::fp32);
  check_common(op, input, o);
  SL_CHECK(target.defined(), op, ": target is undefined");
  int64_t cdim = input.dim() == 1 ? 0 : 1;
  Tensor logp = log_softmax(input, cdim);
  if (!target.is_floating_point()) return nll_core(op, logp, target, o);
  // Class probabilities: every class of every row counts, so there is nothing to ignore.
  SL_CHECK(o.ignore_index < 0, op, ": ignore_index ", o.ignore_index,
           " is not supported with class-probability (floating point) targets; it applies to "
           "class-index targets only (leave it negative, e.g. the default -100)");
  SL_CHECK_SHAPE(target.sizes() == input.sizes(), op,
                 ": probability targets must have the "
                 "input's shape ",
                 shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
  int64_t C = input.size(cdim);
  Tensor t = target;
  if (o.label_smoothing > 0.0) t = t * (1.0 - o.label_smoothing) + o.label_smoothing / C;
  Tensor prod = logp * t;
  if (o.weight.defined()) {
    SL_CHECK_SHAPE(o.weight.dim() == 1 && o.weight.numel() == C, op, ": weight must have shape [",
                   C, "], got ", shape_str(o.weight.sizes()));
    prod = prod * class_view(o.weight.to(input.dtype()), input, cdim);
  }
  Tensor loss = -prod.sum({cdim});
  if (o.reduction == Reduction::mean) {
    return loss.sum() / static_cast<double>(input.numel() / std::max<int64_t>(C, 1));
  }
  return reduce(loss, o.reduction);
}

Tensor nll_loss(const Tensor& input_in, const Tensor& target, const CrossEntropyOptions& o) {
  const char* op = "nll_loss";
  const Tensor input = autocast(input_in, AmpPolicy::fp32);
  check_common(op, input, o);
  SL_CHECK(o.label_smoothing == 0.0, op, ": label_smoothing is not supported (use cross_entropy)");
  SL_CHECK(target.defined(), op, ": target is undefined");
  return nll_core(op, input, target, o);
}

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const auto [input, target] = same_shape_operands(input_in, target_in, "mse_loss");
  return reduce((input - target).square(), reduction);
}

Tensor l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const auto [input, target] = same_shape_operands(input_in, target_in, "l1_loss");
  return reduce((input - target).abs(), reduction);
}

Tensor log_sigmoid(const Tensor& x) {
  // minimum's gradient splits ties evenly, so at x = 0 this gives 1/2 = 1 - sigmoid(0) exactly.
  return minimum(x, zeros_like(x)) - x.abs().neg().exp().log1p();
}

Tensor binary_cross_entropy_with_logits(const Tensor& input_in, const Tensor& target_in,
                                        const Tensor& weight_in, const Tensor& pos_weight_in,
                                        Reduction reduction) {
  const char* op = "binary_cross_entropy_with_logits";
  const auto [input, target] = same_shape_operands(input_in, target_in, op);
  const Tensor weight = autocast(weight_in, AmpPolicy::fp32);
  const Tensor pos_weight = autocast(pos_weight_in, AmpPolicy::fp32);
  check_floating(target, op, "target");
  check_broadcasts_to(weight, input, op, "weight");
  check_broadcasts_to(pos_weight, input, op, "pos_weight");
  Tensor ls = log_sigmoid(input);
  if (pos_weight.defined()) ls = ls * ((pos_weight - 1.0) * target + 1.0);
  Tensor loss = (1.0 - target) * input - ls;
  if (weight.defined()) loss = loss * weight;
  return reduce(loss, reduction);
}

namespace {
// -[t max(log x, -100) + (1 - t) max(log(1 - x), -100)], one node: PyTorch's backward is not the
// clamped expression's derivative (which is 0 where a log was clamped) but
// (x - t) / max(x (1 - x), 1e-12), finite at x = 0 and 1.
Tensor bce_terms(const Tensor& x, const Tensor& t) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = (t - 1.0) * x.neg().log1p().clamp(-100.0) - t * x.log().clamp(-100.0);
  }
  if (needs_grad(x, t)) {
    // the formula is made of differentiable ops: a create_graph backward records it (its
    // second derivative is that of the expression, where the clamp is inactive)
    record(
        "BinaryCrossEntropyBackward", {x, t}, {&out},
        [sx = SavedTensor(x), st = SavedTensor(t)](const BackwardCtx& c) -> variable_list {
          const Tensor x = sx.unpack("BinaryCrossEntropyBackward");
          const Tensor t = st.unpack("BinaryCrossEntropyBackward");
          Tensor gx, gt;
          if (c.needs(0)) gx = c.grad() * (x - t) / (x * (1.0 - x)).clamp(1e-12);
          if (c.needs(1)) gt = c.grad() * (x.neg().log1p() - x.log());
          return {gx, gt};
        },
        DoubleBackward::supported);
  }
  return out;
}
}  // namespace

Tensor binary_cross_entropy(const Tensor& input_in, const Tensor& target_in,
                            const Tensor& weight_in, Reduction reduction) {
  const char* op = "binary_cross_entropy";
  const auto [input, target] = same_shape_operands(input_in, target_in, op);
  const Tensor weight = autocast(weight_in, AmpPolicy::fp32);
  check_floating(target, op, "target");
  check_broadcasts_to(weight, input, op, "weight");
  if (input.numel() > 0) {
    NoGradGuard no_grad;
    const bool in_range = input.ge(0.0).logical_and(input.le(1.0)).all().item<bool>();
    SL_CHECK(in_range, op, ": every input element must lie in [0, 1] (probabilities), got min ",
             input.min().item<double>(), " and max ", input.max().item<double>(),
             " (NaN counts as outside); for logits use binary_cross_entropy_with_logits");
  }
  Tensor loss = bce_terms(input, target);
  if (weight.defined()) loss = loss * weight;
  return reduce(loss, reduction);
}

Tensor smooth_l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction,
                      double beta) {
  SL_CHECK(beta >= 0, "smooth_l1_loss: beta must be >= 0, got ", beta);
  const auto [input, target] = same_shape_operands(input_in, target_in, "smooth_l1_loss");
  const Tensor d = input - target;
  const Tensor ad = d.abs();
  if (beta == 0) return reduce(ad, reduction);
  return reduce(where(ad.lt(beta), d.square() * (0.5 / beta), ad - 0.5 * beta), reduction);
}

Tensor huber_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction,
                  double delta) {
  SL_CHECK(delta > 0, "huber_loss: delta must be > 0, got ", delta);
  const auto [input, target] = same_shape_operands(input_in, target_in, "huber_loss");
  const Tensor d = input - target;
  const Tensor ad = d.abs();
  return reduce(where(ad.lt(delta), d.square() * 0.5, (ad - 0.5 * delta) * delta), reduction);
}

Tensor kl_div(const Tensor& input_in, const Tensor& target_in, const std::string& reduction,
              bool log_target) {
  const char* op = "kl_div";
  SL_CHECK(
      reduction == "none" || reduction == "sum" || reduction == "mean" || reduction == "batchmean",
      op, ": reduction must be 'none', 'sum', 'mean' or 'batchmean', got '", reduction, "'");
  const auto [input, target] = same_shape_operands(input_in, target_in, op);
  check_floating(target, op, "target");
  Tensor loss;
  if (log_target) {
    loss = target.exp() * (target - input);
  } else {
    // xlogy(t, t) - t x: t log t is 0 at t = 0; a negative t still gives NaN, as PyTorch. The
    // log reads 1 where t = 0 so that no 0 * -inf reaches the gradient.
    const Tensor zero = target.eq(0.0);
    const Tensor tlogt = where(zero, 0.0, target * where(zero, 1.0, target).log());
    loss = tlogt - target * input;
  }
  if (reduction == "none") return loss;
  if (reduction == "mean") return loss.mean();
  Tensor total = loss.sum();
  if (reduction == "batchmean" && input.dim() > 0)
    total = total / static_cast<double>(input.size(0));
  return total;
}

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank, Reduction reduction,
                bool zero_infinity) {
  return sl::ctc_loss(autocast(log_probs, AmpPolicy::fp32), targets, input_lengths, target_lengths,
                      blank, reduction_name(reduction), zero_infinity);
}

}  // namespace functional

// ---- modules ---------------------------------------------------------------------------------

CrossEntropyLoss::CrossEntropyLoss(functional::CrossEntropyOptions opts)
    : Module("CrossEntropyLoss"), options(std::move(opts)) {
  if (options.weight.defined()) options.weight = register_buffer("weight", options.weight);
}

Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::cross_entropy(input, target, options);
}

NLLLoss::NLLLoss(functional::CrossEntropyOptions opts)
    : Module("NLLLoss"), options(std::move(opts)) {
  if (options.weight.defined()) options.weight = register_buffer("weight", options.weight);
}

Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::nll_loss(input, target, options);
}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) {
  return functional::mse_loss(input, target, reduction);
}

Tensor L1Loss::forward(const Tensor& input, const Tensor& target) {
  return functional::l1_loss(input, target, reduction);
}

Tensor CTCLoss::forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                        const Tensor& target_lengths) {
  return functional::ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, reduction,
                              zero_infinity);
}

BCELoss::BCELoss(Tensor w, Reduction r) : Module("BCELoss"), reduction(r) {
  if (w.defined()) weight = register_buffer("weight", w);
}

Tensor BCELoss::forward(const Tensor& input, const Tensor& target) {
  return functional::binary_cross_entropy(input, target, weight, reduction);
}

SmoothL1Loss::SmoothL1Loss(Reduction r, double b) : Module("SmoothL1Loss"), reduction(r), beta(b) {
  SL_CHECK(beta >= 0, "SmoothL1Loss: beta must be >= 0, got ", beta);
}

Tensor SmoothL1Loss::forward(const Tensor& input, const Tensor& target) {
  return functional::smooth_l1_loss(input, target, reduction, beta);
}

HuberLoss::HuberLoss(Reduction r, double d) : Module("HuberLoss"), reduction(r), delta(d) {
  SL_CHECK(delta > 0, "HuberLoss: delta must be > 0, got ", delta);
}

Tensor HuberLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::huber_loss(input, target, reduction, delta);
}

KLDivLoss::KLDivLoss(std::string r, bool lt)
    : Module("KLDivLoss"), reduction(std::move(r)), log_target(lt) {
  SL_CHECK(
      reduction == "none" || reduction == "sum" || reduction == "mean" || reduction == "batchmean",
      "KLDivLoss: reduction must be 'none', 'sum', 'mean' or 'batchmean', got '", reduction, "'");
}

Tensor KLDivLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::kl_div(input, target, reduction, log_target);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(Tensor w, Tensor pw, Reduction r)
    : Module("BCEWithLogitsLoss"), reduction(r) {
  if (w.defined()) weight = register_buffer("weight", w);
  if (pw.defined()) pos_weight = register_buffer("pos_weight", pw);
}

Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction);
}

}  // namespace sl::nn
