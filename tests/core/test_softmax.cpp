// softmax / log_softmax: stability, special values, dtype handling, errors, determinism, and the
// same bits from every ISA build of the CPU kernels (Note [Softmax sums]).
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/cpu/blas_select.h"
#include "core/cpu/isa.h"
#include "core/cpu/math.h"
#include "core/ops/softmax.h"
#include "sl_config.h"
#include "support/testing.h"

using namespace sl;

TEST_CASE("softmax is stable for large logits and matches the shifted closed form") {
  // softmax is shift-invariant: [1000, 1001, 1002] must equal softmax([0, 1, 2]), which the
  // test computes in double; a naive exp(1000) overflows to inf in float32.
  Tensor x = tensor({1000.f, 1001.f, 1002.f});
  double z = 1 + std::exp(1.0) + std::exp(2.0);
  Tensor want = tensor({1 / z, std::exp(1.0) / z, std::exp(2.0) / z});
  SL_CHECK_CLOSE(softmax(x, 0), want, 1e-6, 1e-7);  // float32: a few ulps
  Tensor ls = log_softmax(tensor({-1000.f, 0.f}), 0);
  // log(1 + e^-1000) underflows to 0 in double as well: exactly [-1000, 0]
  SL_CHECK_CLOSE(ls, tensor({-1000.0, 0.0}), 0, 0);
  CHECK(isfinite(softmax(tensor({60.f, -60.f}).to(DType::f16), 0)).all().item<bool>());
}

TEST_CASE("softmax rows sum to one in every floating dtype") {
  manual_seed(3);
  Tensor x = randn({8, 33}) * 4;
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    CAPTURE(std::string(dtype_name(dt)));
    Tensor s = softmax(x.to(dt), -1).to(DType::f64).sum({-1});
    // each of 33 probabilities carries one rounding of the dtype (relative 2^-24 / 2^-11 / 2^-8)
    double tol = dt == DType::bf16 ? 33 * 0.004 : dt == DType::f16 ? 33 * 5e-4 : 1e-6;
    SL_CHECK_CLOSE(s, ones({8}, {.dtype = DType::f64}), 0, tol);
  }
}

TEST_CASE("softmax special values: NaN poisons only its slice, all -inf gives NaN as in PyTorch") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = from_vector(std::vector<float>{1, nan, 2, 0, 1, 2, -inf, -inf, -inf}, {3, 3});
  Tensor y = softmax(x, 1);
  std::vector<float> v = y.to_vector<float>();
  for (int i = 0; i < 3; ++i) CHECK(std::isnan(v[static_cast<size_t>(i)]));
  for (int i = 6; i < 9; ++i) CHECK(std::isnan(v[static_cast<size_t>(i)]));
  SL_CHECK_CLOSE(y[1], softmax(tensor({0.f, 1.f, 2.f}), 0), 0, 0);
  // -inf entries next to finite ones get probability exactly 0
  Tensor z = softmax(tensor({-inf, 0.f, 0.f}), 0);
  CHECK(z.to_vector<float>() == std::vector<float>{0.f, 0.5f, 0.5f});
}

TEST_CASE("softmax dtype argument converts first; the gradient returns in the input's dtype") {
  Tensor x = tensor({1.f, 2.f, 3.f}).to(DType::f16).requires_grad_();
  Tensor y = softmax(x, 0, DType::f32);
  CHECK(y.dtype() == DType::f32);
  (y * tensor({1.f, 0.f, 0.f})).sum().backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == DType::f16);
  Tensor p = softmax(tensor({1.0, 2.0, 3.0}), 0);
  // d p0 / d x = p0 * (e0 - p)
  std::vector<double> pv = p.to_vector<double>();
  Tensor want = tensor({pv[0] * (1 - pv[0]), -pv[0] * pv[1], -pv[0] * pv[2]});
  SL_CHECK_CLOSE(x.grad(), want, 2e-3, 1e-3);  // half-precision gradient: one rounding each
  CHECK(softmax(arange(4), 0, DType::f64).dtype() == DType::f64);
}

TEST_CASE("softmax errors name the op and the bad value") {
  SL_CHECK_THROWS(softmax(arange(4), 0), DTypeError,
                  "softmax: expected a floating dtype, got int64");
  SL_CHECK_THROWS(log_softmax(ones({2, 3}), 2), IndexError, "log_softmax: dim 2 out of range");
  SL_CHECK_THROWS(softmax(Tensor(), 0), ValueError, "softmax: input is an undefined tensor");
}

TEST_CASE("softmax is deterministic: same bits twice and with 1 or 2 threads") {
  manual_seed(11);
  Tensor x = randn({64, 513});
  int saved = get_num_threads();
  set_num_threads(1);
  Tensor a = softmax(x, 1), b = log_softmax(x, 0);
  set_num_threads(2);
  Tensor c = softmax(x, 1), d = log_softmax(x, 0), e = softmax(x, 1);
  set_num_threads(saved);
  CHECK(equal(a, c));
  CHECK(equal(c, e));
  CHECK(equal(b, d));
}

TEST_CASE("Tensor::softmax and log_softmax methods forward to the free functions") {
  Tensor x = arange(6).to(DType::f64).view({2, 3});
  CHECK(equal(x.softmax(-1), softmax(x, -1)));
  CHECK(equal(x.log_softmax(0), log_softmax(x, 0)));
  SL_CHECK_CLOSE(x.log_softmax(1).exp(), x.softmax(1), 1e-15, 0);
}

namespace {

/// softmax (log_softmax when `log`) of x along `dim` and its input gradient for the output
/// gradient g, by plain double loops over the [outer, n, inner] view: a slice holding NaN gives
/// NaN, a slice of all -inf gives NaN (exp(-inf - -inf)), as in PyTorch.
struct SoftmaxRef {
  std::vector<double> y, gx;
};
SoftmaxRef softmax_ref(const std::vector<double>& x, const std::vector<double>& g,
                       const Shape& shape, int64_t dim, bool log) {
  int64_t outer = 1, inner = 1;
  const int64_t n = shape[static_cast<size_t>(dim)];
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) outer *= shape[static_cast<size_t>(d)];
    if (d > dim) inner *= shape[static_cast<size_t>(d)];
  }
  SoftmaxRef r{std::vector<double>(x.size()), std::vector<double>(x.size())};
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + i); };
      double m = -std::numeric_limits<double>::infinity();
      bool nan = false;
      for (int64_t k = 0; k < n; ++k) {
        nan = nan || std::isnan(x[at(k)]);
        m = std::max(m, x[at(k)]);
      }
      if (nan) m = std::numeric_limits<double>::quiet_NaN();
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += std::exp(x[at(k)] - m);
      double gs = 0;  // sum(g) for log_softmax, sum(g * y) for softmax
      for (int64_t k = 0; k < n; ++k) {
        double y = log ? x[at(k)] - m - std::log(s) : std::exp(x[at(k)] - m) / s;
        r.y[at(k)] = y;
        gs += log ? g[at(k)] : g[at(k)] * y;
      }
      for (int64_t k = 0; k < n; ++k) {
        double y = r.y[at(k)];
        r.gx[at(k)] = log ? g[at(k)] - std::exp(y) * gs : y * (g[at(k)] - gs);
      }
    }
  }
  return r;
}

/// Checks softmax / log_softmax of x along dim, forward and backward (output gradient g), against
/// softmax_ref with float32 or float64 tolerances.
void check_softmax_against_ref(const Tensor& x, const Tensor& g, int64_t dim, bool log) {
  CAPTURE(shape_str(x.sizes()));
  CAPTURE(dim);
  CAPTURE(log);
  CAPTURE(std::string(dtype_name(x.dtype())));
  SoftmaxRef want = softmax_ref(x.to_vector<double>(), g.to_vector<double>(), x.sizes(), dim, log);
  Tensor xl = x.detach().requires_grad_();
  Tensor y = log ? log_softmax(xl, dim) : softmax(xl, dim);
  y.backward(g);
  const Shape& s = x.sizes();
  // float32: exp of an argument up to ~30 carries ~30 ulps of relative error; log_softmax's
  // subtraction and the backward's g - dot an absolute error of a few ulps of their operands
  const bool f32 = x.dtype() == DType::f32;
  const double rtol = f32 ? 1e-5 : 1e-12, atol = f32 ? 1e-5 : 1e-12;
  SL_CHECK_CLOSE(y, from_vector(want.y, s), rtol, atol);
  REQUIRE(xl.grad().defined());
  SL_CHECK_CLOSE(xl.grad(), from_vector(want.gx, s), rtol, atol);
}

}  // namespace

TEST_CASE("softmax over a dim that is not the last matches a double reference, with its gradient") {
  // Note [Softmax over a non-last dim]: blocks of up to 64 adjacent slices; the shapes cover
  // inner sizes below, above and not a multiple of the block or the vector width, one block or
  // several per outer index, and outer sizes of one and more.
  struct C {
    Shape shape;
    int64_t dim;
  };
  const C cases[] = {{{3, 5, 7}, 0}, {{3, 5, 7}, 1},   {{2, 1000, 13}, 1}, {{1024, 3}, 0},
                     {{5, 130}, 0},  {{2, 9, 100}, 1}, {{4, 3, 2, 70}, 1}, {{2, 3, 4, 5}, 2}};
  manual_seed(5);
  for (const C& c : cases) {
    Tensor x = randn(c.shape) * 3, g = randn(c.shape);
    for (DType dt : {DType::f32, DType::f64}) {
      for (bool log : {false, true}) check_softmax_against_ref(x.to(dt), g.to(dt), c.dim, log);
    }
  }
}

TEST_CASE("softmax over a non-last dim gives the same bits as over the last dim of a copy") {
  // Both kernels apply the same operations in the same order to each slice (Note [Softmax over
  // a non-last dim]), so moving the dim last first changes no bit, forward or backward.
  // With 2 threads, [70, 40] along dim 0 (one block of 40 columns) is cut into blocks of 32
  // and 8 so that both threads get one; with 1 thread it stays whole. Slices of 1, 17 and 33
  // elements end part-way through the 16 sum lanes (Note [Softmax sums]).
  manual_seed(6);
  const Shape shapes[] = {{2, 1000, 13}, {129, 67}, {3, 5, 7},   {70, 40},
                          {1, 40},       {17, 19},  {2, 33, 130}};
  const int saved = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    CAPTURE(threads);
    for (const Shape& shape : shapes) {
      Tensor x0 = randn(shape) * 4, g0 = randn(shape);
      for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        for (bool log : {false, true}) {
          const int64_t dim = static_cast<int64_t>(shape.size()) - 2;
          CAPTURE(shape_str(shape));
          CAPTURE(std::string(dtype_name(dt)));
          CAPTURE(log);
          auto run = [&](bool moved) {
            Tensor x = x0.to(dt).clone().detach().requires_grad_();
            Tensor xm = moved ? x.transpose(dim, -1).contiguous() : x;
            Tensor y = log ? log_softmax(xm, moved ? -1 : dim) : softmax(xm, moved ? -1 : dim);
            if (moved) y = y.transpose(dim, -1);
            y.backward(g0.to(dt));
            return std::make_pair(y.contiguous(), x.grad());
          };
          auto [y_blocked, gx_blocked] = run(false);
          auto [y_last, gx_last] = run(true);
          CHECK(sl::testing::bits_equal(y_blocked, y_last));
          CHECK(sl::testing::bits_equal(gx_blocked, gx_last));
        }
      }
    }
  }
  set_num_threads(saved);
}

TEST_CASE("softmax over a non-last dim: -inf entries get 0, all -inf or NaN slices give NaN") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // [4, 3, 2] along dim 1: slice (0, 0) all -inf, (1, 1) one NaN, (2, *) and (3, 0) some -inf
  std::vector<double> v(24);
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<double>(k % 7) - 3;
  v[0] = v[2] = v[4] = -inf;
  v[6 + 3] = nan;
  v[12] = v[15] = -inf;
  v[18] = -inf;
  Tensor x = from_vector(v, {4, 3, 2});
  manual_seed(7);
  Tensor g = randn({4, 3, 2}, {.dtype = DType::f64});
  for (DType dt : {DType::f32, DType::f64}) {
    for (bool log : {false, true}) check_softmax_against_ref(x.to(dt), g.to(dt), 1, log);
  }
  // the reference's own special values, as PyTorch: NaN over the all -inf slice and the NaN one,
  // exactly 0 (softmax) and -inf (log_softmax) at -inf entries of the other slices
  std::vector<double> s = softmax(x, 1).to_vector<double>();
  std::vector<double> ls = log_softmax(x, 1).to_vector<double>();
  for (int k : {0, 2, 4, 7, 9, 11}) CHECK(std::isnan(s[static_cast<size_t>(k)]));
  CHECK(s[12] == 0);
  CHECK(ls[12] == -inf);
  CHECK(s[18] == 0);
  CHECK(std::isfinite(s[20]));
}

namespace {

/// Softmax (log_softmax when `log`) of the contiguous [outer, n, inner] x, forward and backward
/// (output gradient g), through one build's kernels of core/cpu/isa.h (called directly, below
/// the op's checks and its choice of build).
template <class Forward, class Backward>
std::pair<Tensor, Tensor> run_softmax_build(Forward forward, Backward backward, const Tensor& x,
                                            const Tensor& g, bool log) {
  Tensor y = empty_like(x), gx = empty_like(x);
  forward(y, x, log);
  backward(gx, g, y, log);
  return {y, gx};
}

}  // namespace

namespace {

/// The sum of f(r) for r in [0, n) as Note [Softmax sums] specifies it: f(r) added to double lane
/// r % 16 in row order, the lanes combined by the tree l += l + 8, + 4, + 2, + 1.
template <class F>
double sum_by_note(size_t n, const F& f) {
  double lane[16] = {};
  for (size_t r = 0; r < n; ++r) lane[r % 16] += f(r);
  for (int h = 8; h >= 1; h /= 2) {
    for (int l = 0; l < h; ++l) lane[l] += lane[l + h];
  }
  return lane[0];
}

/// softmax (log_softmax when `log`) of one row and its input gradient for the output gradient g,
/// as the Note and the kernels' formulas give them: max + 0, math::exp of x - max, the sums by
/// sum_by_note; then exp * (1 / sum) or x - (max + log sum), and the backward formulas of
/// softmax_backward_kernel.
template <class C>
std::pair<std::vector<C>, std::vector<C>> softmax_by_note(const std::vector<C>& x,
                                                          const std::vector<C>& g, bool log) {
  using sl::cpu::math::exp;
  C m = -std::numeric_limits<C>::infinity();
  for (C v : x) m = v > m ? v : m;
  m = m + C(0);
  const size_t n = x.size();
  const double sum =
      sum_by_note(n, [&](size_t r) { return static_cast<double>(exp<C>(x[r] - m)); });
  const C shift = m + static_cast<C>(std::log(sum));
  const C inv = static_cast<C>(1.0 / sum);
  std::vector<C> y(n), gx(n);
  for (size_t r = 0; r < n; ++r) y[r] = log ? x[r] - shift : exp<C>(x[r] - m) * inv;
  const C s = static_cast<C>(sum_by_note(n, [&](size_t r) {
    return log ? static_cast<double>(g[r]) : static_cast<double>(g[r]) * static_cast<double>(y[r]);
  }));
  for (size_t r = 0; r < n; ++r) gx[r] = log ? g[r] - exp<C>(y[r]) * s : y[r] * (g[r] - s);
  return {y, gx};
}

template <class C>
void check_softmax_by_note(DType dt) {
  manual_seed(14);
  for (int64_t n : {5, 16, 23, 100, 1000}) {
    for (bool log : {false, true}) {
      CAPTURE(n);
      CAPTURE(log);
      // g of one sign, so that sum(g) and sum(g * y) are large next to g and their last bits
      // reach the gradient; drawn in dt, so that float64 sums are not exact
      Tensor x = randn({4, n}, {.dtype = dt}) * 4, g = rand({4, n}, {.dtype = dt});
      std::vector<C> xv = x.to_vector<C>(), gv = g.to_vector<C>(), want_y, want_gx;
      if (n >= 16) {
        // The double lanes' rounding seldom reaches a float32 result. So that the lanes' order
        // shows, the last 16 elements of a row (one per lane) get g = +2^(40 + l) in lane l < 8
        // and -2^(40 + l - 8) in lane l >= 8, with x (so y) equal in lanes l and l + 8: each
        // lane's small terms round at the ulp of its big one, and only the Note's first tree
        // step, lane l + lane l + 8, cancels the big terms (and the products g * y) exactly; in
        // any other pairing or order some 2^40 or more stays in partial sums, whose rounding
        // (2^-12 and up) reaches the float sums.
        for (int64_t row = 0; row < 4; ++row) {
          // element k of the row is in lane k % 16
          auto at = [&](int64_t lane) {
            return static_cast<size_t>(row * n + n - 16 + (lane - n % 16 + 16) % 16);
          };
          for (int64_t lane = 0; lane < 16; ++lane) {
            gv[at(lane)] = std::ldexp(C(lane < 8 ? 1 : -1), 40 + static_cast<int>(lane % 8));
            if (lane >= 8) xv[at(lane)] = xv[at(lane - 8)];
          }
        }
        x = from_vector(xv, {4, n});
        g = from_vector(gv, {4, n});
      }
      for (int64_t row = 0; row < 4; ++row) {
        auto part = [&](const std::vector<C>& v) {
          return std::vector<C>(v.begin() + row * n, v.begin() + (row + 1) * n);
        };
        auto [y, gx] = softmax_by_note(part(xv), part(gv), log);
        want_y.insert(want_y.end(), y.begin(), y.end());
        want_gx.insert(want_gx.end(), gx.begin(), gx.end());
      }
      Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
      CHECK(sl::testing::bits_equal(y, from_vector(want_y, {4, n})));
      CHECK(sl::testing::bits_equal(ops::softmax_backward(g, y, 1, log),
                                    from_vector(want_gx, {4, n})));
      // the blocked kernels, over the same rows as columns
      Tensor xt = x.t().contiguous(), yt = log ? log_softmax(xt, 0) : softmax(xt, 0);
      CHECK(sl::testing::bits_equal(yt.t(), from_vector(want_y, {4, n})));
      Tensor gxt = ops::softmax_backward(g.t().contiguous(), yt, 0, log);
      CHECK(sl::testing::bits_equal(gxt.t(), from_vector(want_gx, {4, n})));
    }
  }
}

}  // namespace

TEST_CASE("softmax sums as Note [Softmax sums] specifies them, bit for bit") {
  // The order is the contract that makes every ISA build agree; a kernel that summed in 8 lanes,
  // or in row order, would still be within any tolerance, so this compares bits, forward and
  // backward, rows and blocks, with the Note's recipe written out here (math::exp of this
  // file's generic build).
  check_softmax_by_note<float>(DType::f32);
  check_softmax_by_note<double>(DType::f64);
}

TEST_CASE("softmax kernels give the same bits in every ISA build the CPU runs") {
  // Note [Softmax sums]: the same lanes, the same combine tree and exps without FMA contraction
  // in the generic, AVX2 and AVX-512 builds. Row lengths below, at and past the 16 lanes and the
  // vector widths (1, 7, 8, 15, 16, 17, 33, 1000), inner sizes 1 (rows) and > 1 (blocks), f32
  // and f64, forward and backward: bits_equal, no tolerance.
  const int level = sl::cpu::host_vector_isa().level;
  INFO("CPU vector level ", level, " (2: AVX2+FMA, 3: AVX-512)");
  struct Build {
    const char* name;
    void (*forward)(const Tensor&, const Tensor&, bool);
    void (*backward)(const Tensor&, const Tensor&, const Tensor&, bool);
  };
  std::vector<Build> builds;
#if SL_HAVE_AVX2_KERNELS
  if (level >= 2) {
    builds.push_back({"avx2", &sl::cpu::avx2_kernels::softmax_forward,
                      &sl::cpu::avx2_kernels::softmax_backward});
  }
#endif
#if SL_HAVE_AVX512_KERNELS
  if (level >= 3) {
    builds.push_back({"avx512", &sl::cpu::avx512_kernels::softmax_forward,
                      &sl::cpu::avx512_kernels::softmax_backward});
  }
#endif
  if (builds.empty()) MESSAGE("no ISA build runs on this CPU: only the generic one is checked");
  const Shape shapes[] = {{3, 1, 1},  {5, 7, 1},    {4, 8, 1},  {4, 15, 1},  {4, 16, 1}, {4, 17, 1},
                          {2, 33, 1}, {2, 1000, 1}, {2, 17, 5}, {3, 33, 70}, {1, 1, 9}};
  manual_seed(12);
  for (const Shape& shape : shapes) {
    for (bool with_inf : {false, true}) {
      Tensor x0 = randn(shape) * 6, g0 = randn(shape);
      // some -inf entries, and past the first 16 lanes where the row is long enough (float32 rows
      // without them take the vector path of Note [Softmax float rows])
      std::vector<float> xv = x0.to_vector<float>();
      for (size_t k = 0; k < xv.size(); k += 5) xv[k] = -std::numeric_limits<float>::infinity();
      if (with_inf && shape[1] > 1) x0 = from_vector(xv, shape);
      for (DType dt : {DType::f32, DType::f64}) {
        for (bool log : {false, true}) {
          CAPTURE(with_inf);
          CAPTURE(shape_str(shape));
          CAPTURE(std::string(dtype_name(dt)));
          CAPTURE(log);
          Tensor x = x0.to(dt), g = g0.to(dt);
          auto [y_ref, gx_ref] =
              run_softmax_build(&sl::cpu::generic_kernels::softmax_forward,
                                &sl::cpu::generic_kernels::softmax_backward, x, g, log);
          for (const Build& b : builds) {
            CAPTURE(b.name);
            auto [y, gx] = run_softmax_build(b.forward, b.backward, x, g, log);
            CHECK(sl::testing::bits_equal(y, y_ref));
            CHECK(sl::testing::bits_equal(gx, gx_ref));
          }
        }
      }
    }
  }
}

TEST_CASE("float32 softmax rows: the vector path gives the general path's bits") {
  // Note [Softmax float rows]: a row whose x - max stays in [-86, 0] takes the vector path; the
  // same row with -inf appended takes the general one (its min is -inf), and the -inf adds
  // exp(-inf) = +0 to one sum lane, which changes no bit, so the first n outputs must agree
  // exactly; so must the gradients. Lengths around the 16 lanes and the vector widths; spreads up
  // to the domain's edge (min - max just above -86, where exp is near the smallest normal float)
  // and just past it (both rows on the general path: still equal).
  const float inf = std::numeric_limits<float>::infinity();
  manual_seed(15);
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 47, 100, 250, 1024}) {
    for (float spread : {1.0f, 20.0f, 85.9f, 86.5f, 100.0f}) {
      CAPTURE(n);
      CAPTURE(spread);
      // 3 rows in [-spread, 0] + offset, each with its max and min reached when n > 1
      std::vector<float> v = (rand({3, n}) * -spread).to_vector<float>();
      for (int64_t row = 0; row < 3; ++row) {
        const float offset = static_cast<float>(row * 7 - 5);
        for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(row * n + k)] += offset;
        if (n > 1) {
          v[static_cast<size_t>(row * n + (row * 5) % n)] = offset;
          v[static_cast<size_t>(row * n + (row * 3 + 1) % n)] = offset - spread;
        }
      }
      // the output gradient: 0 at the -inf, which adds +0 to the backward's sums too
      std::vector<float> gv = (rand({3, n}) + 0.5).to_vector<float>(), padded, gpadded;
      for (int64_t row = 0; row < 3; ++row) {
        padded.insert(padded.end(), v.begin() + row * n, v.begin() + (row + 1) * n);
        padded.push_back(-inf);
        gpadded.insert(gpadded.end(), gv.begin() + row * n, gv.begin() + (row + 1) * n);
        gpadded.push_back(0);
      }
      Tensor x = from_vector(v, {3, n}), xp = from_vector(padded, {3, n + 1});
      Tensor g = from_vector(gv, {3, n}), gp = from_vector(gpadded, {3, n + 1});
      for (bool log : {false, true}) {
        CAPTURE(log);
        Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
        Tensor yp = log ? log_softmax(xp, 1) : softmax(xp, 1);
        CHECK(sl::testing::bits_equal(y, yp.narrow(1, 0, n).contiguous()));
        // log_softmax's backward takes exp(y): the vector path for y, the general one for yp
        // (its -inf), where the -inf's gradient is exactly 0 (exp(-inf) = 0)
        Tensor gx = ops::softmax_backward(gp, yp, 1, log);
        CHECK(sl::testing::bits_equal(ops::softmax_backward(g, y, 1, log),
                                      gx.narrow(1, 0, n).contiguous()));
        CHECK(equal(gx.narrow(1, n, 1).contiguous(), zeros({3, 1})));
      }
    }
  }
}

TEST_CASE("softmax rows of any length match the double reference, length 1 exactly") {
  // Lengths that are not a multiple of the 16 sum lanes or of 4, 8 or 16 vector lanes, over the
  // last dim (rows) and a middle one (blocks); tolerances as check_softmax_against_ref's. In the
  // ISA test runs (tests/meson.build) the same reference checks each build.
  manual_seed(13);
  for (int64_t n : {1, 2, 7, 9, 15, 17, 31, 33, 47, 100, 257}) {
    CAPTURE(n);
    for (DType dt : {DType::f32, DType::f64}) {
      for (bool log : {false, true}) {
        Tensor x = (randn({3, n}) * 5).to(dt), g = randn({3, n}).to(dt);
        check_softmax_against_ref(x, g, 1, log);
        Tensor xb = (randn({2, n, 11}) * 5).to(dt), gb = randn({2, n, 11}).to(dt);
        check_softmax_against_ref(xb, gb, 1, log);
      }
    }
  }
  // one element: softmax is exactly 1, log_softmax exactly 0, and both gradients exactly 0
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = (randn({4, 1}) * 100).to(dt).requires_grad_();
    Tensor y = softmax(x, 1);
    CHECK(equal(y, ones({4, 1}, {.dtype = dt})));
    y.backward(randn({4, 1}).to(dt));
    CHECK(equal(x.grad(), zeros({4, 1}, {.dtype = dt})));
    Tensor x2 = (randn({4, 1}) * 100).to(dt).requires_grad_();
    Tensor ly = log_softmax(x2, 1);
    CHECK(equal(ly, zeros({4, 1}, {.dtype = dt})));
    ly.backward(randn({4, 1}).to(dt));
    CHECK(equal(x2.grad(), zeros({4, 1}, {.dtype = dt})));
  }
}

TEST_CASE("softmax rows with -inf: 0 and -inf there, NaN for a row of all -inf, at any length") {
  // As before the lanes (and as PyTorch): exp(-inf) is exactly 0, so -inf entries get
  // probability 0 and log-probability -inf, the other entries are the softmax of the finite
  // ones; a row of -inf only has max -inf and -inf - -inf = NaN everywhere.
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {3, 16, 17, 40}) {
    CAPTURE(n);
    std::vector<float> v(static_cast<size_t>(2 * n), -inf);
    std::vector<float> finite;
    for (int64_t k = 0; k < n; k += 3) {
      v[static_cast<size_t>(k)] = static_cast<float>(k % 5) - 2;  // row 0: every third finite
      finite.push_back(v[static_cast<size_t>(k)]);
    }
    for (DType dt : {DType::f32, DType::f64}) {
      CAPTURE(std::string(dtype_name(dt)));
      Tensor x = from_vector(v, {2, n}).to(dt);
      Tensor want = softmax(from_vector(finite, {static_cast<int64_t>(finite.size())}).to(dt), 0);
      for (bool blocked : {false, true}) {
        CAPTURE(blocked);
        // blocked: the same rows as columns of a [n, 2] tensor, softmax over dim 0
        Tensor s = blocked ? softmax(x.t().contiguous(), 0).t() : softmax(x, 1);
        Tensor ls = blocked ? log_softmax(x.t().contiguous(), 0).t() : log_softmax(x, 1);
        std::vector<double> sv = s.to_vector<double>(), lv = ls.to_vector<double>();
        std::vector<double> wv = want.to_vector<double>();
        for (int64_t k = 0, f = 0; k < n; ++k) {
          const size_t i = static_cast<size_t>(k);
          if (k % 3 == 0) {
            // the finite entries sit in other sum lanes than in the short row (Note [Softmax
            // sums]), so the double sums may differ in their last bit: a few ulps of the dtype
            const double w = wv[static_cast<size_t>(f++)];
            CHECK(std::abs(sv[i] - w) <= (dt == DType::f32 ? 3e-7 : 1e-15) * w);
            CHECK(std::isfinite(lv[i]));
          } else {
            CHECK(sv[i] == 0);
            CHECK(lv[i] == -inf);
          }
          CHECK(std::isnan(sv[i + static_cast<size_t>(n)]));  // row 1: all -inf
          CHECK(std::isnan(lv[i + static_cast<size_t>(n)]));
        }
      }
    }
  }
}

TEST_CASE("softmax of magnitudes near 1e30 stays finite, forward and backward") {
  // x - max stays finite (|x| <= 1e30, float's max is 3.4e38), exp of -2e30 is exactly 0: the
  // two rows are softmax [0.5, 0, 0, 0.5] and [0, 0, 1, 0] exactly; log_softmax is 0 where a
  // maximum is (log 2 is lost next to 1e30: 1e30 + 0.69 rounds to 1e30) and -2e30 / -1e30
  // elsewhere, as PyTorch gives.
  const std::vector<double> v = {1e30, -1e30, 0, 1e30, -1e30, -1e30, 1e30, 0};
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(std::string(dtype_name(dt)));
    for (int64_t dim : {0, 1}) {
      CAPTURE(dim);
      // dim 1: rows of [2, 4]; dim 0: the same slices as columns of the transposed copy
      Tensor x = from_vector(v, {2, 4}).to(dt);
      if (dim == 0) x = x.t().contiguous();
      Tensor xs = x.detach().requires_grad_(), xl = x.detach().requires_grad_();
      Tensor s = softmax(xs, dim), ls = log_softmax(xl, dim);
      Tensor g = ones_like(x);
      s.backward(g);
      ls.backward(g);
      for (const Tensor& t : {s, ls, xs.grad(), xl.grad()}) CHECK(isfinite(t).all().item<bool>());
      Tensor want = tensor({0.5, 0.0, 0.0, 0.5, 0.0, 0.0, 1.0, 0.0}).view({2, 4}).to(dt);
      SL_CHECK_CLOSE(dim == 0 ? s.t() : s, want, 0, 0);
    }
  }
}
