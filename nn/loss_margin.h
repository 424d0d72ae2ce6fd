// Margin and embedding losses, as torch.nn.functional's margin_ranking_loss,
// hinge_embedding_loss, soft_margin_loss, multilabel_soft_margin_loss, cosine_embedding_loss,
// triplet_margin_loss, multi_margin_loss and multilabel_margin_loss, and their modules
// (MarginRankingLoss, ...). Each is a composition of differentiable ops, so it runs and has a
// gradient on every device; inputs are taken in float32 under autocast (Note [Autocast]).
// Reductions as nn/loss.h: "mean" over every element of the unreduced loss (its shape is given
// with each function), "sum", "none".
#pragma once

#include "nn/loss.h"

namespace sl::nn {
namespace functional {

/// max(0, -target * (input1 - input2) + margin). The three tensors must have the same number of
/// dims (ShapeError naming the three shapes, as PyTorch) and broadcast together; the unreduced
/// loss has the broadcast shape. Floating inputs and target (DTypeError), one device.
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           double margin = 0.0, Reduction reduction = Reduction::mean);

/// input where target == 1, max(0, margin - input) where target == -1; PyTorch adds both terms
/// where target is neither (kept: its formula). input floating; target of input's shape (any
/// numeric dtype; ShapeError otherwise).
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin = 1.0,
                            Reduction reduction = Reduction::mean);

/// log(1 + exp(-target * input)) of equal shapes, computed as softplus so that a large
/// -target * input gives a finite loss and gradient (PyTorch 1.13's log1p(exp(.)) gives inf and
/// a NaN gradient there; elsewhere the two agree to rounding).
Tensor soft_margin_loss(const Tensor& input, const Tensor& target,
                        Reduction reduction = Reduction::mean);

/// -(t log sigmoid(x) + (1 - t) log sigmoid(-x)) times weight (broadcast to input's shape when
/// given), averaged over the last dim (the classes): the unreduced loss has input's shape
/// without its last dim ([N] for [N, C]; 0-d for [C]). target of input's shape, floating.
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target,
                                   const Tensor& weight = Tensor(),
                                   Reduction reduction = Reduction::mean);

/// 1 - cos(x1, x2) where target == 1, max(0, cos(x1, x2) - margin) where target == -1, 0
/// elsewhere, with cos = sum(x1 x2) / sqrt((sum(x1^2) + 1e-12) (sum(x2^2) + 1e-12)) as PyTorch.
/// input1, input2 [N, D] with target [N], or [D] with a 0-d target (ShapeError otherwise,
/// worded as PyTorch's); the unreduced loss is [N] (0-d).
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             double margin = 0.0, Reduction reduction = Reduction::mean);

/// max(0, margin + d(a, p) - d(a, n)) with d = pairwise_distance(., ., p, eps) over the last
/// dim; with swap, d(a, n) is min(d(a, n), d(p, n)). The three must have the same number of
/// dims (ShapeError otherwise, as PyTorch) and broadcast together; the unreduced loss has their
/// broadcast shape without the last dim. ValueError for p < 0 or NaN.
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin = 1.0, double p = 2.0, double eps = 1e-6,
                           bool swap = false, Reduction reduction = Reduction::mean);

/// Multi-class hinge loss of scores input [N, C] (or [C]) against class indices target [N] (or
/// 0-d): sum over i != y of max(0, margin - x[y] + x[i])^p, times weight[y] when given ([C]),
/// divided by C; the unreduced loss is [N] (0-d). ValueError unless p is 1 or 2 (PyTorch's
/// message), ShapeError for other shapes, DTypeError for non-integer targets, IndexError for a
/// class outside [0, C) (Note [Index checks]).
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p = 1,
                         double margin = 1.0, const Tensor& weight = Tensor(),
                         Reduction reduction = Reduction::mean);

/// Multi-label hinge loss: each row of target (input's shape, [N, C] or [C], integer) lists the
/// row's classes up to its first -1; the loss is sum over listed classes j and unlisted classes
/// i of max(0, 1 - (x[j] - x[i])), divided by C (a class listed twice counts twice, as in
/// PyTorch). The unreduced loss is [N] (0-d). IndexError for a target value outside [-1, C)
/// (also after the first -1, as PyTorch), ShapeError, DTypeError. Memory O(N C^2).
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target,
                              Reduction reduction = Reduction::mean);

}  // namespace functional

/// Module forms: forward(input1, input2, target) or forward(input, target) with the options given
/// at construction; weights are buffers named "weight", as in PyTorch's state dicts.
class MarginRankingLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit MarginRankingLoss(double margin = 0.0, Reduction reduction = Reduction::mean);
  Tensor forward(const Tensor& input1, const Tensor& input2, const Tensor& target);
  double margin;
  Reduction reduction;
};

class HingeEmbeddingLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit HingeEmbeddingLoss(double margin = 1.0, Reduction reduction = Reduction::mean);
  Tensor forward(const Tensor& input, const Tensor& target);
  double margin;
  Reduction reduction;
};

class SoftMarginLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit SoftMarginLoss(Reduction reduction = Reduction::mean);
  Tensor forward(const Tensor& input, const Tensor& target);
  Reduction reduction;
};

class MultiLabelSoftMarginLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit MultiLabelSoftMarginLoss(Tensor weight = Tensor(),
                                    Reduction reduction = Reduction::mean);
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor weight;
  Reduction reduction;
};

class CosineEmbeddingLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit CosineEmbeddingLoss(double margin = 0.0, Reduction reduction = Reduction::mean);
  Tensor forward(const Tensor& input1, const Tensor& input2, const Tensor& target);
  double margin;
  Reduction reduction;
};

/// Options of TripletMarginLoss, as PyTorch's keyword arguments.
struct TripletMarginOptions {
  double margin = 1.0;
  double p = 2.0;
  double eps = 1e-6;
  bool swap = false;
  Reduction reduction = Reduction::mean;
};

class TripletMarginLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit TripletMarginLoss(TripletMarginOptions opts = {});
  Tensor forward(const Tensor& anchor, const Tensor& positive, const Tensor& negative);
  TripletMarginOptions options;
};

class MultiMarginLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  /// ValueError unless p is 1 or 2, as PyTorch's constructor.
  explicit MultiMarginLoss(int64_t p = 1, double margin = 1.0, Tensor weight = Tensor(),
                           Reduction reduction = Reduction::mean);
  Tensor forward(const Tensor& input, const Tensor& target);
  int64_t p;
  double margin;
  Tensor weight;
  Reduction reduction;
};

class MultiLabelMarginLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit MultiLabelMarginLoss(Reduction reduction = Reduction::mean);
  Tensor forward(const Tensor& input, const Tensor& target);
  Reduction reduction;
};

}  // namespace sl::nn
