// CUDA glue of the random family (Note [Random streams]).
#include "core/ops/random.h"
#include "core/cuda/kernels.h"
#include "core/cuda/runtime.h"

namespace sl::cuda {
namespace {

void random_cuda(RandomDist dist, const Tensor& out, uint64_t seed, uint64_t offset, double a,
                 double b) {
  RandomCode code = RandomCode::uniform;
  switch (dist) {
    case RandomDist::uniform:
      code = RandomCode::uniform;
      break;
    case RandomDist::normal:
      code = RandomCode::normal;
      break;
    case RandomDist::bernoulli:
      code = RandomCode::bernoulli;
      break;
    case RandomDist::randint:
      code = RandomCode::randint;
      break;
  }
  DeviceGuard g(out.device());
  launch_random(code, out.dtype(), out.data_ptr(), out.numel(), seed, offset, a, b,
                compute_stream(out.device()));
}

SL_REGISTER_KERNEL(random_kernel, DeviceKind::cuda, &random_cuda);

}  // namespace
}  // namespace sl::cuda
