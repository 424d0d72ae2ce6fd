// cosine_similarity and pairwise_distance (nn/distance.h) against PyTorch 1.13 (fixture:
// distance, made by tools/gen_loss_fixtures.py with the configurations named here), gradchecks
// in float64, module forms and error paths.
#include <limits>

#include "loss_fixture_case.h"
#include "nn/distance.h"

using namespace sl;
using sl::testing::check_loss_case;
using sl::testing::Fixture;
namespace F = sl::nn::functional;

TEST_CASE("cosine_similarity and pairwise_distance match PyTorch") {
  Fixture fx("distance");
  const double inf = std::numeric_limits<double>::infinity();
  for (std::string s : {"", "_f64"}) {
    // "cos_sim": row 1 of x1 is 1e-10 everywhere, a norm below eps (clamped, no gradient to it)
    check_loss_case(fx, "cos_sim" + s, 2,
                    [](const TensorList& in) { return F::cosine_similarity(in[0], in[1]); });
    check_loss_case(fx, "cos_sim_bcast" + s, 2,
                    [](const TensorList& in) { return F::cosine_similarity(in[0], in[1], -1); });
    check_loss_case(fx, "cos_sim_dim0_eps" + s, 2, [](const TensorList& in) {
      return F::cosine_similarity(in[0], in[1], 0, 0.5);
    });
    check_loss_case(fx, "pdist" + s, 2,
                    [](const TensorList& in) { return F::pairwise_distance(in[0], in[1]); });
    check_loss_case(fx, "pdist_p1_keep" + s, 2, [](const TensorList& in) {
      return F::pairwise_distance(in[0], in[1], 1.0, 1e-3, true);
    });
    check_loss_case(fx, "pdist_inf_bcast" + s, 2,
                    [&](const TensorList& in) { return F::pairwise_distance(in[0], in[1], inf); });
    check_loss_case(fx, "pdist_1d" + s, 2,
                    [](const TensorList& in) { return F::pairwise_distance(in[0], in[1], 3.0); });
  }
}

TEST_CASE("distances gradcheck in float64, modules, error paths") {
  manual_seed(43);
  TensorOptions f64{.dtype = DType::f64};
  Tensor a = randn({3, 4}, f64).requires_grad_(), b = randn({4}, f64).requires_grad_();
  CHECK(gradcheck([](const TensorList& in) { return F::cosine_similarity(in[0], in[1], 1); },
                  {a, b}));
  for (double p : {1.0, 2.0, 3.5}) {
    CHECK(gradcheck(
        [p](const TensorList& in) { return F::pairwise_distance(in[0], in[1], p, 1e-6, true); },
        {a, b}));
  }
  Tensor x = randn({2, 5}), y = randn({2, 5});
  nn::CosineSimilarity cs(0, 1e-3);
  SL_CHECK_CLOSE(cs.forward(x, y), F::cosine_similarity(x, y, 0, 1e-3), 0, 0);
  nn::PairwiseDistance pd(1.0, 0.0, true);
  SL_CHECK_CLOSE(pd.forward(x, y), F::pairwise_distance(x, y, 1.0, 0.0, true), 0, 0);
  SL_CHECK_THROWS(nn::PairwiseDistance(0.0), ValueError, "PairwiseDistance: p must be > 0, got 0");
  SL_CHECK_THROWS(cs.forward(x), ValueError, "");
  SL_CHECK_THROWS(F::cosine_similarity(x, randn({3, 5})), ShapeError, "cosine_similarity");
  SL_CHECK_THROWS(F::cosine_similarity(x, y, 2), IndexError, "cosine_similarity");
  SL_CHECK_THROWS(F::cosine_similarity(x, y, 1, -1.0), ValueError,
                  "cosine_similarity: eps must be >= 0, got -1");
  SL_CHECK_THROWS(F::cosine_similarity(x, ones({2, 5}, {.dtype = DType::i64})), DTypeError,
                  "cosine_similarity: inputs must be floating point, got float32 and int64");
  SL_CHECK_THROWS(F::pairwise_distance(full({}, 1.0), full({}, 2.0)), ShapeError,
                  "pairwise_distance: needs inputs with at least one dim");
  SL_CHECK_THROWS(F::pairwise_distance(x, y, -2.0), ValueError,
                  "pairwise_distance: p must be > 0, got -2");
  SL_CHECK_THROWS(F::pairwise_distance(x, randn({2, 4})), ShapeError, "pairwise_distance");
}
