// Embedding against PyTorch (fixture: embedding), init, gradcheck and errors.
#include <cmath>

#include "fixture.h"
#include "nn/embedding.h"

using namespace sl;
using sl::testing::Fixture;
using sl::testing::module_gradcheck;

// f32: rtol 1e-5, atol 1e-6 (the default); a lookup and a scatter-add of a few rows.
constexpr double kRtol = 1e-5, kAtol = 1e-6;

namespace {
void run_module_case(const Fixture& fx, const std::string& name, nn::Module& m) {
  CAPTURE(name);
  fx.load_params(m, name);
  Tensor x = fx.input(name, 0);
  fx.check_backward(name, {m.forward(x)}, {x}, &m, kRtol, kAtol);
}
}  // namespace

TEST_CASE("Embedding matches PyTorch (padding row gets no gradient)") {
  Fixture fx("embedding");
  nn::Embedding a(10, 4, 2);
  run_module_case(fx, "embedding_pad", a);
  CHECK(a.weight.grad()[2].abs().sum().item<double>() == 0.0);
  nn::Embedding b(7, 3);
  run_module_case(fx, "embedding", b);
  // Default init: N(0, 1) with the padding row zeroed.
  manual_seed(0);
  nn::Embedding c(1000, 8, -1);
  CHECK(c.padding_idx.value() == 999);
  CHECK(c.weight[999].abs().sum().item<double>() == 0.0);
  CHECK(std::fabs(c.weight.std().item<double>() - 1.0) < 0.03);
  SL_CHECK_THROWS(nn::Embedding(5, 2, 5), ValueError, "padding_idx 5 must be within [-5, 5)");
  SL_CHECK_THROWS(b.forward(tensor({1.0f})), DTypeError, "indices must be int64 or int32");
  SL_CHECK_THROWS(b.forward(from_vector(std::vector<int64_t>{7})), IndexError, "7");
  CHECK(a.str() == "Embedding(10, 4, padding_idx=2)");
}

TEST_CASE("Embedding gradcheck in float64") {
  nn::Embedding emb(5, 3, 0, {.dtype = DType::f64});
  Tensor unused = zeros({1}, {.dtype = DType::f64}).requires_grad_();
  // Row 0 (padding) is not looked up: its gradient is 0 both analytically and numerically.
  Tensor idx = from_vector(std::vector<int64_t>{2, 3, 3, 1});
  CHECK(module_gradcheck(emb, [&](const TensorList&) { return emb.forward(idx); }, {unused}));
}
