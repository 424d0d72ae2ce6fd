#include "nn/activation.h"

#include <cmath>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/softmax.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/shape.h"

namespace sl::nn {

namespace {
const Tensor& checked(const Tensor& x, const char* op) {
  SL_CHECK(x.defined(), op, ": the input is undefined");
  return x;
}
}  // namespace

Tensor ReLU::forward(const Tensor& x) {
  return relu(checked(x, "ReLU"));
}

GELU::GELU(std::string approx) : Module("GELU"), approximate(std::move(approx)) {
  SL_CHECK(approximate == "none" || approximate == "tanh",
           "GELU: approximate must be 'none' or 'tanh', got '", approximate, "'");
}
Tensor GELU::forward(const Tensor& x) {
  return gelu(checked(x, "GELU"), approximate);
}
std::string GELU::extra_repr() const {
  return "approximate='" + approximate + "'";
}

Tensor Tanh::forward(const Tensor& x) {
  return tanh(checked(x, "Tanh"));
}
Tensor Sigmoid::forward(const Tensor& x) {
  return sigmoid(checked(x, "Sigmoid"));
}
Tensor SiLU::forward(const Tensor& x) {
  return silu(checked(x, "SiLU"));
}

Hardtanh::Hardtanh(double min_v, double max_v)
    : Module("Hardtanh"), min_val(min_v), max_val(max_v) {
  SL_CHECK(min_val <= max_val, "Hardtanh: min_val (", min_val, ") must not exceed max_val (",
           max_val, ")");
}
Tensor Hardtanh::forward(const Tensor& x) {
  return hardtanh(checked(x, "Hardtanh"), min_val, max_val);
}
std::string Hardtanh::extra_repr() const {
  return "min_val=" + repr::py_float(min_val) + ", max_val=" + repr::py_float(max_val);
}

LeakyReLU::LeakyReLU(double slope) : Module("LeakyReLU"), negative_slope(slope) {}
Tensor LeakyReLU::forward(const Tensor& x) {
  return leaky_relu(checked(x, "LeakyReLU"), negative_slope);
}
std::string LeakyReLU::extra_repr() const {
  return "negative_slope=" + repr::py_float(negative_slope);
}

namespace functional {

namespace {
void check_input(const Tensor& x, const char* op) {
  SL_CHECK(x.defined(), op, ": the input is undefined");
  SL_CHECK_DTYPE(x.is_floating_point(), op, ": the input must be floating point, got ",
                 dtype_name(x.dtype()));
}
}  // namespace

Tensor softplus(const Tensor& x, double beta, double threshold) {
  check_input(x, "softplus");
  SL_CHECK(beta != 0 && std::isfinite(beta) && std::isfinite(threshold),
           "softplus: beta must be finite and nonzero and threshold finite, got beta=", beta,
           ", threshold=", threshold);
  const Tensor bx = x * beta;
  // exp sees at most the threshold, so the branch `where` drops holds no inf whose gradient
  // (0 * inf) would turn the kept branch's gradient into NaN.
  const Tensor soft = bx.clamp(std::nullopt, threshold).exp().log1p();
  return where(bx.gt(threshold), x, beta == 1.0 ? soft : soft / beta);
}

Tensor elu(const Tensor& x, double alpha) {
  check_input(x, "elu");
  // clamp's gradient passes at its bound, so x = 0 takes alpha exp(0) = alpha, as PyTorch.
  return where(x.gt(0.0), x, expm1(x.clamp(std::nullopt, 0.0)) * alpha);
}

Tensor selu(const Tensor& x) {
  check_input(x, "selu");
  return elu(x, 1.6732632423543772848170429916717) * 1.0507009873554804934193349852946;
}

Tensor mish(const Tensor& x) {
  check_input(x, "mish");
  return x * softplus(x).tanh();
}

Tensor hardswish(const Tensor& x) {
  check_input(x, "hardswish");
  const Tensor mid = where(x.le(3.0), x * (x + 3.0) / 6.0, x);
  return where(x.lt(-3.0), 0.0, mid);
}

Tensor hardsigmoid(const Tensor& x) {
  check_input(x, "hardsigmoid");
  const Tensor mid = where(x.ge(3.0), 1.0, x / 6.0 + 0.5);
  return where(x.le(-3.0), 0.0, mid);
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  check_input(x, "prelu");
  SL_CHECK(weight.defined(), "prelu: the weight is undefined");
  SL_CHECK_SHAPE(weight.dim() <= 1, "prelu: weight must be a scalar or 1-d, got shape ",
                 shape_str(weight.sizes()));
  const int64_t params = weight.numel();
  const int64_t channels = x.dim() >= 2 ? x.size(1) : 1;
  SL_CHECK_SHAPE(params == 1 || params == channels, "prelu: weight has ", params,
                 " parameters but the input ", shape_str(x.sizes()), " has ", channels,
                 " channels (dim 1; 1 for an input of rank < 2)");
  // one slope per channel, broadcast over the dims after it: [P, 1, ..., 1]; a single slope
  // becomes 0-d so that it broadcasts against any input, 0-d included
  Shape per_channel;
  if (params != 1) {
    per_channel.assign(static_cast<size_t>(x.dim() - 1), 1);
    per_channel[0] = params;
  }
  // The negative branch sees x clamped to <= 0: at x == 0 clamp passes the gradient (input
  // gradient weight, weight gradient 0 * g = 0, as PyTorch), and where x > 0 it is 0, so an
  // infinite x gives weight no 0 * inf = NaN gradient.
  return where(x.gt(0.0), x, weight.reshape(per_channel) * x.clamp(std::nullopt, 0.0));
}

}  // namespace functional

namespace {
// Python's repr of a number the caller may have written as an int (Softplus(beta=1)).
std::string py_number(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  return repr::py_float(v);
}
}  // namespace

Softplus::Softplus(double b, double t) : Module("Softplus"), beta(b), threshold(t) {
  SL_CHECK(beta != 0 && std::isfinite(beta) && std::isfinite(threshold),
           "Softplus: beta must be finite and nonzero and threshold finite, got beta=", beta,
           ", threshold=", threshold);
}
Tensor Softplus::forward(const Tensor& x) {
  return functional::softplus(checked(x, "Softplus"), beta, threshold);
}
std::string Softplus::extra_repr() const {
  return "beta=" + py_number(beta) + ", threshold=" + py_number(threshold);
}

ELU::ELU(double a) : Module("ELU"), alpha(a) {}
Tensor ELU::forward(const Tensor& x) {
  return functional::elu(checked(x, "ELU"), alpha);
}
std::string ELU::extra_repr() const {
  return "alpha=" + repr::py_float(alpha);
}

Tensor SELU::forward(const Tensor& x) {
  return functional::selu(checked(x, "SELU"));
}
Tensor Mish::forward(const Tensor& x) {
  return functional::mish(checked(x, "Mish"));
}
Tensor Hardswish::forward(const Tensor& x) {
  return functional::hardswish(checked(x, "Hardswish"));
}
Tensor Hardsigmoid::forward(const Tensor& x) {
  return functional::hardsigmoid(checked(x, "Hardsigmoid"));
}

PReLU::PReLU(int64_t n, double init, TensorOptions opts) : Module("PReLU"), num_parameters(n) {
  SL_CHECK(n >= 1, "PReLU: num_parameters must be >= 1, got ", n);
  opts.requires_grad = false;
  weight = register_parameter("weight", full({n}, init, opts));
}
Tensor PReLU::forward(const Tensor& x) {
  return functional::prelu(checked(x, "PReLU"), weight);
}
std::string PReLU::extra_repr() const {
  return "num_parameters=" + std::to_string(num_parameters);
}

namespace functional {
Tensor softmin(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  // checked here so that the errors name softmin, not the softmax it is composed of
  ops::check_defined("softmin", x);
  SL_CHECK_DTYPE(is_floating(dtype.value_or(x.dtype())), "softmin: expected a floating dtype, got ",
                 dtype_name(dtype.value_or(x.dtype())));
  wrap_dim(dim, x.dim(), "softmin");
  return softmax(-x, dim, dtype);  // as PyTorch: (-input).softmax(dim, dtype=dtype)
}
}  // namespace functional

Softmax::Softmax(int64_t d) : Module("Softmax"), dim(d) {}
Tensor Softmax::forward(const Tensor& x) {
  return softmax(checked(x, "Softmax"), dim);
}
std::string Softmax::extra_repr() const {
  return "dim=" + std::to_string(dim);
}

LogSoftmax::LogSoftmax(int64_t d) : Module("LogSoftmax"), dim(d) {}
Tensor LogSoftmax::forward(const Tensor& x) {
  return log_softmax(checked(x, "LogSoftmax"), dim);
}
std::string LogSoftmax::extra_repr() const {
  return "dim=" + std::to_string(dim);
}

Softmin::Softmin(int64_t d) : Module("Softmin"), dim(d) {}
Tensor Softmin::forward(const Tensor& x) {
  return functional::softmin(checked(x, "Softmin"), dim);
}
std::string Softmin::extra_repr() const {
  return "dim=" + std::to_string(dim);
}

Flatten::Flatten(int64_t s, int64_t e) : Module("Flatten"), start_dim(s), end_dim(e) {}
Tensor Flatten::forward(const Tensor& x) {
  return checked(x, "Flatten").flatten(start_dim, end_dim);
}
std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

Unflatten::Unflatten(int64_t d, Shape s) : Module("Unflatten"), dim(d), sizes(std::move(s)) {}
Tensor Unflatten::forward(const Tensor& x) {
  return checked(x, "Unflatten").unflatten(dim, sizes);
}
std::string Unflatten::extra_repr() const {
  return "dim=" + std::to_string(dim) + ", unflattened_size=" + repr::py_tuple(sizes);
}

}  // namespace sl::nn
