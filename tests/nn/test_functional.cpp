// nn::functional spellings that are re-exports: scaled_dot_product_attention reached through
// the F:: name, against PyTorch's documented SDPA math (tests/fixtures/ops/attention.safetensors,
// tools/gen_op_fixtures.py) and against an unfused composition computed here in f64.
#include <cmath>
#include <optional>

#include "fixture.h"
#include "nn/functional.h"
#include "nn/serialize/safetensors.h"

using namespace sl;
namespace F = sl::nn::functional;

namespace {

// The ops fixture's case names: the keys "<case>/y".
std::vector<std::string> attention_cases(const nn::StateDict& all) {
  std::vector<std::string> out;
  for (const auto& [key, t] : all) {
    (void)t;
    const size_t slash = key.find('/');
    if (slash != std::string::npos && key.substr(slash) == "/y")
      out.push_back(key.substr(0, slash));
  }
  return out;
}

}  // namespace

TEST_CASE("F::scaled_dot_product_attention matches PyTorch's SDPA fixture") {
  const std::string dir = std::string(SL_NN_FIXTURES) + "/../ops";
  const nn::StateDict fx = serialize::convert_state_dict<nn::StateDict>(
      serialize::load_safetensors(dir + "/attention.safetensors"));
  const auto cases = attention_cases(fx);
  REQUIRE(cases.size() == 8);  // the 8 cases of gen_op_fixtures.py's gen_attention
  for (const auto& c : cases) {
    CAPTURE(c);
    Tensor q = fx.at(c + "/q"), k = fx.at(c + "/k"), v = fx.at(c + "/v");
    Tensor mask = fx.contains(c + "/mask") ? fx.at(c + "/mask") : Tensor();
    const double scale = fx.at(c + "/scale").item<double>();
    const bool causal = fx.at(c + "/causal").item<int64_t>() != 0;
    const std::optional<double> sc = scale > 0 ? std::optional<double>(scale) : std::nullopt;
    // PyTorch 2.x argument order: (q, k, v, attn_mask, dropout_p, is_causal, scale).
    Tensor y = F::scaled_dot_product_attention(q, k, v, mask, 0.0, causal, sc);
    // f32: sums of at most 8 products of O(1) values and a softmax over <= 7 keys; float32
    // reassociation against PyTorch's kernels stays under 1e-6 absolute (as tests/ops).
    SL_CHECK_CLOSE(y, fx.at(c + "/y"), 1e-5, 1e-6);
  }
}

TEST_CASE("F::scaled_dot_product_attention_with_weights equals the unfused composition") {
  manual_seed(41);
  // f64 so the composition below and the op agree to rounding of a few dozen terms.
  Tensor q = randn({2, 3, 4, 5}, {.dtype = DType::f64});
  Tensor k = randn({2, 3, 6, 5}, {.dtype = DType::f64});
  Tensor v = randn({2, 3, 6, 2}, {.dtype = DType::f64});
  Tensor additive = randn({4, 6}, {.dtype = DType::f64});
  // Independently: softmax(q k^T / sqrt(E) + mask) with the causal triangle written out as -inf
  // where key j > query i, then @ v (PyTorch 2.x's documented math).
  std::vector<double> tri(24);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) tri[static_cast<size_t>(i * 6 + j)] = j > i ? -INFINITY : 0.0;
  Tensor scores =
      matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(5.0)) + additive + from_vector(tri, {4, 6});
  Tensor w_ref = softmax(scores, -1);
  Tensor y_ref = matmul(w_ref, v);
  auto [y, w] = F::scaled_dot_product_attention_with_weights(q, k, v, additive, 0.0, true);
  // f64: both sides round O(10) operations on O(1) values: 1e-12 leaves a wide margin.
  SL_CHECK_CLOSE(w, w_ref, 1e-12, 1e-12);
  SL_CHECK_CLOSE(y, y_ref, 1e-12, 1e-12);
  SL_CHECK_CLOSE(F::scaled_dot_product_attention(q, k, v, additive, 0.0, true), y_ref, 1e-12,
                 1e-12);
  // An explicit scale replaces 1/sqrt(E).
  Tensor y2 = F::scaled_dot_product_attention(q, k, v, Tensor(), 0.0, false, 0.25);
  SL_CHECK_CLOSE(y2, matmul(softmax(matmul(q, k.transpose(-2, -1)) * 0.25, -1), v), 1e-12, 1e-12);
  SL_CHECK_THROWS(F::scaled_dot_product_attention(q, k, randn({2, 3, 5, 2}), Tensor()), ShapeError,
                  "differ in the sequence length");
}
