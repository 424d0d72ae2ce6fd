#include "nn/dropout.h"

#include "autograd/ops/dropout.h"

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

}  // namespace sl::nn
