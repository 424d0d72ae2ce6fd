// Activation modules (torch.nn.ReLU, GELU, Tanh, Sigmoid, SiLU, Hardtanh, LeakyReLU) and the
// shape modules Flatten / Unflatten. Each forward is the elementwise op of the same name; any
// shape is accepted.
#pragma once

#include <string>

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
