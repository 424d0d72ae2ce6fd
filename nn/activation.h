// Activation modules (torch.nn.ReLU, GELU, Tanh, Sigmoid, SiLU, Hardtanh, LeakyReLU, Softplus,
// ELU, SELU, Mish, Hardswish, Hardsigmoid, PReLU), the normalizing Softmax / LogSoftmax / Softmin
// (over one dim) and the shape modules Flatten / Unflatten. Each
// forward is the elementwise function of the same name; any shape is accepted. The first seven
// are single ops (autograd/ops/elementwise.h); the others are composed here from those ops in
// sl::nn::functional, with `where` choosing each piece so that the gradient at every kink is
// PyTorch's (tested at the kinks).
#pragma once

#include <string>

#include <optional>

#include "nn/module.h"

namespace sl::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

/// approximate: "none" (exact, erf) or "tanh" (ValueError otherwise).
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const std::string approximate;
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};

class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override;
};

/// clamp(x, min_val, max_val); DeepSpeech2 uses Hardtanh(0, 20). ValueError when min > max.
class Hardtanh : public Module {
 public:
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const double min_val, max_val;
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const double negative_slope;
};

namespace functional {
/// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (as PyTorch, which the
/// gradient follows: sigmoid(beta x), then 1). ValueError for beta = 0 or a non-finite beta or
/// threshold.
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
/// x for x > 0, alpha (exp(x) - 1) otherwise; the gradient at 0 is alpha, as PyTorch.
Tensor elu(const Tensor& x, double alpha = 1.0);
/// scale * elu(x, alpha) with SELU's constants (scale 1.0507009873554805, alpha
/// 1.6732632423543772, as PyTorch).
Tensor selu(const Tensor& x);
/// x tanh(softplus(x)) (softplus with beta 1, threshold 20).
Tensor mish(const Tensor& x);
/// 0 for x < -3, x for x > 3, x (x + 3) / 6 between (both ends included: the gradient at -3 is
/// -1/2 and at 3 is 3/2, as PyTorch).
Tensor hardswish(const Tensor& x);
/// 0 for x <= -3, 1 for x >= 3, x / 6 + 1/2 between; the gradient is 0 at -3 and 3, as PyTorch.
Tensor hardsigmoid(const Tensor& x);
/// x for x > 0, weight * x otherwise, as torch.nn.functional.prelu (PyTorch 1.13): weight is 0-d
/// or [P]; P == 1 applies one slope everywhere, otherwise P must equal the channel count, the
/// size of dim 1 (an input of rank < 2 has 1 channel). Gradients for x and weight; at x == 0 the
/// input's gradient is weight and weight's is 0, as PyTorch. Throws ShapeError for a weight of
/// rank > 1 or P != 1 not matching the channels; DTypeError for a non-floating input.
Tensor prelu(const Tensor& x, const Tensor& weight);
}  // namespace functional

/// functional::softplus; ValueError for beta = 0 or a non-finite beta or threshold.
class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const double beta, threshold;
};

class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const double alpha;
};

class SELU : public Module {
 public:
  SELU() : Module("SELU") {}
  Tensor forward(const Tensor& x) override;
};

class Mish : public Module {
 public:
  Mish() : Module("Mish") {}
  Tensor forward(const Tensor& x) override;
};

class Hardswish : public Module {
 public:
  Hardswish() : Module("Hardswish") {}
  Tensor forward(const Tensor& x) override;
};

class Hardsigmoid : public Module {
 public:
  Hardsigmoid() : Module("Hardsigmoid") {}
  Tensor forward(const Tensor& x) override;
};

/// torch.nn.PReLU: functional::prelu with a learnable weight [num_parameters] filled with init.
/// ValueError at construction for num_parameters < 1; forward's errors are prelu's.
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25, TensorOptions opts = {});
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const int64_t num_parameters;
  Tensor weight;
};

namespace functional {
/// F.softmin: softmax(-x) along dim (negative dims count from the end); with `dtype`, -x is
/// converted first. Same sizes as x. Throws ValueError (undefined x), IndexError (bad dim),
/// DTypeError (a non-floating input without a floating `dtype`), each naming softmin.
Tensor softmin(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
}  // namespace functional

/// sl::softmax along dim, as torch.nn.Softmax(dim) (the dim is required: PyTorch's implicit-dim
/// default is deprecated). Any rank; errors as sl::softmax, at forward.
class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const int64_t dim;
};

/// sl::log_softmax along dim, as torch.nn.LogSoftmax(dim). Errors as sl::log_softmax, at forward.
class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const int64_t dim;
};

/// functional::softmin along dim, as torch.nn.Softmin(dim). Errors as sl::softmax, at forward.
class Softmin : public Module {
 public:
  explicit Softmin(int64_t dim);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const int64_t dim;
};

/// Flattens dims start_dim..end_dim (default: all but the batch dim), as torch.nn.Flatten.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const int64_t start_dim, end_dim;
};

/// Splits dim into `sizes`, as torch.nn.Unflatten.
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, Shape sizes);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const int64_t dim;
  const Shape sizes;
};

}  // namespace sl::nn
