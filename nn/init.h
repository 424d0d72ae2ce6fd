// Parameter initialisation, as torch.nn.init: every function fills its tensor in place (under
// NoGradGuard, so parameters may be passed directly), draws from `gen` (the default generator
// when null) and returns the tensor. Fan-in/fan-out follow PyTorch: for a tensor [out, in, *k]
// fan_in = in * prod(k), fan_out = out * prod(k).
#pragma once

#include <string>
#include <utility>

#include "core/random.h"
#include "core/tensor.h"

namespace sl::nn::init {

/// The recommended gain for a nonlinearity: linear/conv*/sigmoid 1, tanh 5/3, relu sqrt(2),
/// leaky_relu sqrt(2 / (1 + param^2)) (param defaults to 0.01), selu 3/4. Throws ValueError for
/// an unknown name.
double calculate_gain(const std::string& nonlinearity, double param = 0.01);
/// (fan_in, fan_out); throws ValueError for fewer than 2 dims.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

Tensor uniform_(Tensor t, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
Tensor normal_(Tensor t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
/// Normal(mean, std) truncated to [a, b] by inverse-CDF sampling, as torch's trunc_normal_.
/// Throws ValueError when a >= b or std <= 0.
Tensor trunc_normal_(Tensor t, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0,
                     Generator* gen = nullptr);
Tensor constant_(Tensor t, double value);
Tensor zeros_(Tensor t);
Tensor ones_(Tensor t);
/// Identity matrix (2-d tensors only; ValueError otherwise).
Tensor eye_(Tensor t);
/// U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor t, double gain = 1.0, Generator* gen = nullptr);
/// N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_normal_(Tensor t, double gain = 1.0, Generator* gen = nullptr);
/// U(-bound, bound), bound = gain * sqrt(3 / fan) with gain = calculate_gain(nonlinearity, a)
/// and fan = fan_in ("fan_in") or fan_out ("fan_out"). Linear and Conv use a = sqrt(5).
Tensor kaiming_uniform_(Tensor t, double a = 0.0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
/// N(0, std^2), std = gain / sqrt(fan).
Tensor kaiming_normal_(Tensor t, double a = 0.0, const std::string& mode = "fan_in",
                       const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);

}  // namespace sl::nn::init
