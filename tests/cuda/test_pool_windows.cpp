// The window rule of the CUDA pool backward kernels (core/cuda/pool_windows.h), on the host so it
// runs on every machine: the output windows over an input position against brute force for every
// small geometry ops::pool2d_geometry accepts (kernel, stride, padding, dilation, ceil_mode,
// size), and max-pool backward's gather, done here with the same visitor and the same additions
// as the CUDA kernel, against the CPU's scatter bit for bit (Note [Max-pool backward order]).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "core/cuda/pool_windows.h"
#include "core/ops/pool.h"
#include "support/testing.h"

using namespace sl;
using sl::cuda::for_each_window_with_tap;
using sl::cuda::window_extent;
using sl::cuda::window_has_tap;
using sl::cuda::window_range;

namespace {

/// The geometry of a pool over `input`, or out_h = 0 where ops::pool2d_geometry rejects it.
Pool2dGeometry geometry_or_none(const Tensor& input, ExpandingArray<2> k, ExpandingArray<2> s,
                                ExpandingArray<2> p, ExpandingArray<2> d, bool ceil_mode) {
  try {
    return ops::pool2d_geometry("test", input, k, s, p, d, ceil_mode);
  } catch (const Error&) {
    Pool2dGeometry none;
    none.out_h = 0;
    return none;
  }
}

/// Outputs in [first, min(out, end)) whose window has a tap at x, by enumerating every tap.
std::vector<int64_t> taps_brute(int64_t x, int64_t k, int64_t s, int64_t p, int64_t d, int64_t out,
                                int64_t first = 0, int64_t end = INT64_MAX) {
  std::vector<int64_t> r;
  for (int64_t o = first; o < std::min(out, end); ++o) {
    for (int64_t i = 0; i < k; ++i) {
      if (o * s - p + i * d == x) {
        r.push_back(o);
        break;
      }
    }
  }
  return r;
}

/// The same from window_range and window_has_tap.
std::vector<int64_t> taps_rule(int64_t x, int64_t k, int64_t s, int64_t p, int64_t d, int64_t out) {
  int64_t lo, hi;
  window_range(x, window_extent(k, d), s, p, out, lo, hi);
  std::vector<int64_t> r;
  for (int64_t o = lo; o <= hi; ++o) {
    if (window_has_tap(x, o, s, p, d)) r.push_back(o);
  }
  return r;
}

}  // namespace

TEST_CASE("pool windows: the windows with a tap at each position, against brute force") {
  int64_t geometries = 0, overlapping = 0;
  for (int64_t n = 1; n <= 13; ++n) {
    const Tensor input = empty({1, n, 1});
    for (int64_t k = 1; k <= 5; ++k) {
      for (int64_t s = 1; s <= 4; ++s) {
        for (int64_t d = 1; d <= 3; ++d) {
          for (int64_t p = 0; p <= k / 2; ++p) {
            for (bool ceil_mode : {false, true}) {
              const Pool2dGeometry g =
                  geometry_or_none(input, {k, 1}, {s, 1}, {p, 0}, {d, 1}, ceil_mode);
              if (g.out_h == 0) continue;
              ++geometries;
              overlapping += window_extent(k, d) > s;
              CAPTURE(n);
              CAPTURE(k);
              CAPTURE(s);
              CAPTURE(d);
              CAPTURE(p);
              CAPTURE(ceil_mode);
              for (int64_t x = 0; x < n; ++x) {
                CAPTURE(x);
                CHECK(taps_rule(x, k, s, p, d, g.out_h) == taps_brute(x, k, s, p, d, g.out_h));
                // extent k (average pooling's windows, no dilation): exactly the spans over x
                int64_t lo, hi;
                window_range(x, k, s, p, g.out_h, lo, hi);
                for (int64_t o = 0; o < g.out_h; ++o) {
                  const bool covers = o * s - p <= x && x < o * s - p + k;
                  CHECK(covers == (lo <= o && o <= hi));
                }
              }
            }
          }
        }
      }
    }
  }
  // the sweep reached the overlapping, dilated and ceil_mode geometries it is for
  CHECK(geometries > 1000);
  CHECK(overlapping > 500);
}

TEST_CASE("pool windows: positions far from zero, int64 arithmetic") {
  // a plane of 3e10 positions along one dimension (no tensor: the rule is arithmetic only)
  const int64_t n = int64_t{30} << 30, k = 3, s = 2, p = 1, d = 1;
  const int64_t out = (n + 2 * p - d * (k - 1) - 1) / s + 1;
  for (int64_t x : {n - 1, n - 2, n - 3, n / 2, n / 2 + 1}) {
    CAPTURE(x);
    // windows outside [x / s - k, x / s + k) cannot reach x
    CHECK(taps_rule(x, k, s, p, d, out) == taps_brute(x, k, s, p, d, out, x / s - k, x / s + k));
    CHECK(!taps_rule(x, k, s, p, d, out).empty());
  }
}

TEST_CASE("pool windows: the 2-d visitor goes through the windows over (h, w) in output order") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> size(1, 12), kd(1, 4), sd(1, 3), dd(1, 2);
  int64_t checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t H = size(rng), W = size(rng);
    const int64_t kh = kd(rng), kw = kd(rng), sh = sd(rng), sw = sd(rng);
    const int64_t ph = std::uniform_int_distribution<int64_t>(0, kh / 2)(rng);
    const int64_t pw = std::uniform_int_distribution<int64_t>(0, kw / 2)(rng);
    const int64_t dh = dd(rng), dw = dd(rng);
    const Pool2dGeometry g =
        geometry_or_none(empty({1, H, W}), {kh, kw}, {sh, sw}, {ph, pw}, {dh, dw}, trial % 2 == 1);
    if (g.out_h == 0) continue;
    ++checked;
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t w = 0; w < W; ++w) {
        std::vector<int64_t> want, got;
        for (int64_t oh = 0; oh < g.out_h; ++oh) {
          for (int64_t ow = 0; ow < g.out_w; ++ow) {
            bool row = false, col = false;
            for (int64_t i = 0; i < g.kh; ++i) {
              row = row || oh * g.stride_h - g.pad_h + i * g.dilation_h == h;
            }
            for (int64_t j = 0; j < g.kw; ++j) {
              col = col || ow * g.stride_w - g.pad_w + j * g.dilation_w == w;
            }
            if (row && col) want.push_back(oh * g.out_w + ow);
          }
        }
        for_each_window_with_tap(h, w, g, [&](int64_t o) { got.push_back(o); });
        CAPTURE(H);
        CAPTURE(W);
        CAPTURE(h);
        CAPTURE(w);
        CHECK(got == want);
      }
    }
  }
  CHECK(checked > 100);
}

namespace {

/// max_pool2d backward on the CPU (autograd), then the CUDA kernel's gather done on the host from
/// the same indices and upstream gradient; the two must agree bit for bit.
template <class T>
void check_gather_matches_scatter(const Shape& in_shape, ExpandingArray<2> k, ExpandingArray<2> s,
                                  ExpandingArray<2> p, ExpandingArray<2> d, bool ceil_mode,
                                  std::mt19937& rng) {
  const DType dt = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  int64_t numel = 1;
  for (int64_t e : in_shape) numel *= e;
  // few distinct values: many ties, so one input element is the maximum of many windows
  std::uniform_int_distribution<int> level(0, 3);
  std::vector<T> xv(static_cast<size_t>(numel));
  for (T& v : xv) v = static_cast<T>(level(rng));
  Tensor x = from_vector(xv, in_shape).requires_grad_();
  const Pool2dGeometry g = ops::pool2d_geometry("test", x, k, s, p, d, ceil_mode);
  auto [y, ind] = max_pool2d_with_indices(x, k, s, p, d, ceil_mode);
  // upstream gradients of widely different magnitudes, so that the order of additions shows
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> scale(-20, 20);
  std::vector<T> upv(static_cast<size_t>(y.numel()));
  for (T& v : upv) v = static_cast<T>(std::ldexp(normal(rng), scale(rng)));
  y.backward(from_vector(upv, y.sizes()));
  REQUIRE(x.grad().defined());
  REQUIRE(x.grad().dtype() == dt);

  const int64_t H = in_shape[in_shape.size() - 2], W = in_shape.back();
  const int64_t P = numel / (H * W), HWo = g.out_h * g.out_w;
  const std::vector<int64_t> indv = ind.contiguous().to_vector<int64_t>();
  std::vector<T> gather(static_cast<size_t>(numel));
  for (int64_t pl = 0; pl < P; ++pl) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t w = 0; w < W; ++w) {
        const int64_t at = h * W + w;
        T sum = 0;
        for_each_window_with_tap(h, w, g, [&](int64_t o) {
          if (indv[static_cast<size_t>(pl * HWo + o)] == at) {
            sum += upv[static_cast<size_t>(pl * HWo + o)];
          }
        });
        gather[static_cast<size_t>(pl * H * W + at)] = sum;
      }
    }
  }
  const std::vector<T> scatter = x.grad().contiguous().to_vector<T>();
  REQUIRE(scatter.size() == gather.size());
  int64_t differ = 0;
  for (size_t i = 0; i < gather.size(); ++i) {
    differ += std::memcmp(&gather[i], &scatter[i], sizeof(T)) != 0;
  }
  CHECK(differ == 0);
}

}  // namespace

TEST_CASE("pool windows: max-pool backward's gather is the CPU's scatter, bit for bit") {
  std::mt19937 rng(11);
  auto run = [&](auto z) {
    using T = decltype(z);
    CAPTURE(sizeof(T));
    // ResNet's stem: kernel 3, stride 2, padding 1
    check_gather_matches_scatter<T>({2, 3, 17, 16}, 3, 2, 1, 1, false, rng);
    // stride 1: up to 9 windows over one element
    check_gather_matches_scatter<T>({1, 4, 12, 13}, 3, 1, 1, 1, false, rng);
    // dilation, ceil_mode and unequal dims
    check_gather_matches_scatter<T>({1, 2, 9, 9}, {2, 3}, {2, 1}, 0, 2, true, rng);
    check_gather_matches_scatter<T>({3, 11, 10}, 3, 2, 1, 2, true, rng);
    check_gather_matches_scatter<T>({2, 2, 7, 12}, {5, 4}, {3, 1}, {2, 1}, {1, 3}, true, rng);
  };
  run(float{});
  run(double{});
}
