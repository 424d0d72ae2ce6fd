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
