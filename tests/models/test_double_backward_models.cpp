// Second derivatives of whole models (Note [Double backward] in autograd/engine.cpp): a
// Hessian-vector product H v of a training loss w.r.t. every parameter is the gradient of
// f(theta) = <grad L(theta), v>, which a backward with create_graph builds; module_gradcheck
// checks that gradient against central differences of f in float64 (gradcheck's default
// tolerances), perturbing the model's own parameters.
#include <functional>
#include <string>

#include "autograd/grad_mode.h"
#include "models/resnet.h"
#include "models/tiny_bert.h"
#include "nn/fixture.h"
#include "nn/init.h"
#include "nn/loss.h"
#include "support/testing.h"

using namespace sl;
using namespace sl::models;

namespace {

/// f(theta) = sum over parameters of <dL/dp, v_p>, with L = loss() and fixed directions v.
std::function<Tensor(const TensorList&)> grad_dot_direction(nn::Module& m,
                                                            std::function<Tensor()> loss) {
  TensorList v;
  for (const Tensor& p : m.parameters()) v.push_back(randn(p.sizes(), {.dtype = DType::f64}));
  return [&m, loss, v](const TensorList&) {
    EnableGradGuard eg;  // the numerical pass runs under NoGradGuard
    TensorList params = m.parameters();
    variable_list g = grad({loss()}, params, {}, /*retain_graph=*/true, /*create_graph=*/true);
    Tensor f = zeros({}, {.dtype = DType::f64});
    for (size_t i = 0; i < g.size(); ++i) f = f + (g[i] * v[i]).sum();
    return f;
  };
}

}  // namespace

TEST_CASE("double backward: Hessian-vector product of a tiny BERT's masked-LM loss") {
  BertConfig c = testing::tiny_gradcheck_bert();
  const auto [ids, types, mask] = testing::TinyBertBatch{};
  // masked-LM labels: -100 rows are ignored, as in training
  Tensor labels = from_vector(std::vector<int64_t>{2, -100, 5, -100, 1, -100}).view({6});
  manual_seed(31);
  BertForMaskedLM mlm(c);
  mlm.to(DType::f64);
  // embeddings (a gather), layer norms, attention with a padding mask, the gelu FFN, the tied
  // decoder and cross_entropy's gather, all twice differentiated
  auto loss = [&] {
    Tensor logits = mlm.forward(ids, types, mask);
    return nn::functional::cross_entropy(logits.view({6, c.vocab_size}), labels);
  };
  CHECK(testing::module_gradcheck(mlm, grad_dot_direction(mlm, loss), {}));
}

TEST_CASE("double backward: R1 penalty of a tiny ResNet in train mode, w.r.t. its parameters") {
  // R1 (Mescheder et al. 2018): |d D(x) / d x|^2 for a discriminator D, trained through its
  // gradient w.r.t. the parameters, a second derivative: convolutions, BatchNorm with batch
  // statistics, relu, max pool (torchvision's stem), adaptive average pool and the linear head.
  manual_seed(33);
  ResNet d(
      {.block = ResNetBlock::basic, .blocks = {1}, .num_classes = 1, .in_channels = 1, .width = 2});
  d.to(DType::f64);
  {  // BatchNorm affine parameters away from 1 / 0, so their gradients are not special
    NoGradGuard ng;
    for (const auto& [name, p] : d.named_parameters()) {
      if (name.find("bn") != std::string::npos) nn::init::uniform_(p, 0.5, 1.5);
    }
  }
  Tensor x = randn({2, 1, 12, 12}, {.dtype = DType::f64});
  auto r1 = [&](const TensorList&) {
    EnableGradGuard eg;
    Tensor xi = x.detach().requires_grad_();
    variable_list g = grad({d.forward(xi).sum()}, {xi}, {}, true, /*create_graph=*/true);
    return g[0].square().sum();
  };
  CHECK(testing::module_gradcheck(d, r1, {}));
}
