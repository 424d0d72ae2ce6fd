// Margin and embedding losses (nn/loss_margin.h) against PyTorch 1.13 (fixture: loss_margin, made
// by tools/gen_loss_fixtures.py, whose cases this file names with the same configuration),
// gradchecks in float64, module forms and error paths.
#include <cmath>
#include <limits>

#include "loss_fixture_case.h"
#include "nn/loss_margin.h"

using namespace sl;
using sl::testing::check_loss_case;
using sl::testing::Fixture;
namespace F = sl::nn::functional;
using nn::Reduction;

namespace {

const char* kSuffixes[] = {"", "_f64"};  // the float32 and float64 cases

Tensor idx(std::vector<int64_t> v) {
  return from_vector(v);
}

}  // namespace

TEST_CASE("margin_ranking, hinge_embedding and soft_margin losses match PyTorch") {
  Fixture fx("loss_margin");
  for (std::string s : kSuffixes) {
    for (auto red : {Reduction::mean, Reduction::sum, Reduction::none}) {
      const std::string r = nn::reduction_name(red);
      check_loss_case(fx, "margin_ranking_" + r + s, 3, [&](const TensorList& in) {
        return F::margin_ranking_loss(in[0], in[1], in[2], 0.3, red);
      });
      const Tensor ys = fx.get("soft_margin_" + r + s + ".target");
      check_loss_case(fx, "soft_margin_" + r + s, 1,
                      [&](const TensorList& in) { return F::soft_margin_loss(in[0], ys, red); });
    }
    check_loss_case(fx, "margin_ranking_bcast" + s, 3, [&](const TensorList& in) {
      return F::margin_ranking_loss(in[0], in[1], in[2], 0.0, Reduction::none);
    });
    // a target of 0 (neither 1 nor -1) gets both of PyTorch's terms
    Tensor yh = idx({1, -1, 0, 1, -1}).unsqueeze(0).expand({4, 5});
    for (auto red : {Reduction::mean, Reduction::none}) {
      check_loss_case(
          fx, std::string("hinge_") + nn::reduction_name(red) + s, 1,
          [&](const TensorList& in) { return F::hinge_embedding_loss(in[0], yh, 1.5, red); });
    }
  }
}

TEST_CASE("multilabel_soft_margin and cosine_embedding losses match PyTorch") {
  Fixture fx("loss_margin");
  for (std::string s : kSuffixes) {
    for (auto red : {Reduction::mean, Reduction::none}) {
      const std::string r = nn::reduction_name(red);
      check_loss_case(fx, "mlsm_" + r + s, 2, [&](const TensorList& in) {
        return F::multilabel_soft_margin_loss(in[0], in[1], Tensor(), red);
      });
      check_loss_case(fx, "cosine_emb_" + r + s, 2, [&](const TensorList& in) {
        return F::cosine_embedding_loss(in[0], in[1], idx({1, -1, 1, -1, -1, 1}), -0.2, red);
      });
    }
    const Tensor w = fx.get("mlsm_w" + s + ".weight");
    check_loss_case(fx, "mlsm_w" + s, 2, [&](const TensorList& in) {
      return F::multilabel_soft_margin_loss(in[0], in[1], w, Reduction::sum);
    });
    check_loss_case(fx, "mlsm_1d" + s, 2, [&](const TensorList& in) {
      return F::multilabel_soft_margin_loss(in[0], in[1]);
    });
    check_loss_case(fx, "cosine_emb_1d" + s, 2, [&](const TensorList& in) {
      return F::cosine_embedding_loss(in[0], in[1], from_vector<int64_t>({-1}).reshape({}), 0.1);
    });
  }
}

TEST_CASE("triplet_margin, multi_margin and multilabel_margin losses match PyTorch") {
  Fixture fx("loss_margin");
  const Tensor tm = idx({0, 3, 1, 1, 2});
  const Tensor tl =
      from_vector<int64_t>({3, 0, -1, 1, 1, 2, 2, 4, -1, 0, -1, 1, 2, 3, 4, 0, 1, 2, 3, 4}, {4, 5});
  for (std::string s : kSuffixes) {
    check_loss_case(fx, "triplet_default" + s, 3, [&](const TensorList& in) {
      return F::triplet_margin_loss(in[0], in[1], in[2]);
    });
    check_loss_case(fx, "triplet_p1_swap_none" + s, 3, [&](const TensorList& in) {
      return F::triplet_margin_loss(in[0], in[1], in[2], 2.0, 1.0, 1e-3, true, Reduction::none);
    });
    check_loss_case(fx, "triplet_p3_sum" + s, 3, [&](const TensorList& in) {
      return F::triplet_margin_loss(in[0], in[1], in[2], 1.0, 3.0, 1e-6, false, Reduction::sum);
    });
    for (auto red : {Reduction::mean, Reduction::none}) {
      const std::string r = nn::reduction_name(red);
      check_loss_case(fx, "multi_margin_" + r + s, 1, [&](const TensorList& in) {
        return F::multi_margin_loss(in[0], tm, 1, 1.0, Tensor(), red);
      });
      check_loss_case(fx, "multilabel_margin_" + r + s, 1, [&](const TensorList& in) {
        return F::multilabel_margin_loss(in[0], tl, red);
      });
    }
    const Tensor wm = fx.get("multi_margin_p2_w" + s + ".weight");
    check_loss_case(fx, "multi_margin_p2_w" + s, 1, [&](const TensorList& in) {
      return F::multi_margin_loss(in[0], tm, 2, 0.7, wm, Reduction::sum);
    });
    // a 1-d input with a 0-d target: a 0-d loss, as PyTorch
    check_loss_case(fx, "multi_margin_1d" + s, 1, [&](const TensorList& in) {
      Tensor two = from_vector<int64_t>({2}).reshape({});
      return F::multi_margin_loss(in[0], two, 1, 1.0, Tensor(), Reduction::none);
    });
    check_loss_case(fx, "multilabel_margin_1d" + s, 1, [&](const TensorList& in) {
      return F::multilabel_margin_loss(in[0], tl.select(0, 0), Reduction::none);
    });
  }
}

TEST_CASE("margin losses gradcheck in float64") {
  manual_seed(31);
  TensorOptions f64{.dtype = DType::f64};
  // inputs away from the hinges' kinks: random normals land within 1e-6 of one with
  // probability ~1e-5 per term, and the seed is fixed
  Tensor a = randn({4, 3}, f64).requires_grad_(), b = randn({4, 3}, f64).requires_grad_();
  Tensor c = randn({4, 3}, f64).requires_grad_();
  Tensor y = (rand({4, 3}, f64).gt(0.5).to(DType::f64) * 2 - 1).requires_grad_();
  CHECK(gradcheck(
      [](const TensorList& in) { return F::margin_ranking_loss(in[0], in[1], in[2], 0.2); },
      {a, b, y}));
  CHECK(
      gradcheck([&](const TensorList& in) { return F::soft_margin_loss(in[0], y.detach()); }, {a}));
  Tensor t = rand({4, 3}, f64).requires_grad_();
  Tensor w = rand({3}, f64) + 0.5;
  CHECK(gradcheck(
      [&](const TensorList& in) { return F::multilabel_soft_margin_loss(in[0], in[1], w); },
      {a, t}));
  CHECK(gradcheck(
      [](const TensorList& in) {
        return F::cosine_embedding_loss(in[0], in[1], from_vector<int64_t>({1, -1, -1, 1}), -0.5);
      },
      {a, b}));
  for (bool swap : {false, true}) {
    CHECK(gradcheck(
        [&](const TensorList& in) {
          return F::triplet_margin_loss(in[0], in[1], in[2], 1.5, 2.0, 1e-6, swap);
        },
        {a, b, c}));
  }
  for (int64_t p : {1, 2}) {
    CHECK(gradcheck(
        [&](const TensorList& in) {
          return F::multi_margin_loss(in[0], idx({2, 0, 1, 1}), p, 0.9, w);
        },
        {a}));
  }
  CHECK(gradcheck(
      [](const TensorList& in) {
        return F::multilabel_margin_loss(
            in[0], from_vector<int64_t>({2, 0, -1, 1, -1, 0, 0, 1, 2, 1, 1, -1}, {4, 3}));
      },
      {a}));
}

TEST_CASE("soft_margin_loss stays finite where PyTorch 1.13's log1p(exp) overflows") {
  // -y x = 100: log(1 + e^100) = 100 + log1p(e^-100) = 100 in float32; PyTorch gives inf and a
  // NaN gradient. The gradient is -y sigmoid(-y x) = -1 (the mean over one element).
  Tensor x = tensor({-100.0f}).requires_grad_();
  Tensor l = F::soft_margin_loss(x, tensor({1.0f}));
  CHECK(l.item<float>() == 100.0f);
  l.backward();
  CHECK(x.grad().item<float>() == -1.0f);
}

TEST_CASE("margin loss modules: options, weights as buffers, forward as the functions") {
  manual_seed(5);
  Tensor x = randn({3, 4}), z = randn({3, 4}), t = randn({3, 4}).gt(0).to(DType::f32) * 2 - 1;
  nn::MarginRankingLoss mr(0.5, Reduction::sum);
  SL_CHECK_CLOSE(mr.forward(x, z, t), F::margin_ranking_loss(x, z, t, 0.5, Reduction::sum), 0, 0);
  nn::HingeEmbeddingLoss he(2.0);
  SL_CHECK_CLOSE(he.forward(x, t), F::hinge_embedding_loss(x, t, 2.0), 0, 0);
  nn::SoftMarginLoss sm(Reduction::none);
  SL_CHECK_CLOSE(sm.forward(x, t), F::soft_margin_loss(x, t, Reduction::none), 0, 0);
  Tensor w = rand({4});
  nn::MultiLabelSoftMarginLoss ml(w);
  CHECK(ml.state_dict().keys() == std::vector<std::string>{"weight"});
  CHECK(nn::MultiLabelSoftMarginLoss().state_dict().keys().empty());
  Tensor soft = rand({3, 4});
  SL_CHECK_CLOSE(ml.forward(x, soft), F::multilabel_soft_margin_loss(x, soft, w), 0, 0);
  nn::CosineEmbeddingLoss ce(0.1);
  Tensor yc = idx({1, -1, 1});
  SL_CHECK_CLOSE(ce.forward(x, z, yc), F::cosine_embedding_loss(x, z, yc, 0.1), 0, 0);
  nn::TripletMarginLoss tr({.margin = 0.5, .p = 1.0, .swap = true});
  SL_CHECK_CLOSE(tr.forward(x, z, t), F::triplet_margin_loss(x, z, t, 0.5, 1.0, 1e-6, true), 0, 0);
  nn::MultiMarginLoss mm(2, 0.5, w);
  CHECK(mm.state_dict().keys() == std::vector<std::string>{"weight"});
  Tensor cls = idx({3, 0, 1});
  SL_CHECK_CLOSE(mm.forward(x, cls), F::multi_margin_loss(x, cls, 2, 0.5, w), 0, 0);
  nn::MultiLabelMarginLoss mlm(Reduction::sum);
  Tensor lab = from_vector<int64_t>({0, 1, -1, 2, 2, -1, 3, 0, 1, 2, -1, 0}, {3, 4});
  SL_CHECK_CLOSE(mlm.forward(x, lab), F::multilabel_margin_loss(x, lab, Reduction::sum), 0, 0);
  SL_CHECK_THROWS(nn::MultiMarginLoss(3), ValueError,
                  "only p == 1 and p == 2 supported, got p = 3");
  SL_CHECK_THROWS(nn::TripletMarginLoss({.p = 0}), ValueError, "p must be > 0, got 0");
  SL_CHECK_THROWS(mr.forward(x), ValueError, "");
}

TEST_CASE("margin loss error paths") {
  Tensor x = randn({3, 4}), z = randn({3, 4});
  SL_CHECK_THROWS(F::margin_ranking_loss(x, z, ones({4})), ShapeError,
                  "margin_ranking_loss: all inputs should have the same number of dims, got "
                  "input1, input2 and target of shapes [3, 4], [3, 4] and [4]");
  SL_CHECK_THROWS(F::margin_ranking_loss(x, z, ones({3, 4}, {.dtype = DType::i64})), DTypeError,
                  "margin_ranking_loss: target must be floating point, got int64");
  SL_CHECK_THROWS(F::margin_ranking_loss(x, randn({3, 5}), ones({3, 4})), ShapeError,
                  "margin_ranking_loss");
  SL_CHECK_THROWS(F::hinge_embedding_loss(x, ones({4})), ShapeError,
                  "hinge_embedding_loss: input shape [3, 4] and target shape [4] must be equal");
  SL_CHECK_THROWS(F::soft_margin_loss(x, ones({3, 4}, {.dtype = DType::i64})), DTypeError,
                  "soft_margin_loss: target must be floating point");
  SL_CHECK_THROWS(F::multilabel_soft_margin_loss(x, rand({3, 4}), ones({5})), ShapeError,
                  "multilabel_soft_margin_loss: weight of shape [5] must broadcast to the input's "
                  "shape [3, 4]");
  SL_CHECK_THROWS(F::multilabel_soft_margin_loss(full({}, 1.0), full({}, 1.0)), ShapeError,
                  "multilabel_soft_margin_loss: input must have a class dim");
  SL_CHECK_THROWS(F::cosine_embedding_loss(x, z, ones({3, 1})), ShapeError,
                  "cosine_embedding_loss: 0-d or 1-d target tensor expected, multi-target not "
                  "supported; got [3, 1]");
  SL_CHECK_THROWS(F::cosine_embedding_loss(x, z, full({}, 1.0)), ShapeError,
                  "cosine_embedding_loss: a 0-d target expects 1-d inputs, got inputs of shapes "
                  "[3, 4] and [3, 4]");
  SL_CHECK_THROWS(F::cosine_embedding_loss(x, z, ones({2})), ShapeError,
                  "cosine_embedding_loss: inputs of shapes [3, 4] and [3, 4] and target of shape "
                  "[2] do not match");
  SL_CHECK_THROWS(F::triplet_margin_loss(x, z.select(0, 0), x), ShapeError,
                  "triplet_margin_loss: all inputs should have the same number of dims, got "
                  "anchor, positive and negative of shapes [3, 4], [4] and [3, 4]");
  SL_CHECK_THROWS(F::triplet_margin_loss(x, z, x, 1.0, -1.0), ValueError,
                  "triplet_margin_loss: p must be > 0, got -1");
  SL_CHECK_THROWS(F::multi_margin_loss(x, idx({0, 4, 1})), IndexError,
                  "multi_margin_loss: index 4 is out of range for 4 classes");
  SL_CHECK_THROWS(F::multi_margin_loss(x, idx({0, 1})), ShapeError,
                  "multi_margin_loss: input of shape [3, 4] needs a target of 3 class indices ([N] "
                  "or 0-d), got shape [2]");
  SL_CHECK_THROWS(F::multi_margin_loss(x, ones({3})), DTypeError, "multi_margin_loss");
  SL_CHECK_THROWS(F::multi_margin_loss(x, idx({0, 1, 2}), 0), ValueError,
                  "multi_margin_loss: only p == 1 and p == 2 supported, got p = 0");
  SL_CHECK_THROWS(F::multi_margin_loss(x, idx({0, 1, 2}), 1, 1.0, ones({3})), ShapeError,
                  "multi_margin_loss: weight must be [4] (one per class), got [3]");
  SL_CHECK_THROWS(F::multi_margin_loss(randn({2, 3, 4}), idx({0, 1})), ShapeError,
                  "multi_margin_loss: input must be [N, C] or [C], got [2, 3, 4]");
  // PyTorch checks every target value, also those after the first -1
  Tensor bad = from_vector<int64_t>({0, -1, 4, 0, 1, 2, 0, 1, 2, 3, 3, 3}, {3, 4});
  SL_CHECK_THROWS(F::multilabel_margin_loss(x, bad), IndexError,
                  "multilabel_margin_loss: target 4 is out of range (expected -1 <= target < 4)");
  Tensor low = from_vector<int64_t>({0, -2, -1, 0, 1, 2, 0, 1, 2, 3, 3, 3}, {3, 4});
  SL_CHECK_THROWS(F::multilabel_margin_loss(x, low), IndexError,
                  "multilabel_margin_loss: target -2 is out of range");
  SL_CHECK_THROWS(F::multilabel_margin_loss(x, idx({0, 1, 2, 3})), ShapeError,
                  "multilabel_margin_loss: target must have input's shape [3, 4], got [4]");
  SL_CHECK_THROWS(F::multilabel_margin_loss(x, ones({3, 4})), DTypeError,
                  "multilabel_margin_loss: target must be int64 (or int32), got float32");
}
