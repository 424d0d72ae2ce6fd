// The attention fixture (tests/fixtures/ops/attention.safetensors, tools/gen_op_fixtures.py) as
// both attention test files run it: a case's scaled_dot_product_attention call, and its PyTorch
// parity check through the backward.
#pragma once

#include <optional>
#include <string>

#include "ops/fixtures.h"
#include "support/testing.h"

namespace sl::testing {

/// scaled_dot_product_attention on q, k, v with case c's mask (floating masks in dt), scale
/// (<= 0: the default) and causal flag, under the current attention backend.
inline Tensor attention_fixture_case(const Fixture& fx, const std::string& c, const Tensor& q,
                                     const Tensor& k, const Tensor& v, DType dt) {
  Tensor mask = fx.has(c, "mask") ? fx.get(c, "mask") : Tensor();
  if (mask.defined() && mask.dtype() != DType::b8) mask = mask.to(dt);
  double scale = fx.number(c, "scale");
  return scaled_dot_product_attention(q, k, v, mask, 0.0, fx.ints(c, "causal")[0] != 0,
                                      scale > 0 ? std::optional<double>(scale) : std::nullopt);
}

/// Runs case c in float32 on fresh leaves (the fixture's tensors are shared, and gradients
/// accumulate), checks the output and, after backward(gy), the gradients of q, k and v against
/// PyTorch's; returns the output. Tolerance: float32 rounding of the products and sums over at
/// most a few dozen terms.
inline Tensor check_attention_fixture_parity(const Fixture& fx, const std::string& c) {
  Tensor q = fx.get(c, "q").detach().requires_grad_();
  Tensor k = fx.get(c, "k").detach().requires_grad_();
  Tensor v = fx.get(c, "v").detach().requires_grad_();
  Tensor y = attention_fixture_case(fx, c, q, k, v, DType::f32);
  SL_CHECK_CLOSE(y, fx.get(c, "y"), 1e-5, 1e-6);
  y.backward(fx.get(c, "gy"));
  SL_CHECK_CLOSE(q.grad(), fx.get(c, "grad_q"), 1e-5, 1e-6);
  SL_CHECK_CLOSE(k.grad(), fx.get(c, "grad_k"), 1e-5, 1e-6);
  SL_CHECK_CLOSE(v.grad(), fx.get(c, "grad_v"), 1e-5, 1e-6);
  return y;
}

}  // namespace sl::testing
