// The CPU random kernel (core/cpu/random.cpp) against the per-element definitions of Note
// [Random streams] (core/random.h), bit for bit: the kernel computes each Philox block once for
// the elements that share it, and this pins that the grouping changes no bit, for every
// distribution and dtype, sizes that end mid-block, generator offsets (including one past 2^32,
// where the counter's high word is used), several seeds, 1 and 2 threads (chunks that start
// mid-block) and a non-contiguous destination.
#include <cstring>
#include <type_traits>

#include "core/half.h"
#include "core/parallel.h"
#include "core/random.h"
#include "support/testing.h"

using namespace sl;

namespace {

// What the kernel stores for the double value v (the conversions of core/cpu/random.cpp).
template <class T>
T stored(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<int64_t>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Element i of each distribution, straight from the definitions (RandomDist in core/ops/random.h).
template <class T>
T normal_at(uint64_t seed, uint64_t off, uint64_t i, double mean, double std) {
  return stored<T>(mean + std * philox_normal(seed, off, i));
}
template <class T>
T uniform_at(uint64_t seed, uint64_t off, uint64_t i, double a, double b) {
  if constexpr (std::is_same_v<T, double>) {
    return a + (b - a) * philox_uniform_f64(seed, off, i);
  } else {
    const float fa = static_cast<float>(a), fb = static_cast<float>(b);
    return stored<T>(static_cast<double>(fa + (fb - fa) * philox_uniform_f32(seed, off, i)));
  }
}

// Index of the first element whose bytes differ from want(i), or -1.
template <class T, class Want>
int64_t first_difference(const Tensor& t, const Want& want) {
  Tensor c = t.contiguous();
  REQUIRE(c.element_size() == sizeof(T));
  const auto* got = static_cast<const unsigned char*>(c.data_ptr());
  for (int64_t i = 0; i < c.numel(); ++i) {
    const T w = want(static_cast<uint64_t>(i));
    if (std::memcmp(got + i * sizeof(T), &w, sizeof(T)) != 0) return i;
  }
  return -1;
}

template <class T>
void check_normal_and_uniform(DType dt, int64_t n, uint64_t seed, uint64_t counter0) {
  CAPTURE(dtype_name(dt));
  Generator g(seed);
  g.reserve(counter0);  // the generator's counter starts at counter0: the fill draws from there
  Tensor t = empty({n}, {.dtype = dt});
  t.normal_(0.25, 1.5, &g);
  CHECK(first_difference<T>(
            t, [&](uint64_t i) { return normal_at<T>(seed, counter0, i, 0.25, 1.5); }) == -1);
  const uint64_t off = g.state().offset;  // after the normals' (n + 3) / 4 blocks
  t.uniform_(-2.0, 3.0, &g);
  CHECK(first_difference<T>(
            t, [&](uint64_t i) { return uniform_at<T>(seed, off, i, -2.0, 3.0); }) == -1);
}

}  // namespace

TEST_CASE("random kernels: every element is its per-element definition, bit for bit") {
  const int threads_before = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t n : {1, 3, 5, 4097, 10007}) {
      for (uint64_t seed : {0ull, 42ull, 0x8000000000000005ull}) {
        for (uint64_t counter0 : {0ull, 7ull, 0xFFFFFFFFull}) {
          CAPTURE(threads);
          CAPTURE(n);
          CAPTURE(seed);
          CAPTURE(counter0);
          check_normal_and_uniform<float>(DType::f32, n, seed, counter0);
          check_normal_and_uniform<double>(DType::f64, n, seed, counter0);
          check_normal_and_uniform<Half>(DType::f16, n, seed, counter0);
          check_normal_and_uniform<BFloat16>(DType::bf16, n, seed, counter0);
          Generator g(seed);
          g.reserve(counter0);
          Tensor b = empty({n}, {.dtype = DType::b8});
          b.bernoulli_(0.3, &g);
          CHECK(first_difference<bool>(b, [&](uint64_t i) {
                  return philox_uniform_f32(seed, counter0, i) < 0.3f;
                }) == -1);
          const uint64_t off = g.state().offset;
          Tensor r = randint(-5, 1000, {n}, {.dtype = DType::i64}, &g);
          CHECK(first_difference<int64_t>(r, [&](uint64_t i) {
                  double u = std::floor(philox_uniform_f64(seed, off, i) * 1005.0);
                  return static_cast<int64_t>(-5.0 + (u < 1005.0 ? u : 1004.0));
                }) == -1);
        }
      }
    }
  }
  set_num_threads(threads_before);
}

TEST_CASE("random kernels: a non-contiguous tensor gets the stream in its logical order") {
  Generator g(9);
  Tensor t = empty({7, 9}).t();  // [9, 7], strides (1, 9)
  t.normal_(0.0, 1.0, &g);
  CHECK(first_difference<float>(
            t, [](uint64_t i) { return normal_at<float>(9, 0, i, 0.0, 1.0); }) == -1);
}
