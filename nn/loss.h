// Loss functions (torch.nn.functional forms in sl::nn::functional) and their modules
// (CrossEntropyLoss, ...). All are differentiable in their floating inputs and computed in log
// space where exponentials appear. Reductions: "mean" (default), "sum", "none".
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.h"

namespace sl::nn {

enum class Reduction { none, mean, sum };
/// "none" | "mean" | "sum"; throws ValueError naming `op` otherwise.
Reduction parse_reduction(const std::string& s, const char* op);
const char* reduction_name(Reduction r);

namespace functional {

struct CrossEntropyOptions {
  /// Per-class weights [C] (undefined: all 1).
  Tensor weight;
  /// Targets equal to this are skipped (class-index targets only).
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::mean;
  /// In [0, 1]: mixes the target with the uniform distribution, as PyTorch.
  double label_smoothing = 0.0;
};

/// Cross entropy of logits `input` [N, C] / [N, C, d1, ...] / unbatched [C] against either class
/// indices (int64 [N] / [N, d1, ...] / []) or class probabilities (input's shape and dtype),
/// exactly as torch.nn.functional.cross_entropy, including the weighted mean (divided by the sum
/// of the weights of the non-ignored targets) and label smoothing's weighting. Throws ShapeError
/// (ranks or sizes that do not fit, weight not [C]), IndexError (a class index outside [0, C)
/// that is not ignore_index; on CUDA with checked indexing off, reported by the guarded gather
/// at the next synchronisation, Note [Index checks]), ValueError (label_smoothing outside
/// [0, 1], or an ignore_index >= 0 with probability targets, as PyTorch), DTypeError. Ignored
/// targets add exactly 0 to the loss and the gradient even where their logits are -inf; with
/// every target ignored, the mean is NaN (0/0) and the gradient zero, as in PyTorch.
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyOptions& opts = {});
/// Negative log-likelihood of log-probabilities `input` with class-index targets; same shapes,
/// weight, ignore_index and reduction rules as cross_entropy (label_smoothing must be 0).
Tensor nll_loss(const Tensor& input, const Tensor& target, const CrossEntropyOptions& opts = {});
/// (input - target)^2, reduced. Shapes must be equal (ShapeError otherwise: PyTorch broadcasts
/// with a warning, which hides bugs).
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
/// |input - target|, reduced. Shapes must be equal.
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
/// -w [p t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))] with p = pos_weight (e.g. [C], over the
/// last dim) and w = weight, each broadcast to input's shape, computed from logits stably as
/// (1 - t) x - (1 + (p - 1) t) log_sigmoid(x). target has input's shape; ShapeError otherwise,
/// and for a weight or pos_weight that does not broadcast to the input's shape (a larger one
/// included, as PyTorch: the result keeps the input's shape).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = Tensor(),
                                        const Tensor& pos_weight = Tensor(),
                                        Reduction reduction = Reduction::mean);
/// Binary cross entropy of probabilities `input` in [0, 1] against `target` (input's shape):
/// -w [t log(x) + (1 - t) log(1 - x)] with each log clamped to >= -100, as PyTorch, so x = 0 or 1
/// gives a finite loss; w = weight broadcast to input's shape. The input gradient is PyTorch's
/// w (x - t) / max(x (1 - x), 1e-12) (finite at 0 and 1), the target's w (log(1 - x) - log(x)).
/// Throws ValueError when an input element lies outside [0, 1] or is NaN (checked on every call:
/// on CUDA one reduction and one synchronisation), ShapeError for shapes that differ or a weight
/// that does not broadcast to the input's shape. Prefer binary_cross_entropy_with_logits.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const Tensor& weight = Tensor(), Reduction reduction = Reduction::mean);
/// Smooth L1: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target), reduced.
/// beta = 0 is l1_loss (whose gradient at d = 0 is 0; PyTorch 1.13's smooth_l1 gives -1 there).
/// Shapes must be equal (ShapeError); ValueError for a negative or NaN beta, as PyTorch.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      Reduction reduction = Reduction::mean, double beta = 1.0);
/// Huber: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta), reduced; smooth_l1_loss times
/// delta. Shapes must be equal (ShapeError); ValueError unless delta > 0, as PyTorch.
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean,
                  double delta = 1.0);
/// Kullback-Leibler divergence of log-probabilities `input` from `target` (probabilities, or
/// log-probabilities when log_target), pointwise t (log t - x) with 0 where t = 0 (or
/// exp(t) (t - x)). reduction: "none", "sum", "mean" (over every element, as PyTorch) or
/// "batchmean" (the sum over input.size(0): the KL divergence per sample; a 0-d input gives the
/// sum). Shapes must be equal (ShapeError; PyTorch broadcasts). Where t = 0 the target's
/// gradient is -x (PyTorch 1.13's is NaN); targets rarely need one. ValueError for another
/// reduction name.
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
              bool log_target = false);
/// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), stable for any x.
Tensor log_sigmoid(const Tensor& x);
/// CTC loss of log_probs [T, N, C] (log_softmax over C) against padded [N, S] or concatenated
/// targets with per-sample lengths, computed in log space by sl::ctc_loss (autograd/ops/ctc.h,
/// which documents shapes and errors); "mean" is PyTorch's (each loss divided by its target
/// length, then averaged); zero_infinity zeroes impossible alignments (a target longer than its
/// input among them) and their gradients; without it such a loss is +inf and its gradient NaN.
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank = 0,
                Reduction reduction = Reduction::mean, bool zero_infinity = false);

}  // namespace functional

/// Module forms: forward(input, target) with the options given at construction.
class CrossEntropyLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit CrossEntropyLoss(functional::CrossEntropyOptions opts = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  functional::CrossEntropyOptions options;
};

class NLLLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit NLLLoss(functional::CrossEntropyOptions opts = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  functional::CrossEntropyOptions options;
};

class MSELoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit MSELoss(Reduction reduction = Reduction::mean)
      : Module("MSELoss"), reduction(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  Reduction reduction;
};

class L1Loss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit L1Loss(Reduction reduction = Reduction::mean) : Module("L1Loss"), reduction(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  Reduction reduction;
};

class BCELoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  /// weight (optional) is registered as a buffer, as PyTorch does.
  explicit BCELoss(Tensor weight = Tensor(), Reduction reduction = Reduction::mean);
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor weight;
  Reduction reduction;
};

class SmoothL1Loss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  /// ValueError for a negative or NaN beta (at construction).
  explicit SmoothL1Loss(Reduction reduction = Reduction::mean, double beta = 1.0);
  Tensor forward(const Tensor& input, const Tensor& target);
  Reduction reduction;
  double beta;
};

class HuberLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  /// ValueError unless delta > 0 (at construction).
  explicit HuberLoss(Reduction reduction = Reduction::mean, double delta = 1.0);
  Tensor forward(const Tensor& input, const Tensor& target);
  Reduction reduction;
  double delta;
};

class KLDivLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  /// reduction: "none", "sum", "mean" or "batchmean" (ValueError otherwise, at construction).
  explicit KLDivLoss(std::string reduction = "mean", bool log_target = false);
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string reduction;
  bool log_target;
};

class CTCLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit CTCLoss(int64_t blank = 0, Reduction reduction = Reduction::mean,
                   bool zero_infinity = false)
      : Module("CTCLoss"), blank(blank), reduction(reduction), zero_infinity(zero_infinity) {}
  Tensor forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                 const Tensor& target_lengths);
  int64_t blank;
  Reduction reduction;
  bool zero_infinity;
};

class BCEWithLogitsLoss : public Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using Module::forward;
  explicit BCEWithLogitsLoss(Tensor weight = Tensor(), Tensor pos_weight = Tensor(),
                             Reduction reduction = Reduction::mean);
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor weight, pos_weight;
  Reduction reduction;
};

}  // namespace sl::nn
