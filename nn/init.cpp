#include "nn/init.h"

#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/creation.h"
#include "core/error.h"

namespace sl::nn::init {

namespace {

void check_defined(const Tensor& t, const char* op) {
  SL_CHECK(t.defined(), op, ": the tensor is undefined");
}

// Inverse error function: Giles' single-precision polynomial as a start, refined by two Newton
// steps in double, so the result is accurate to double rounding on (-1, 1).
double erfinv(double y) {
  if (y <= -1.0) return -INFINITY;
  if (y >= 1.0) return INFINITY;
  double w = -std::log((1.0 - y) * (1.0 + y));
  double x;
  if (w < 5.0) {
    w -= 2.5;
    double p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
    x = p * y;
  } else {
    w = std::sqrt(w) - 3.0;
    double p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
    x = p * y;
  }
  const double two_over_sqrt_pi = 1.1283791670955126;
  for (int i = 0; i < 2; ++i) {
    double err = std::erf(x) - y;
    x -= err / (two_over_sqrt_pi * std::exp(-x * x));
  }
  return x;
}

double fan(const Tensor& t, const std::string& mode, const char* op) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  SL_CHECK(mode == "fan_in" || mode == "fan_out", op, ": mode must be 'fan_in' or 'fan_out', got '",
           mode, "'");
  int64_t f = mode == "fan_in" ? fan_in : fan_out;
  SL_CHECK(f > 0, op, ": cannot initialise a tensor with zero ", mode, " (shape ",
           shape_str(t.sizes()), ")");
  return static_cast<double>(f);
}

}  // namespace

double calculate_gain(const std::string& nonlinearity, double param) {
  if (nonlinearity == "linear" || nonlinearity == "conv1d" || nonlinearity == "conv2d" ||
      nonlinearity == "conv3d" || nonlinearity == "conv_transpose1d" ||
      nonlinearity == "conv_transpose2d" || nonlinearity == "conv_transpose3d" ||
      nonlinearity == "sigmoid") {
    return 1.0;
  }
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nonlinearity == "selu") return 3.0 / 4.0;
  detail::throw_error<ValueError>("calculate_gain: unsupported nonlinearity '", nonlinearity, "'");
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  check_defined(t, "calculate_fan_in_and_fan_out");
  SL_CHECK(t.dim() >= 2,
           "calculate_fan_in_and_fan_out: fan in and fan out can not be computed "
           "for a tensor with fewer than 2 dimensions (shape ",
           shape_str(t.sizes()), ")");
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor uniform_(Tensor t, double a, double b, Generator* gen) {
  check_defined(t, "uniform_");
  SL_CHECK(a <= b, "uniform_: expected a <= b, got a=", a, " b=", b);
  NoGradGuard ng;
  t.uniform_(a, b, gen);
  return t;
}

Tensor normal_(Tensor t, double mean, double std, Generator* gen) {
  check_defined(t, "normal_");
  SL_CHECK(std >= 0, "normal_: std must be >= 0, got ", std);
  NoGradGuard ng;
  t.normal_(mean, std, gen);
  return t;
}

Tensor trunc_normal_(Tensor t, double mean, double std, double a, double b, Generator* gen) {
  check_defined(t, "trunc_normal_");
  SL_CHECK(a < b, "trunc_normal_: expected a < b, got a=", a, " b=", b);
  SL_CHECK(std > 0, "trunc_normal_: std must be > 0, got ", std);
  NoGradGuard ng;
  auto norm_cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  double l = norm_cdf((a - mean) / std), u = norm_cdf((b - mean) / std);
  // Uniform on [2l-1, 2u-1], then the inverse CDF (as torch.nn.init.trunc_normal_), in f64.
  Tensor uni = rand(t.sizes(), {.dtype = DType::f64}, gen);
  std::vector<double> v = uni.to_vector<double>();
  for (double& x : v) {
    double y = (2 * l - 1) + x * ((2 * u - 1) - (2 * l - 1));
    double z = erfinv(y) * std * std::sqrt(2.0) + mean;
    x = std::min(std::max(z, a), b);
  }
  t.copy_(from_vector(v, t.sizes(), TensorOptions{.dtype = DType::f64}));
  return t;
}

Tensor constant_(Tensor t, double value) {
  check_defined(t, "constant_");
  NoGradGuard ng;
  t.fill_(value);
  return t;
}

Tensor zeros_(Tensor t) {
  return constant_(std::move(t), 0.0);
}
Tensor ones_(Tensor t) {
  return constant_(std::move(t), 1.0);
}

Tensor eye_(Tensor t) {
  check_defined(t, "eye_");
  SL_CHECK(t.dim() == 2, "eye_: only 2-d tensors are supported, got shape ", shape_str(t.sizes()));
  NoGradGuard ng;
  t.copy_(eye(t.size(0), t.size(1), {.dtype = t.dtype()}));
  return t;
}

Tensor xavier_uniform_(Tensor t, double gain, Generator* gen) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  double std = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  double a = std::sqrt(3.0) * std;
  return uniform_(std::move(t), -a, a, gen);
}

Tensor xavier_normal_(Tensor t, double gain, Generator* gen) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  double std = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  return normal_(std::move(t), 0.0, std, gen);
}

Tensor kaiming_uniform_(Tensor t, double a, const std::string& mode,
                        const std::string& nonlinearity, Generator* gen) {
  double f = fan(t, mode, "kaiming_uniform_");
  double std = calculate_gain(nonlinearity, a) / std::sqrt(f);
  double bound = std::sqrt(3.0) * std;
  return uniform_(std::move(t), -bound, bound, gen);
}

Tensor kaiming_normal_(Tensor t, double a, const std::string& mode, const std::string& nonlinearity,
                       Generator* gen) {
  double f = fan(t, mode, "kaiming_normal_");
  double std = calculate_gain(nonlinearity, a) / std::sqrt(f);
  return normal_(std::move(t), 0.0, std, gen);
}

}  // namespace sl::nn::init
