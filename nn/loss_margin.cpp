#include "nn/loss_margin.h"

#include <cmath>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/index.h"
#include "autograd/ops/reduce.h"
#include "core/amp.h"
#include "core/creation.h"
#include "core/ops/index.h"
#include "core/shape.h"
#include "nn/distance.h"
#include "nn/loss_common.h"

namespace sl::nn {
namespace functional {

using detail::check_broadcasts_to;
using detail::check_floating;
using detail::reduce;
using detail::same_shape_operands;

namespace {

void check_same_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Device d = (*ts.begin())->device();
  for (const Tensor* t : ts) {
    SL_CHECK_DEVICE(t->device() == d, op, ": all inputs must be on one device, got ", d, " and ",
                    t->device());
  }
}

// PyTorch's "same dimension" rule of margin_ranking_loss and triplet_margin_loss: three
// tensors of one rank that broadcast together.
void check_same_rank(const char* op, const Tensor& a, const Tensor& b, const Tensor& c,
                     const char* names) {
  SL_CHECK_SHAPE(a.dim() == b.dim() && b.dim() == c.dim(), op,
                 ": all inputs should have the same number of dims, got ", names, " of shapes ",
                 shape_str(a.sizes()), ", ", shape_str(b.sizes()), " and ", shape_str(c.sizes()));
  broadcast_shapes(broadcast_shapes(a.sizes(), b.sizes(), op), c.sizes(), op);
}

// Class-index targets of multi_margin_loss, as a flat int64 [N]: input [N, C] (or [C], N = 1),
// target of at most one dim holding N values (PyTorch's rule; a 0-d target gives a 0-d loss).
Tensor class_targets(const char* op, const Tensor& input, const Tensor& target) {
  SL_CHECK(target.defined(), op, ": target is undefined");
  SL_CHECK_SHAPE(input.dim() == 1 || input.dim() == 2, op, ": input must be [N, C] or [C], got ",
                 shape_str(input.sizes()));
  const int64_t n = input.dim() == 2 ? input.size(0) : 1;
  SL_CHECK_SHAPE(target.dim() <= 1 && target.numel() == n, op, ": input of shape ",
                 shape_str(input.sizes()), " needs a target of ", n,
                 " class indices ([N] or 0-d), got shape ", shape_str(target.sizes()));
  check_same_device(op, {&input, &target});
  const int64_t C = input.size(-1);
  return ops::check_index(op, target, C, std::to_string(C) + " classes").reshape({n});
}

}  // namespace

Tensor margin_ranking_loss(const Tensor& input1_in, const Tensor& input2_in,
                           const Tensor& target_in, double margin, Reduction reduction) {
  const char* op = "margin_ranking_loss";
  const Tensor x1 = autocast(input1_in, AmpPolicy::fp32), x2 = autocast(input2_in, AmpPolicy::fp32),
               y = autocast(target_in, AmpPolicy::fp32);
  check_floating(x1, op, "input1");
  check_floating(x2, op, "input2");
  check_floating(y, op, "target");
  check_same_device(op, {&x1, &x2, &y});
  check_same_rank(op, x1, x2, y, "input1, input2 and target");
  return reduce((y.neg() * (x1 - x2) + margin).clamp(0.0), reduction);
}

Tensor hinge_embedding_loss(const Tensor& input_in, const Tensor& target, double margin,
                            Reduction reduction) {
  const char* op = "hinge_embedding_loss";
  const Tensor x = autocast(input_in, AmpPolicy::fp32);
  check_floating(x, op, "input");
  SL_CHECK(target.defined(), op, ": target is undefined");
  SL_CHECK_SHAPE(x.sizes() == target.sizes(), op, ": input shape ", shape_str(x.sizes()),
                 " and target shape ", shape_str(target.sizes()), " must be equal");
  check_same_device(op, {&x, &target});
  // PyTorch's two masked terms: a target that is neither 1 nor -1 gets both.
  Tensor margin_term = where(target.ne(1), (x.neg() + margin).clamp(0.0), 0.0);
  Tensor self_term = where(target.ne(-1), x, 0.0);
  return reduce(margin_term + self_term, reduction);
}

Tensor soft_margin_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const char* op = "soft_margin_loss";
  const auto [x, y] = same_shape_operands(input_in, target_in, op);
  check_floating(y, op, "target");
  // log(1 + exp(z)) = -log_sigmoid(-z), finite for any z
  return reduce(log_sigmoid(y * x).neg(), reduction);
}

Tensor multilabel_soft_margin_loss(const Tensor& input_in, const Tensor& target_in,
                                   const Tensor& weight_in, Reduction reduction) {
  const char* op = "multilabel_soft_margin_loss";
  const auto [x, y] = same_shape_operands(input_in, target_in, op);
  check_floating(y, op, "target");
  SL_CHECK_SHAPE(x.dim() >= 1, op, ": input must have a class dim, got a 0-d tensor");
  const Tensor weight = autocast(weight_in, AmpPolicy::fp32);
  if (weight.defined()) check_floating(weight, op, "weight");
  check_broadcasts_to(weight, x, op, "weight");
  Tensor loss = (y * log_sigmoid(x) + (1.0 - y) * log_sigmoid(x.neg())).neg();
  if (weight.defined()) loss = loss * weight;
  const int64_t class_dim = x.dim() - 1;
  return reduce(loss.sum({class_dim}) / static_cast<double>(x.size(class_dim)), reduction);
}

Tensor cosine_embedding_loss(const Tensor& input1_in, const Tensor& input2_in, const Tensor& target,
                             double margin, Reduction reduction) {
  const char* op = "cosine_embedding_loss";
  const Tensor x1 = autocast(input1_in, AmpPolicy::fp32), x2 = autocast(input2_in, AmpPolicy::fp32);
  check_floating(x1, op, "input1");
  check_floating(x2, op, "input2");
  SL_CHECK(target.defined(), op, ": target is undefined");
  check_same_device(op, {&x1, &x2, &target});
  SL_CHECK_SHAPE(target.dim() <= 1, op,
                 ": 0-d or 1-d target tensor expected, multi-target not supported; got ",
                 shape_str(target.sizes()));
  const int64_t want = target.dim() + 1;
  SL_CHECK_SHAPE(x1.dim() == want && x2.dim() == want, op, ": a ", target.dim(),
                 "-d target expects ", want, "-d inputs, got inputs of shapes ",
                 shape_str(x1.sizes()), " and ", shape_str(x2.sizes()));
  SL_CHECK_SHAPE(x1.sizes() == x2.sizes() && (target.dim() == 0 || target.size(0) == x1.size(0)),
                 op, ": inputs of shapes ", shape_str(x1.sizes()), " and ", shape_str(x2.sizes()),
                 " and target of shape ", shape_str(target.sizes()), " do not match");
  const int64_t d = target.dim();  // the vectors' dim
  constexpr double kEps = 1e-12;   // PyTorch's EPSILON, added to each squared magnitude
  Tensor dot = (x1 * x2).sum({d});
  Tensor denom = (((x1 * x1).sum({d}) + kEps) * ((x2 * x2).sum({d}) + kEps)).sqrt();
  Tensor cos = dot / denom;
  Tensor loss =
      where(target.eq(1), 1.0 - cos, 0.0) + where(target.eq(-1), (cos - margin).clamp(0.0), 0.0);
  return reduce(loss, reduction);
}

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin, double p, double eps, bool swap, Reduction reduction) {
  const char* op = "triplet_margin_loss";
  SL_CHECK(anchor.defined() && positive.defined() && negative.defined(), op,
           ": an input is undefined");
  check_same_rank(op, anchor, positive, negative, "anchor, positive and negative");
  SL_CHECK(p > 0, op, ": p must be > 0, got ", p);
  Tensor d_pos = pairwise_distance(anchor, positive, p, eps);
  Tensor d_neg = pairwise_distance(anchor, negative, p, eps);
  if (swap) d_neg = minimum(d_neg, pairwise_distance(positive, negative, p, eps));
  return reduce((d_pos - d_neg + margin).clamp(0.0), reduction);
}

Tensor multi_margin_loss(const Tensor& input_in, const Tensor& target, int64_t p, double margin,
                         const Tensor& weight_in, Reduction reduction) {
  const char* op = "multi_margin_loss";
  SL_CHECK(p == 1 || p == 2, op, ": only p == 1 and p == 2 supported, got p = ", p);
  const Tensor x = autocast(input_in, AmpPolicy::fp32);
  check_floating(x, op, "input");
  const Tensor tgt = class_targets(op, x, target);
  const int64_t C = x.size(-1);
  Tensor weight = autocast(weight_in, AmpPolicy::fp32);
  if (weight.defined()) {
    check_floating(weight, op, "weight");
    check_same_device(op, {&x, &weight});
    SL_CHECK_SHAPE(weight.dim() == 1 && weight.size(0) == C, op, ": weight must be [", C,
                   "] (one per class), got ", shape_str(weight.sizes()));
  }
  const Tensor x2 = x.reshape({-1, C});  // [N, C]
  const Tensor t2 = tgt.unsqueeze(1);    // [N, 1]
  Tensor picked = x2.gather(1, t2);      // x[y], [N, 1]
  Tensor h = (x2 - picked + margin).clamp(0.0);
  if (p == 2) h = h.square();
  // the target's own class is left out of the sum (its term would be margin^p)
  Tensor is_target =
      arange(0, C, 1, {.dtype = DType::i64, .device = x.device()}).unsqueeze(0).eq(t2);
  h = where(is_target, 0.0, h);
  if (weight.defined()) h = h * weight.index_select(0, tgt).unsqueeze(1);
  Tensor loss = h.sum({1}) / static_cast<double>(C);
  return reduce(target.dim() == 0 ? loss.reshape({}) : loss, reduction);
}

Tensor multilabel_margin_loss(const Tensor& input_in, const Tensor& target, Reduction reduction) {
  const char* op = "multilabel_margin_loss";
  const Tensor x = autocast(input_in, AmpPolicy::fp32);
  check_floating(x, op, "input");
  SL_CHECK(target.defined(), op, ": target is undefined");
  SL_CHECK_SHAPE(x.dim() == 1 || x.dim() == 2, op, ": input must be [N, C] or [C], got ",
                 shape_str(x.sizes()));
  SL_CHECK_SHAPE(target.sizes() == x.sizes(), op, ": target must have input's shape ",
                 shape_str(x.sizes()), ", got ", shape_str(target.sizes()));
  check_same_device(op, {&x, &target});
  const int64_t C = x.size(-1);
  SL_CHECK_DTYPE(target.dtype() == DType::i64 || target.dtype() == DType::i32, op,
                 ": target must be int64 (or int32), got ", dtype_name(target.dtype()));
  const Tensor tgt = target.to(DType::i64);
  // Every value in [-1, C), also after the first -1 (as PyTorch). Read back on the host where
  // Note [Index checks] reads indices; otherwise the guarded gather below reports a bad one.
  if (ops::index_checks_on_host(tgt.device()) && tgt.numel() > 0) {
    const int64_t lo = tgt.min().item<int64_t>(), hi = tgt.max().item<int64_t>();
    SL_CHECK_INDEX(lo >= -1 && hi < C, op, ": target ", lo < -1 ? lo : hi,
                   " is out of range (expected -1 <= target < ", C, ")");
  }
  const Tensor y = tgt.reshape({-1, C});  // [N, C]
  const Tensor x2 = x.reshape({-1, C});
  // position j is listed when no -1 comes at or before it
  Tensor listed = y.eq(-1).to(DType::i64).cumsum(1).eq(0);  // [N, C] over positions
  Tensor cls = where(listed, y, 0);                         // a class per listed position
  // is_target[n, i]: class i is listed in row n
  Tensor is_target =
      scatter_add(zeros({x2.size(0), C}, {.dtype = DType::i64, .device = x.device()}), 1, cls,
                  listed.to(DType::i64))
          .gt(0);
  Tensor picked = x2.gather(1, cls);  // x[y_j], [N, C(j)]
  // [N, j, i]: max(0, 1 - x[y_j] + x[i]) over listed j and unlisted i
  Tensor h = (x2.unsqueeze(1) - picked.unsqueeze(2) + 1.0).clamp(0.0);
  Tensor keep = listed.unsqueeze(2).logical_and(is_target.logical_not().unsqueeze(1));
  Tensor loss = where(keep, h, 0.0).sum({1, 2}) / static_cast<double>(C);
  return reduce(x.dim() == 1 ? loss.reshape({}) : loss, reduction);
}

}  // namespace functional

MarginRankingLoss::MarginRankingLoss(double m, Reduction r)
    : Module("MarginRankingLoss"), margin(m), reduction(r) {}

Tensor MarginRankingLoss::forward(const Tensor& input1, const Tensor& input2,
                                  const Tensor& target) {
  return functional::margin_ranking_loss(input1, input2, target, margin, reduction);
}

HingeEmbeddingLoss::HingeEmbeddingLoss(double m, Reduction r)
    : Module("HingeEmbeddingLoss"), margin(m), reduction(r) {}

Tensor HingeEmbeddingLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::hinge_embedding_loss(input, target, margin, reduction);
}

SoftMarginLoss::SoftMarginLoss(Reduction r) : Module("SoftMarginLoss"), reduction(r) {}

Tensor SoftMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::soft_margin_loss(input, target, reduction);
}

MultiLabelSoftMarginLoss::MultiLabelSoftMarginLoss(Tensor w, Reduction r)
    : Module("MultiLabelSoftMarginLoss"), reduction(r) {
  if (w.defined()) weight = register_buffer("weight", w);
}

Tensor MultiLabelSoftMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::multilabel_soft_margin_loss(input, target, weight, reduction);
}

CosineEmbeddingLoss::CosineEmbeddingLoss(double m, Reduction r)
    : Module("CosineEmbeddingLoss"), margin(m), reduction(r) {}

Tensor CosineEmbeddingLoss::forward(const Tensor& input1, const Tensor& input2,
                                    const Tensor& target) {
  return functional::cosine_embedding_loss(input1, input2, target, margin, reduction);
}

TripletMarginLoss::TripletMarginLoss(TripletMarginOptions o)
    : Module("TripletMarginLoss"), options(o) {
  SL_CHECK(options.p > 0, "TripletMarginLoss: p must be > 0, got ", options.p);
}

Tensor TripletMarginLoss::forward(const Tensor& anchor, const Tensor& positive,
                                  const Tensor& negative) {
  const TripletMarginOptions& o = options;
  return functional::triplet_margin_loss(anchor, positive, negative, o.margin, o.p, o.eps, o.swap,
                                         o.reduction);
}

MultiMarginLoss::MultiMarginLoss(int64_t norm, double m, Tensor w, Reduction r)
    : Module("MultiMarginLoss"), p(norm), margin(m), reduction(r) {
  SL_CHECK(p == 1 || p == 2, "MultiMarginLoss: only p == 1 and p == 2 supported, got p = ", p);
  if (w.defined()) weight = register_buffer("weight", w);
}

Tensor MultiMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::multi_margin_loss(input, target, p, margin, weight, reduction);
}

MultiLabelMarginLoss::MultiLabelMarginLoss(Reduction r)
    : Module("MultiLabelMarginLoss"), reduction(r) {}

Tensor MultiLabelMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::multilabel_margin_loss(input, target, reduction);
}

}  // namespace sl::nn
