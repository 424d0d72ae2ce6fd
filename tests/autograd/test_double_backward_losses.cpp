// Every loss of nn::functional except ctc_loss (whose gradient is a kernel and refuses, see
// test_double_backward.cpp) is twice differentiable w.r.t. its floating inputs: gradgradcheck
// (central differences of the first-order gradient in float64, gradcheck's default tolerances;
// the create_graph gradient first compared with the plain one). Inputs stay away from the
// losses' kinks (|x - y| = beta, margins), where finite differences straddle two pieces.
#include <functional>
#include <string>
#include <vector>

#include "nn/distance.h"
#include "nn/loss.h"
#include "nn/loss_likelihood.h"
#include "nn/loss_margin.h"
#include "support/testing.h"

using namespace sl;
using namespace sl::testing;
namespace F = sl::nn::functional;

namespace {
Tensor param(const Shape& s, double scale = 1.0, double shift = 0.0) {
  return (randn(s, {.dtype = DType::f64}) * scale + shift).detach().requires_grad_();
}
Tensor labels(const std::vector<double>& v, const Shape& s) {
  return from_vector(v, s);
}
}  // namespace

TEST_CASE("double backward: every nn::functional loss but ctc_loss") {
  manual_seed(40);
  Tensor a = param({4, 3}), b = param({4, 3}), c = param({4, 3});
  Tensor pos = param({4, 3}, 0.2, 1.0);                           // positive (rates, variances)
  Tensor prob = rand({4, 3}, {.dtype = DType::f64}) * 0.8 + 0.1;  // in (0.1, 0.9)
  prob = prob.detach().requires_grad_();
  Tensor sign = labels({1, -1, 1, -1}, {4});
  Tensor sign2 = labels({1, -1, 1, 1, -1, -1, 1, -1, -1, 1, 1, -1}, {4, 3});
  Tensor binary = labels({1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0}, {4, 3});
  Tensor cls = from_vector(std::vector<int64_t>{2, 0, 1, 1});
  Tensor multilabel =
      from_vector(std::vector<int64_t>{2, 0, -1, 1, -1, -1, 0, 1, 2, 1, -1, -1}, {4, 3});
  using Fn = std::function<Tensor(const TensorList&)>;
  const std::vector<std::pair<std::string, std::pair<Fn, TensorList>>> cases = {
      {"mse_loss", {[](const TensorList& v) { return F::mse_loss(v[0], v[1]); }, {a, b}}},
      {"l1_loss", {[](const TensorList& v) { return F::l1_loss(v[0], v[1]); }, {a, b}}},
      {"smooth_l1_loss",
       {[](const TensorList& v) { return F::smooth_l1_loss(v[0], v[1], nn::Reduction::sum, 0.3); },
        {a, b}}},
      {"huber_loss",
       {[](const TensorList& v) { return F::huber_loss(v[0], v[1], nn::Reduction::mean, 0.4); },
        {a, b}}},
      {"binary_cross_entropy",
       {[&](const TensorList& v) { return F::binary_cross_entropy(v[0], binary); }, {prob}}},
      {"binary_cross_entropy_with_logits",
       {[&](const TensorList& v) {
          return F::binary_cross_entropy_with_logits(v[0], prob.detach(), Tensor(), v[1].exp());
        },
        {a, param({3})}}},
      {"kl_div",
       {[](const TensorList& v) {
          return F::kl_div(v[0].log_softmax(1), v[1].softmax(1), "batchmean");
        },
        {a, b}}},
      {"kl_div log_target",
       {[](const TensorList& v) {
          return F::kl_div(v[0].log_softmax(1), v[1].log_softmax(1), "sum", true);
        },
        {a, b}}},
      {"log_sigmoid", {[](const TensorList& v) { return F::log_sigmoid(v[0]); }, {a}}},
      {"cross_entropy", {[&](const TensorList& v) { return F::cross_entropy(v[0], cls); }, {a}}},
      {"margin_ranking_loss",
       {[&](const TensorList& v) {
          return F::margin_ranking_loss(v[0].select(1, 0), v[1].select(1, 0), sign, 0.1);
        },
        {a, b}}},
      {"hinge_embedding_loss",
       {[&](const TensorList& v) { return F::hinge_embedding_loss(v[0], sign2, 0.05); }, {pos}}},
      {"soft_margin_loss",
       {[&](const TensorList& v) { return F::soft_margin_loss(v[0], sign2); }, {a}}},
      {"multilabel_soft_margin_loss",
       {[&](const TensorList& v) {
          return F::multilabel_soft_margin_loss(v[0], binary, v[1].exp());
        },
        {a, param({3})}}},
      {"cosine_embedding_loss",
       {[&](const TensorList& v) { return F::cosine_embedding_loss(v[0], v[1], sign, -0.9); },
        {a, b}}},
      {"triplet_margin_loss",
       {[](const TensorList& v) { return F::triplet_margin_loss(v[0], v[1], v[2], 5.0); },
        {a, b, c}}},
      {"multi_margin_loss p=1",
       {[&](const TensorList& v) { return F::multi_margin_loss(v[0], cls, 1, 5.0); }, {a}}},
      {"multi_margin_loss p=2",
       {[&](const TensorList& v) { return F::multi_margin_loss(v[0], cls, 2, 5.0, v[1].exp()); },
        {a, param({3})}}},
      {"multilabel_margin_loss",
       {[&](const TensorList& v) { return F::multilabel_margin_loss(v[0], multilabel); }, {a}}},
      {"poisson_nll_loss",
       {[&](const TensorList& v) { return F::poisson_nll_loss(v[0], pos.detach(), true, true); },
        {a}}},
      {"poisson_nll_loss rates",
       {[&](const TensorList& v) { return F::poisson_nll_loss(v[0], prob.detach(), false); },
        {pos}}},
      {"gaussian_nll_loss",
       {[](const TensorList& v) { return F::gaussian_nll_loss(v[0], v[1], v[2], true); },
        {a, b, pos}}},
      {"cosine_similarity",
       {[](const TensorList& v) { return F::cosine_similarity(v[0], v[1]); }, {a, b}}},
      {"pairwise_distance",
       {[](const TensorList& v) { return F::pairwise_distance(v[0], v[1], 3.0); }, {a, b}}},
  };
  for (const auto& [name, c] : cases) {
    CAPTURE(name);
    try {
      CHECK(gradgradcheck(c.first, c.second));
    } catch (const std::exception& e) {
      FAIL_CHECK(e.what());
    }
  }
}
