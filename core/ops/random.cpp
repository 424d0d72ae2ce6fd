#include "core/ops/random.h"

#include "core/ops/copy.h"
#include "core/random.h"

namespace sl {

SL_DEFINE_KERNEL(random_kernel, void(RandomDist dist, const Tensor& out, uint64_t seed,
                                     uint64_t offset, double a, double b));

namespace ops {

void random_fill_(const Tensor& t, RandomDist dist, double a, double b, Generator* gen) {
  check_defined("random", t);
  Generator& g = gen ? *gen : default_generator();
  auto n = static_cast<uint64_t>(t.numel());
  // 64-bit draws (f64 uniform, randint) use 2 per block, the others 4 per block.
  bool wide = dist == RandomDist::randint || (dist == RandomDist::uniform && t.dtype() == DType::f64);
  uint64_t blocks = wide ? (n + 1) / 2 : (n + 3) / 4;
  GeneratorState st = g.state();
  uint64_t offset = g.reserve(blocks);
  Tensor out = t.is_contiguous() ? t : empty_like(t);
  if (n > 0) random_kernel(t.device().kind, dist, out, st.seed, offset, a, b);
  if (!out.is_same(t)) copy_(t, out);
  t.bump_version();
}

}  // namespace ops
}  // namespace sl
