// Dropout, as torch.nn.Dropout: in training, zeroes each element with probability p and scales
// the rest by 1 / (1 - p), drawing from the default generator; in eval, the identity.
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

}  // namespace sl::nn
