// Dropout, as torch.nn.Dropout: in training, zeroes each element with probability p and scales
// the rest by 1 / (1 - p), drawing from the default generator; in eval, the identity. And the
// channel-wise Dropout1d / Dropout2d (torch.nn's, PyTorch 1.13): whole channels are zeroed.
#pragma once

#include "nn/module.h"

namespace sl::nn {

/// Throws ValueError unless 0 <= p <= 1.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const double p;
};

namespace functional {
/// F.dropout1d: input [N, C, L] or unbatched [C, L]; in training with 0 < p < 1, each channel
/// (n, c) is zeroed whole with probability p and the kept ones are scaled by 1 / (1 - p) (one
/// draw per channel from the default generator, by sl::dropout); p == 1 gives zeros; eval or
/// p == 0 returns input itself. The gradient is the same mask and scale. Throws ValueError
/// unless 0 <= p <= 1, ShapeError for another rank, DTypeError for a non-floating input.
Tensor dropout1d(const Tensor& input, double p = 0.5, bool training = true);
/// F.dropout2d: channel dropout as dropout1d over input [N, C, H, W]. As PyTorch 1.13, a 3-d
/// input is taken as batched [N, C, L] (dropout1d's behaviour, not an unbatched [C, H, W]: see
/// pytorch/pytorch#77081), and other ranks >= 2 (which PyTorch accepts with a deprecation
/// warning) zero along dims 0 and 1. Throws ValueError unless 0 <= p <= 1, ShapeError for rank
/// < 2, DTypeError for a non-floating input.
Tensor dropout2d(const Tensor& input, double p = 0.5, bool training = true);
}  // namespace functional

/// functional::dropout1d in training mode, the identity in eval. Throws ValueError unless
/// 0 <= p <= 1.
class Dropout1d : public Module {
 public:
  explicit Dropout1d(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const double p;
};

/// functional::dropout2d in training mode (a 3-d input is [N, C, L], as PyTorch 1.13), the
/// identity in eval. Throws ValueError unless 0 <= p <= 1.
class Dropout2d : public Module {
 public:
  explicit Dropout2d(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const double p;
};

}  // namespace sl::nn
