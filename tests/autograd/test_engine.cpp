#include "support/testing.h"

using namespace sl;

TEST_CASE("backward through mul/add/sum") {
  Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
  Tensor y = (x * x + x).sum();
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 5, 7});
}

TEST_CASE("gradcheck matmul") {
  manual_seed(0);
  Tensor a = randn({3, 4}, {.dtype = DType::f64}).requires_grad_();
  Tensor b = randn({4, 2}, {.dtype = DType::f64}).requires_grad_();
  CHECK(gradcheck([](const TensorList& in) { return matmul(in[0], in[1]).tanh(); }, {a, b}));
}
