// CPU kernel of the random family (Note [Random streams]).
//
// Element i depends only on (seed, offset, i), so the loop may compute it in any grouping. It
// walks the output one Philox block at a time: the block (10 rounds) is computed once for the
// L elements that share it, and for normals the Box-Muller radius and angle once per lane pair,
// instead of once per element. Each element's value is still the same expression of the same
// block lanes as the per-element functions of core/random.h, so the output is bit-identical to
// them (tests/core/test_random.cpp checks that against philox_uniform_f32/f64 and philox_normal).
#include <algorithm>
#include <cmath>

#include "core/cpu/loops.h"
#include "core/ops/random.h"
#include "core/random.h"

namespace sl::cpu {
namespace {

template <class T>
inline T store(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<int64_t>(v));
  } else {
    return static_cast<T>(v);
  }
}

// y[i] = store(draw(block lanes, i % L)) for i in [0, n), each Philox block computed once.
template <int L, class T, class Draw>
void fill_by_block(T* y, int64_t n, uint64_t seed, uint64_t offset, const Draw& draw) {
  parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    while (i < end) {
      const uint64_t block = static_cast<uint64_t>(i) / L;
      const Philox4x32 r = philox4x32(seed, offset + block);
      const int64_t stop = std::min<int64_t>(end, static_cast<int64_t>(block + 1) * L);
      for (; i < stop; ++i) y[i] = store<T>(draw(r, static_cast<unsigned>(i % L)));
    }
  });
}

// The same value, hidden from the optimiser: GCC and Clang may merge cos(x) and sin(x) of one x
// into one sincos(x) call, a separate libm routine with no promise to round exactly as sin() and
// cos() do, and the stream is defined by cos() and sin() (philox_normal, core/random.h).
inline double opaque(double x) {
#if defined(__GNUC__) && defined(__x86_64__)
  asm("" : "+x"(x));
#elif defined(__GNUC__) && defined(__aarch64__)
  asm("" : "+w"(x));
#else
  volatile double v = x;
  x = v;
#endif
  return x;
}

// a + b * philox_normal(seed, offset, i) for i in [0, n): per block, each lane pair's radius and
// angle once, then cos for the even element and sin for the odd one.
template <class T>
void fill_normal(T* y, int64_t n, uint64_t seed, uint64_t offset, double a, double b) {
  parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    while (i < end) {
      const uint64_t block = static_cast<uint64_t>(i) / 4;
      const Philox4x32 r = philox4x32(seed, offset + block);
      const auto first = static_cast<int64_t>(block * 4);
      for (unsigned pair = 0; pair < 2; ++pair) {
        const int64_t even = first + 2 * pair, odd = even + 1;
        if (odd < i || even >= end) continue;  // neither element of the pair is ours
        double radius, angle;
        philox_box_muller(r, pair, radius, angle);
        if (even >= i) y[even] = store<T>(a + b * (radius * ::cos(angle)));
        if (odd < end) y[odd] = store<T>(a + b * (radius * ::sin(opaque(angle))));
      }
      i = std::min<int64_t>(end, first + 4);
    }
  });
}

void random_cpu(RandomDist dist, const Tensor& out, uint64_t seed, uint64_t offset, double a,
                double b) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = static_cast<T*>(out.data_ptr());
    const int64_t n = out.numel();
    switch (dist) {
      case RandomDist::uniform:
        if constexpr (std::is_same_v<T, double>) {
          fill_by_block<2>(y, n, seed, offset, [&](const Philox4x32& r, unsigned lane) {
            return a + (b - a) * uint_to_unit_double(r.v[2 * lane], r.v[2 * lane + 1]);
          });
        } else {
          const float fa = static_cast<float>(a), fb = static_cast<float>(b);
          fill_by_block<4>(y, n, seed, offset, [&](const Philox4x32& r, unsigned lane) {
            return static_cast<double>(fa + (fb - fa) * uint_to_unit_float(r.v[lane]));
          });
        }
        break;
      case RandomDist::normal:
        fill_normal(y, n, seed, offset, a, b);
        break;
      case RandomDist::bernoulli: {
        const float p = static_cast<float>(a);
        fill_by_block<4>(y, n, seed, offset, [&](const Philox4x32& r, unsigned lane) {
          return uint_to_unit_float(r.v[lane]) < p ? 1.0 : 0.0;
        });
        break;
      }
      case RandomDist::randint:
        fill_by_block<2>(y, n, seed, offset, [&](const Philox4x32& r, unsigned lane) {
          double u = std::floor(uint_to_unit_double(r.v[2 * lane], r.v[2 * lane + 1]) * (b - a));
          return a + (u < b - a ? u : b - a - 1);
        });
        break;
    }
  });
}

SL_REGISTER_KERNEL(random_kernel, DeviceKind::cpu, &random_cpu);

}  // namespace
}  // namespace sl::cpu
