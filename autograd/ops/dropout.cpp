// Differentiable dropout: the mask kernel's output and mask, with the backward beside it.
#include "autograd/ops/dropout.h"

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/dropout.h"

namespace sl {

namespace {

Tensor dropout_with(const Tensor& input, double p, uint64_t seed, uint64_t offset) {
  auto [out, mask] = ops::dropout_forward(input, p, seed, offset);
  if (needs_grad(input)) {
    record(
        "NativeDropoutBackward", {input}, {&out},
        [mask = mask, p](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          if (!GradMode::is_enabled()) return {ops::dropout_backward(g, mask, p)};
          // create_graph: the same mask and scale as recorded ops (Note [Double backward])
          return {where(mask, mul(g, 1.0 / (1.0 - p)),
                        zeros({}, {.dtype = g.dtype(), .device = g.device()}))};
        },
        DoubleBackward::supported);
  }
  return out;
}

/// Checks shared by both forms; true when the result is input itself / zeros without a mask.
bool trivial_dropout(const char* op, const Tensor& input, double p) {
  ops::check_defined(op, input);
  ops::check_dropout_p(op, p);
  SL_CHECK_DTYPE(is_floating(input.dtype()), op, ": expected a floating input, got ",
                 dtype_name(input.dtype()));
  return p == 0.0 || p == 1.0;
}

}  // namespace

Tensor dropout(const Tensor& input, double p, bool training, Generator* gen) {
  if (trivial_dropout("dropout", input, p) || !training) {
    return (training && p == 1.0) ? mul(input, Scalar(0.0)) : input;
  }
  Generator& g = gen ? *gen : default_generator();
  uint64_t seed = g.seed();
  uint64_t offset = g.reserve(ops::dropout_blocks(input.numel()));
  return dropout_with(input, p, seed, offset);
}

Tensor dropout_seeded(const Tensor& input, double p, const GeneratorState& state) {
  if (trivial_dropout("dropout_seeded", input, p)) {
    return p == 1.0 ? mul(input, Scalar(0.0)) : input;
  }
  return dropout_with(input, p, state.seed, state.offset);
}

}  // namespace sl
