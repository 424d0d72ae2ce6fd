#include "nn/activation.h"

#include "autograd/ops/elementwise.h"

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
