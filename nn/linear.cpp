#include "nn/linear.h"

#include <cmath>

#include "autograd/ops/matmul.h"
#include "core/creation.h"
#include "nn/init.h"

namespace sl::nn {

Linear::Linear(int64_t in_features_, int64_t out_features_, bool with_bias, TensorOptions opts)
    : Module("Linear"), in_features(in_features_), out_features(out_features_) {
  SL_CHECK(in_features > 0 && out_features > 0,
           "Linear: in_features and out_features must be "
           "positive, got ",
           in_features, " and ", out_features);
  opts.requires_grad = false;
  weight = register_parameter("weight", empty({out_features, in_features}, opts));
  bias = register_parameter("bias", with_bias ? empty({out_features}, opts) : Tensor());
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "Linear: the input is undefined");
  SL_CHECK_SHAPE(x.dim() >= 1 && x.size(-1) == in_features,
                 "Linear: expected an input whose last "
                 "dim is in_features=",
                 in_features, ", got shape ", shape_str(x.sizes()));
  return linear(x, weight, bias);
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) +
         ", out_features=" + std::to_string(out_features) +
         ", bias=" + repr::py_bool(bias.defined());
}

}  // namespace sl::nn
