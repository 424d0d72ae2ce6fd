// scaled_dot_product_attention: PyTorch parity (fixtures: the documented math of PyTorch 2's
// SDPA evaluated with torch 1.13, tools/gen_op_fixtures.py), gradcheck in f64, mask
// conventions, dropout, error paths.
#include <cmath>

#include "ops/attention_fixture.h"
#include "support/testing.h"

using namespace sl;
using sl::testing::Fixture;

using sl::testing::attention_fixture_case;

TEST_CASE("attention: PyTorch parity of outputs and gradients (f32)") {
  Fixture fx("attention");
  auto cases = fx.cases();
  REQUIRE(cases.size() == 8);
  for (const auto& c : cases) {
    CAPTURE(c);
    sl::testing::check_attention_fixture_parity(fx, c);
  }
}

TEST_CASE("attention: gradcheck (f64) for every fixture option combination") {
  Fixture fx("attention");
  for (const auto& c : fx.cases()) {
    CAPTURE(c);
    Tensor q = fx.get_f64(c, "q").requires_grad_(), k = fx.get_f64(c, "k").requires_grad_();
    Tensor v = fx.get_f64(c, "v").requires_grad_();
    CHECK(gradcheck(
        [&](const TensorList& in) {
          return attention_fixture_case(fx, c, in[0], in[1], in[2], DType::f64);
        },
        {q, k, v}));
  }
}

TEST_CASE("attention: bool, additive and causal masks agree with each other") {
  manual_seed(31);
  Tensor q = randn({2, 4, 6}), k = randn({2, 6, 6}), v = randn({2, 6, 3});
  Tensor keep = rand({4, 6}).gt(0.4);
  keep.select(1, 0).fill_(1);
  Tensor additive = zeros({4, 6}).masked_fill(keep.logical_not(), -INFINITY);
  SL_CHECK_CLOSE(scaled_dot_product_attention(q, k, v, keep),
                 scaled_dot_product_attention(q, k, v, additive), 0, 0);
  std::vector<int64_t> lower(24);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) lower[static_cast<size_t>(i * 6 + j)] = j <= i;
  Tensor tril = from_vector(lower, {4, 6}).gt(0);
  SL_CHECK_CLOSE(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true),
                 scaled_dot_product_attention(q, k, v, tril), 0, 0);
  // every key masked for a query: NaN in that row only, as PyTorch
  Tensor none = ones({4, 6}).gt(0);
  none.select(0, 2).fill_(0);
  Tensor y = scaled_dot_product_attention(q, k, v, none);
  auto yv = y.to_vector<float>();
  for (size_t i = 0; i < yv.size(); ++i) CHECK(std::isnan(yv[i]) == ((i / 3) % 4 == 2));
}

TEST_CASE("attention: dropout drops attention weights from the generator's stream") {
  manual_seed(32);
  Tensor q = randn({3, 5, 4}), k = randn({3, 5, 4}), v = randn({3, 5, 2});
  Generator a(77), b(77);
  auto [y, w] =
      scaled_dot_product_attention_with_weights(q, k, v, Tensor(), 0.4, false, std::nullopt, &a);
  Tensor p = attention_softmax(matmul(q, k.transpose(-2, -1)), Tensor(), false, 0.5);
  Tensor pd = dropout(p, 0.4, true, &b);
  SL_CHECK_CLOSE(w, pd, 0, 0);
  SL_CHECK_CLOSE(y, matmul(pd, v), 1e-6, 1e-7);
  Tensor y0 = scaled_dot_product_attention(q, k, v);
  SL_CHECK_CLOSE(y0, matmul(p, v), 1e-6, 1e-7);
}

TEST_CASE("attention: error paths") {
  Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 6});
  SL_CHECK_THROWS(scaled_dot_product_attention(randn({4}), k, v), ShapeError, "at least 2 dims");
  SL_CHECK_THROWS(scaled_dot_product_attention(q, randn({2, 5, 3}), v), ShapeError,
                  "differ in the embedding dim");
  SL_CHECK_THROWS(scaled_dot_product_attention(q, k, randn({2, 4, 6})), ShapeError,
                  "differ in the sequence length");
  SL_CHECK_THROWS(scaled_dot_product_attention(q, k, v, ones({3, 4}).gt(0)), ShapeError,
                  "scaled_dot_product_attention: attn_mask of shape [3, 4] does not broadcast to "
                  "the attention scores' shape [2, 3, 5]");
  SL_CHECK_THROWS(scaled_dot_product_attention(q, k, v, ones({3, 5}, {.dtype = DType::i64})),
                  DTypeError, "attn_mask must be bool or floating");
  SL_CHECK_THROWS(scaled_dot_product_attention(q, k, v, Tensor(), 1.0), ValueError,
                  "dropout_p must be in [0, 1)");
  SL_CHECK_THROWS(scaled_dot_product_attention(q, k.to(DType::f64), v), DTypeError,
                  "one floating dtype");
}
