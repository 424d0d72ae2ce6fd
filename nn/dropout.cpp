#include "nn/dropout.h"

#include "autograd/ops/dropout.h"
#include "autograd/ops/elementwise.h"
#include "core/creation.h"
#include "core/ops/copy.h"

namespace sl::nn {

Dropout::Dropout(double p_) : Module("Dropout"), p(p_) {
  SL_CHECK(p >= 0.0 && p <= 1.0, "Dropout: p must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "Dropout: the input is undefined");
  return dropout(x, p, is_training());
}

std::string Dropout::extra_repr() const {
  return "p=" + repr::py_float(p) + ", inplace=False";
}

namespace {

/// PyTorch's feature dropout on x of rank >= 2: one keep-or-zero draw per (dim 0, dim 1) entry,
/// broadcast over the other dims. The noise is sl::dropout of ones (exactly 0 or 1 / (1 - p), in
/// x's dtype and on its device, as PyTorch's make_feature_noise), so the mask comes from the same
/// Philox stream as Dropout's on every device; x * noise gives the gradient noise * grad.
Tensor feature_dropout(const char* op, const Tensor& x, double p, bool training) {
  SL_CHECK(p >= 0.0 && p <= 1.0, op, ": p must be in [0, 1], got ", p);
  SL_CHECK_DTYPE(is_floating(x.dtype()), op, ": expected a floating input, got ",
                 dtype_name(x.dtype()));
  if (!training || p == 0.0 || x.numel() == 0) return x;
  Shape noise_sizes(static_cast<size_t>(x.dim()), 1);
  noise_sizes[0] = x.size(0);
  noise_sizes[1] = x.size(1);
  Tensor noise = dropout(ones(noise_sizes, {.dtype = x.dtype(), .device = x.device()}), p, true);
  return x * noise;
}

}  // namespace

namespace functional {

Tensor dropout1d(const Tensor& input, double p, bool training) {
  ops::check_defined("dropout1d", input);
  SL_CHECK_SHAPE(input.dim() == 2 || input.dim() == 3,
                 "dropout1d: expected a 2-d [C, L] or 3-d [N, C, L] input, got ",
                 shape_str(input.sizes()));
  if (input.dim() == 3) return feature_dropout("dropout1d", input, p, training);
  return feature_dropout("dropout1d", input.unsqueeze(0), p, training).squeeze(0);
}

Tensor dropout2d(const Tensor& input, double p, bool training) {
  ops::check_defined("dropout2d", input);
  SL_CHECK_SHAPE(input.dim() >= 2, "dropout2d: expected an input of at least 2 dims, got ",
                 shape_str(input.sizes()));
  return feature_dropout("dropout2d", input, p, training);
}

}  // namespace functional

Dropout1d::Dropout1d(double p_) : Module("Dropout1d"), p(p_) {
  SL_CHECK(p >= 0.0 && p <= 1.0, "Dropout1d: p must be in [0, 1], got ", p);
}

Tensor Dropout1d::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "Dropout1d: the input is undefined");
  return functional::dropout1d(x, p, is_training());
}

std::string Dropout1d::extra_repr() const {
  return "p=" + repr::py_float(p) + ", inplace=False";
}

Dropout2d::Dropout2d(double p_) : Module("Dropout2d"), p(p_) {
  SL_CHECK(p >= 0.0 && p <= 1.0, "Dropout2d: p must be in [0, 1], got ", p);
}

Tensor Dropout2d::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "Dropout2d: the input is undefined");
  return functional::dropout2d(x, p, is_training());
}

std::string Dropout2d::extra_repr() const {
  return "p=" + repr::py_float(p) + ", inplace=False";
}

}  // namespace sl::nn
