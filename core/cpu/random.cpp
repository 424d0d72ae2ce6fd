// CPU kernel of the random family (Note [Random streams]).
#include <cmath>

#include "core/cpu/loops.h"
#include "core/ops/random.h"
#include "core/random.h"

namespace sl::cpu {
namespace {

void random_cpu(RandomDist dist, const Tensor& out, uint64_t seed, uint64_t offset, double a,
                double b) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = static_cast<T*>(out.data_ptr());
    const bool f64 = std::is_same_v<T, double>;
    parallel_for(0, out.numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        auto u = static_cast<uint64_t>(i);
        double v = 0;
        switch (dist) {
          case RandomDist::uniform:
            v = f64 ? a + (b - a) * philox_uniform_f64(seed, offset, u)
                    : static_cast<double>(static_cast<float>(a) +
                                          (static_cast<float>(b) - static_cast<float>(a)) *
                                              philox_uniform_f32(seed, offset, u));
            break;
          case RandomDist::normal:
            v = a + b * philox_normal(seed, offset, u);
            break;
          case RandomDist::bernoulli:
            v = philox_uniform_f32(seed, offset, u) < static_cast<float>(a) ? 1.0 : 0.0;
            break;
          case RandomDist::randint: {
            double r = std::floor(philox_uniform_f64(seed, offset, u) * (b - a));
            v = a + (r < b - a ? r : b - a - 1);
            break;
          }
        }
        if constexpr (std::is_same_v<T, bool>) {
          y[i] = v != 0.0;
        } else if constexpr (std::is_integral_v<T>) {
          y[i] = static_cast<T>(static_cast<int64_t>(v));
        } else {
          y[i] = static_cast<T>(v);
        }
      }
    });
  });
}

SL_REGISTER_KERNEL(random_kernel, DeviceKind::cpu, &random_cpu);

}  // namespace
}  // namespace sl::cpu
