// The "random" family: fills from the Philox stream (Note [Random streams]).
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

enum class RandomDist : uint8_t {
  uniform,    // a + (b - a) * U
  normal,     // a + b * N(0, 1)
  bernoulli,  // U < a ? 1 : 0
  randint,    // a + floor(U * (b - a)) with a 64-bit U
};

/// Fills contiguous `out` with element i drawn from (seed, offset, i) as Note [Random streams]
/// describes; a and b are the distribution's parameters.
SL_DECLARE_KERNEL(random_kernel, void(RandomDist dist, const Tensor& out, uint64_t seed,
                                      uint64_t offset, double a, double b));

namespace ops {
/// Reserves counters from gen (default generator when null) and fills t (any layout) in place.
void random_fill_(const Tensor& t, RandomDist dist, double a, double b, Generator* gen);
}  // namespace ops

}  // namespace sl
