// Counter-based random numbers (Philox4x32-10) and the Generator that hands out counters.
//
// Note [Random streams]
// A random op reserves a range of counters from a Generator {seed, offset}: element i of its
// (contiguous, row-major) output is computed from philox(key = seed, counter = offset + i / L)
// where L elements share one 128-bit Philox output (L = 4 for 32-bit uniforms and normals,
// L = 2 for 64-bit ones). Because element i depends only on (seed, offset, i), the stream is the
// same on CPU and CUDA, for any thread count, and a saved {seed, offset} restores it exactly.
// The per-element transforms below (uniform, normal) are shared by both backends.
#pragma once

#include <cmath>
#include <cstdint>
#include <mutex>

#if defined(__CUDACC__)
#define SL_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SL_HOST_DEVICE inline
#endif

namespace sl {

struct Philox4x32 {
  uint32_t v[4];
};

/// One Philox4x32-10 block for a 64-bit key and a 64-bit counter.
SL_HOST_DEVICE Philox4x32 philox4x32(uint64_t key, uint64_t counter) {
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4x32{{c0, c1, c2, c3}};
}

/// Uniform float in [0, 1) with 24 random bits.
SL_HOST_DEVICE float uint_to_unit_float(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}
/// Uniform double in [0, 1) with 53 random bits.
SL_HOST_DEVICE double uint_to_unit_double(uint32_t hi, uint32_t lo) {
  uint64_t x = (static_cast<uint64_t>(hi) << 32 | lo) >> 11;
  return static_cast<double>(x) * (1.0 / 9007199254740992.0);
}

/// Element i of a 32-bit uniform stream in [0, 1): lane i % 4 of block offset + i / 4.
SL_HOST_DEVICE float philox_uniform_f32(uint64_t seed, uint64_t offset, uint64_t i) {
  Philox4x32 r = philox4x32(seed, offset + i / 4);
  return uint_to_unit_float(r.v[i % 4]);
}
/// Element i of a 64-bit uniform stream in [0, 1): lanes (2j, 2j+1), j = i % 2, of block
/// offset + i / 2.
SL_HOST_DEVICE double philox_uniform_f64(uint64_t seed, uint64_t offset, uint64_t i) {
  Philox4x32 r = philox4x32(seed, offset + i / 2);
  unsigned j = static_cast<unsigned>(i % 2) * 2;
  return uint_to_unit_double(r.v[j], r.v[j + 1]);
}
/// The Box-Muller radius sqrt(-2 log u1) and angle 2 pi u2 of lane pair `pair` (0: lanes 0, 1;
/// 1: lanes 2, 3) of a Philox block, u1 in (0, 1] so the log is finite. philox_normal and the
/// kernels that compute a block once for its four normals share it (Note [Random streams]).
SL_HOST_DEVICE void philox_box_muller(const Philox4x32& r, unsigned pair, double& radius,
                                      double& angle) {
  double u1 = (static_cast<double>(r.v[2 * pair]) + 1.0) * (1.0 / 4294967296.0);
  double u2 = static_cast<double>(r.v[2 * pair + 1]) * (1.0 / 4294967296.0);
  radius = ::sqrt(-2.0 * ::log(u1));
  angle = 6.283185307179586476925 * u2;
}
/// Element i of a standard normal stream (Box-Muller on lane pairs of block offset + i / 4):
/// lanes (0,1) give elements 4k, 4k+1 (radius * cos, radius * sin); lanes (2,3) give 4k+2, 4k+3.
/// Computed in double so CPU and GPU agree to the last float bit in practice. The stream is
/// defined by separate cos() and sin() calls (a fused sincos may round differently).
SL_HOST_DEVICE double philox_normal(uint64_t seed, uint64_t offset, uint64_t i) {
  Philox4x32 r = philox4x32(seed, offset + i / 4);
  double radius, angle;
  philox_box_muller(r, static_cast<unsigned>(i % 4) / 2, radius, angle);
  return (i % 2 == 0) ? radius * ::cos(angle) : radius * ::sin(angle);
}

/// The exactly restorable state of a Generator.
struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  bool operator==(const GeneratorState&) const = default;
};

/// Hands out Philox counter ranges; thread-safe. One default generator serves CPU and CUDA.
class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) : state_{seed, 0} {}
  /// Resets to `seed` with offset 0.
  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  GeneratorState state() const;
  void set_state(const GeneratorState& s);
  /// Reserves n Philox blocks; returns the first counter.
  uint64_t reserve(uint64_t n_blocks);

 private:
  mutable std::mutex mu_;
  GeneratorState state_;
};

/// The process-wide default generator used when an op gets no generator.
Generator& default_generator();
/// default_generator().manual_seed(seed), as torch.manual_seed.
void manual_seed(uint64_t seed);

}  // namespace sl
