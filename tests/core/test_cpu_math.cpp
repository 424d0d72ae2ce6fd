// The float32 transcendental kernels (core/cpu/math.h, Note [Vectorisable float math]) against
// the C library in double, run through the tensor kernels, so whichever build of them is active
// is the one measured: AVX2+FMA on CPUs that have it, and the baseline build when the suite runs
// this file again with SL_CPU_ISA=generic (tests/meson.build, Note [CPU ISA dispatch]).
//
// Inputs: every 4099th float bit pattern (4099 is odd and prime, so every binade of both signs,
// subnormals, +-inf and NaN patterns are visited, about 1M values), plus the 16 floats around
// each point where the formulas switch, clamp, overflow or underflow. Errors are in ulps of the
// float nearest the reference (subnormal spacing below FLT_MIN).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu/isa.h"
#include "core/cpu/loops.h"
#include "core/cpu/math.h"
#include "core/ops/elementwise.h"
#include "support/testing.h"

namespace {

using sl::BinaryOp;
using sl::Tensor;
using sl::UnaryOp;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kFltMin = std::numeric_limits<float>::min();

/// Spacing of floats at |f| (the subnormal spacing below FLT_MIN).
double float_spacing(float f) {
  const float a = std::fabs(f);
  return static_cast<double>(std::nextafter(a, kInf)) - static_cast<double>(a);
}

/// |got - ref| in ulps of the float nearest ref. A reference that overflows float must give the
/// same infinity; a NaN reference must give NaN.
double ulp_error(float got, double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0.0 : INFINITY;
  const float rf = static_cast<float>(ref);
  if (std::isinf(rf)) return got == rf ? 0.0 : INFINITY;
  const double e = std::fabs(static_cast<double>(got) - ref) / float_spacing(rf);
  return std::isnan(e) ? INFINITY : e;
}

std::vector<float> sweep_values() {
  std::vector<float> v;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4099) {
    v.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
  }
  const float points[] = {
      0.0f,      kFltMin,    1.0f,
      0.5f,      0.625f,                  // tanh: polynomial below 0.625
      0.75f,     1.0606602f,              // erf: polynomial below 0.75; gelu: |x| / sqrt 2 < 0.75
      4.5f,      5.0f,                    // gelu_tanh, gelu: end of the fast forms
      10.0f,     14.142136f, 15.0f,       // erf, gelu: erfc clamped (its result underflows)
      60.0f,     88.72284f,  89.0f,       // tanh clamp, exp overflow, exp clamp
      87.33655f, 103.27893f, 103.97208f,  // exp of minus these: subnormal, last subnormal, 0
      104.0f,    120.0f,     std::numeric_limits<float>::max(),
      kInf};
  for (float p : points) {
    for (float s : {p, -p}) {
      float lo = s, hi = s;
      for (int i = 0; i < 8; ++i) {
        lo = std::nextafter(lo, -kInf);
        hi = std::nextafter(hi, kInf);
        v.push_back(lo);
        v.push_back(hi);
      }
      v.push_back(s);
    }
  }
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  return v;
}

const Tensor& sweep_inputs() {
  static const Tensor x = sl::from_vector(sweep_values());
  return x;
}

struct Worst {
  double ulps = 0;
  float x = 0;
  float got = 0;
  double ref = 0;
  std::string str() const {
    return "max " + std::to_string(ulps) + " ulp at x = " + std::to_string(x) + " (" +
           std::to_string(std::bit_cast<uint32_t>(x)) + "): got " + std::to_string(got) +
           ", want " + std::to_string(ref);
  }
};

/// The worst error of y = f(x) against ref(x). Where scale(x) > 0 the error is measured in
/// ulps of scale(x) instead (sums of terms that cancel); where scale(x) < 0, it is not measured.
template <class Ref, class Scale>
Worst worst_error(const Tensor& x, const Tensor& y, const Ref& ref, const Scale& scale) {
  const std::vector<float> xs = x.to_vector<float>(), ys = y.to_vector<float>();
  Worst w;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double xd = xs[i], r = ref(xd), s = scale(xd);
    if (s < 0) continue;
    double e = s > 0 && !std::isnan(r) ? std::fabs(static_cast<double>(ys[i]) - r) /
                                             float_spacing(static_cast<float>(s))
                                       : ulp_error(ys[i], r);
    if (std::isnan(e)) e = INFINITY;
    if (e > w.ulps || (e == INFINITY && w.ulps != INFINITY)) w = {e, xs[i], ys[i], r};
  }
  return w;
}
template <class Ref>
Worst worst_error(const Tensor& x, const Tensor& y, const Ref& ref) {
  return worst_error(x, y, ref, [](double) { return 0.0; });
}

double phi(double x) {  // standard normal CDF
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}
double gauss_pdf(double x) {
  return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}
double sigmoid_ref(double z) {
  return z >= 0 ? 1 / (1 + std::exp(-z)) : std::exp(z) / (1 + std::exp(z));
}
constexpr double kGeluTanhK = 1.5957691216057307118;  // 2 sqrt(2 / pi)
double gelu_tanh_z(double x) {
  return kGeluTanhK * (x + 0.044715 * x * x * x);
}

Tensor unary(UnaryOp op, const Tensor& x) {
  return sl::ops::unary(op, x);
}
/// d/dx f(x) through f's backward kernel, with an incoming gradient of exactly 1.
Tensor grad_kernel(BinaryOp op, const Tensor& x) {
  return sl::ops::binary(op, sl::ones_like(x), x);
}

std::string isa() {
  return std::string("float kernels: ") + sl::cpu::isa_name(sl::cpu::active_isa());
}

}  // namespace

// Bounds: the measured maxima over this sweep (in each comment: AVX2 build / baseline build)
// with a small margin. They come from the float polynomials and the final multiplications.
TEST_CASE("cpu math f32: exp within 2 ulp over the whole range, 0, subnormals and inf") {
  INFO(isa());
  const Tensor& x = sweep_inputs();
  Worst w = worst_error(x, unary(UnaryOp::exp, x), [](double v) { return std::exp(v); });
  CHECK_MESSAGE(w.ulps <= 2.0, w.str());  // measured 0.95 / 0.95
  Tensor s = unary(UnaryOp::exp, sl::from_vector<float>({-104.0f, -103.0f, 88.8f, -0.0f}));
  std::vector<float> e = s.to_vector<float>();
  CHECK(e[0] == 0.0f);
  CHECK(e[1] > 0.0f);  // subnormal results are kept
  CHECK(e[2] == kInf);
  CHECK(e[3] == 1.0f);
}

TEST_CASE("cpu math f32: sigmoid and tanh within 4 ulp, tiny sigmoid tails included") {
  INFO(isa());
  const Tensor& x = sweep_inputs();
  Worst ws = worst_error(x, unary(UnaryOp::sigmoid, x), sigmoid_ref);
  CHECK_MESSAGE(ws.ulps <= 4.0, ws.str());  // measured 2.26 / 2.26
  Worst wt = worst_error(x, unary(UnaryOp::tanh, x), [](double v) { return std::tanh(v); });
  CHECK_MESSAGE(wt.ulps <= 4.0, wt.str());  // measured 1.48 / 1.48
  // 3.7e-44 is a float; 1 / (1 + e^100) would round to 0
  CHECK(unary(UnaryOp::sigmoid, sl::full({1}, -100.0f)).item<float>() > 0.0f);
}

TEST_CASE("cpu math f32: erf within 4 ulp") {
  INFO(isa());
  const Tensor& x = sweep_inputs();
  Worst w = worst_error(x, unary(UnaryOp::erf, x), [](double v) { return std::erf(v); });
  CHECK_MESSAGE(w.ulps <= 4.0, w.str());  // measured 2.28 / 2.34
}

TEST_CASE("cpu math f32: gelu (erf and tanh forms) within 8 ulp, tails included") {
  INFO(isa());
  const Tensor& x = sweep_inputs();
  Worst w = worst_error(x, unary(UnaryOp::gelu, x), [](double v) { return v * phi(v); });
  CHECK_MESSAGE(w.ulps <= 8.0, w.str());  // measured 4.94 / 4.53
  Worst wt = worst_error(x, unary(UnaryOp::gelu_tanh, x),
                         [](double v) { return v * sigmoid_ref(gelu_tanh_z(v)); });
  CHECK_MESSAGE(wt.ulps <= 8.0, wt.str());  // measured 2.90 / 2.90
  // -20 Phi(-20) ~ -5e-88 rounds to (-)0; +inf stays inf
  std::vector<float> g =
      unary(UnaryOp::gelu, sl::from_vector<float>({-20.0f, kInf})).to_vector<float>();
  CHECK(g[0] == 0.0f);
  CHECK(g[1] == kInf);
}

// Note [Gelu fast domain]: a block of the kernel loop runs through the fast form only when all of
// its elements are in the fast domain, which the sweep above (neighbours far apart) rarely gives.
// These inputs are sorted by magnitude, so nearly every block is all-fast: every 1031st float
// from 0 through the end of the domain, each sign, subnormals included.
std::vector<float> fast_domain_values(float fast_max) {
  std::vector<float> v;
  for (float sign : {1.0f, -1.0f}) {
    for (uint32_t b = 0; b <= std::bit_cast<uint32_t>(fast_max); b += 1031) {
      v.push_back(sign * std::bit_cast<float>(b));
    }
    v.push_back(sign * fast_max);
    v.push_back(sign * std::nextafter(fast_max, 0.0f));
  }
  return v;
}

TEST_CASE("cpu math f32: gelu fast forms within 8 ulp over their whole domain") {
  INFO(isa());
  const Tensor x = sl::from_vector(fast_domain_values(sl::cpu::math::f32::kGeluFastMax));
  Worst w = worst_error(x, unary(UnaryOp::gelu, x), [](double v) { return v * phi(v); });
  CHECK_MESSAGE(w.ulps <= 8.0, w.str());  // measured 4.74 / 4.99
  const Tensor xt = sl::from_vector(fast_domain_values(sl::cpu::math::f32::kGeluTanhFastMax));
  Worst wt = worst_error(xt, unary(UnaryOp::gelu_tanh, xt),
                         [](double v) { return v * sigmoid_ref(gelu_tanh_z(v)); });
  CHECK_MESSAGE(wt.ulps <= 8.0, wt.str());  // measured 3.19 / 3.19
}

// Each x gives the same bits whether its block ran through the fast form or, because one
// element of the block is outside the domain (just beyond it, large, +-inf or NaN), through the
// selecting form: the values are computed once in all-fast blocks (in the AVX2 and AVX-512
// builds, gelu's through the interleaved form of Note [Interleaved gelu]), then again with one
// element of every block replaced by an outsider (the offsets move it through the block), so that
// every block runs through the scalar selecting form. kBlock is this (generic) build's block, 32;
// the AVX-512 build's blocks are 64 long and then hold two outsiders each.
TEST_CASE("cpu math f32: gelu gives the same bits in fast and mixed blocks") {
  INFO(isa());
  for (UnaryOp op : {UnaryOp::gelu, UnaryOp::gelu_tanh}) {
    const float fast_max = op == UnaryOp::gelu ? sl::cpu::math::f32::kGeluFastMax
                                               : sl::cpu::math::f32::kGeluTanhFastMax;
    CAPTURE(sl::unary_op_name(op));
    const std::vector<float> v = fast_domain_values(fast_max);
    const std::vector<float> ref = unary(op, sl::from_vector(v)).to_vector<float>();
    const float outsiders[] = {std::nextafter(fast_max, kInf),
                               -std::nextafter(fast_max, kInf),
                               -30.0f,
                               1e20f,
                               kInf,
                               -kInf,
                               std::numeric_limits<float>::quiet_NaN()};
    constexpr size_t kBlock = sl::cpu::kFastDomainBlock;
    for (size_t offset = 0; offset < kBlock; offset += 3) {
      std::vector<float> mixed = v;
      for (size_t i = offset, k = 0; i < mixed.size(); i += kBlock, ++k) {
        mixed[i] = outsiders[k % std::size(outsiders)];
      }
      const std::vector<float> got = unary(op, sl::from_vector(mixed)).to_vector<float>();
      size_t differ = 0;
      for (size_t i = 0; i < v.size(); ++i) {
        if (mixed[i] == v[i] && std::memcmp(&got[i], &ref[i], sizeof(float)) != 0) ++differ;
      }
      CHECK_MESSAGE(differ == 0, "offset ", offset);
      // and the outsiders themselves: gelu(+-inf) = +inf / NaN, NaN stays NaN
      for (size_t i = offset, k = 0; i < mixed.size(); i += kBlock, ++k) {
        const float o = outsiders[k % std::size(outsiders)];
        if (std::isnan(o) || o == -kInf) {
          CHECK(std::isnan(got[i]));
        } else if (o == kInf) {
          CHECK(got[i] == kInf);
        }
      }
    }
  }
}

TEST_CASE("cpu math f32: odd functions keep the sign of zero, NaN propagates") {
  INFO(isa());
  Tensor z = sl::full({1}, -0.0f);
  for (UnaryOp op : {UnaryOp::tanh, UnaryOp::erf, UnaryOp::gelu_tanh}) {
    float r = unary(op, z).item<float>();
    CHECK_MESSAGE((r == 0.0f && std::signbit(r)), std::string(sl::unary_op_name(op)));
  }
  Tensor nan = sl::full({3}, std::numeric_limits<float>::quiet_NaN());
  for (UnaryOp op : {UnaryOp::exp, UnaryOp::tanh, UnaryOp::sigmoid, UnaryOp::erf, UnaryOp::gelu,
                     UnaryOp::gelu_tanh, UnaryOp::silu}) {
    CHECK_MESSAGE(sl::isnan(unary(op, nan)).all().item<bool>(), std::string(sl::unary_op_name(op)));
  }
  for (BinaryOp op : {BinaryOp::gelu_backward, BinaryOp::gelu_tanh_backward}) {
    CHECK_MESSAGE(sl::isnan(grad_kernel(op, nan)).all().item<bool>(),
                  std::string(sl::binary_op_name(op)));
  }
}

// relu is x < 0 ? 0 : x, as PyTorch's: a NaN stays NaN (a SIMD max that returns the non-NaN
// operand would give 0) and -0 stays -0; its backward (PyTorch's threshold_backward, y <= 0 ? 0 :
// g) passes the gradient where y is NaN. 67 elements: each build's vector body and its tail.
TEST_CASE("cpu math f32: relu keeps NaN and -0, and relu's gradient passes at NaN") {
  INFO(isa());
  std::vector<float> v(67);
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 0; i < v.size(); ++i) {
    const float pattern[] = {qnan, -1.5f, 2.5f, -0.0f, -kInf, kInf, 0.0f};
    v[i] = pattern[i % 7];
  }
  const Tensor x = sl::from_vector(v, {67});
  const std::vector<float> y = unary(UnaryOp::relu, x).to_vector<float>();
  Tensor in_place = x.clone();
  sl::ops::unary_(UnaryOp::relu, in_place);
  const std::vector<float> y2 = in_place.to_vector<float>();
  // the gradient is read from relu's output, as the autograd relu saves it
  const std::vector<float> g =
      sl::ops::binary(BinaryOp::relu_backward, sl::full({67}, 3.0f), x).to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) {
    CAPTURE(i);
    const float want = std::isnan(v[i]) ? qnan : (v[i] < 0 ? 0.0f : v[i]);
    for (float got : {y[i], y2[i]}) {
      CHECK(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want));
    }
    // 3 passes where x is NaN or > 0; 0 where x <= 0 (-0 and 0 included)
    CHECK(g[i] == ((std::isnan(v[i]) || v[i] > 0) ? 3.0f : 0.0f));
  }
}

// The gradients are sums of two terms that cancel where the gradient crosses zero (x ~ -0.75),
// so the error is measured in ulps of the larger term, the best a float sum can do. At +-inf
// they are their limits, 1 and 0. Where the exponential inside is subnormal (fewer than 24 bits)
// before it is scaled by x and the polynomial (exp(-x^2/2) below x = -13.2, exp(-|z|) below
// x = -10 for the tanh form), the gradients (below 1e-35) are checked to be within FLT_MIN.
constexpr double kGeluGradSubnormalBelow = -13.2, kGeluTanhGradSubnormalBelow = -10.0;
double gelu_grad_ref(double x) {
  return std::isinf(x) ? (x > 0) : phi(x) + x * gauss_pdf(x);
}
double gelu_tanh_grad_second(double x) {
  const double s = sigmoid_ref(gelu_tanh_z(x));
  return x * s * (1 - s) * kGeluTanhK * (1 + 3 * 0.044715 * x * x);
}
double gelu_tanh_grad_ref(double x) {
  return std::isinf(x) ? (x > 0) : sigmoid_ref(gelu_tanh_z(x)) + gelu_tanh_grad_second(x);
}

TEST_CASE("cpu math f32: gelu gradients within 8 ulp of their terms") {
  INFO(isa());
  const Tensor& x = sweep_inputs();
  Worst w = worst_error(x, grad_kernel(BinaryOp::gelu_backward, x), gelu_grad_ref, [](double v) {
    return v < kGeluGradSubnormalBelow ? -1.0 : std::max(phi(v), std::fabs(v * gauss_pdf(v)));
  });
  CHECK_MESSAGE(w.ulps <= 8.0, w.str());  // measured 5.50 / 4.97
  Worst wt = worst_error(
      x, grad_kernel(BinaryOp::gelu_tanh_backward, x), gelu_tanh_grad_ref, [](double v) {
        return v < kGeluTanhGradSubnormalBelow
                   ? -1.0
                   : std::max(sigmoid_ref(gelu_tanh_z(v)), std::fabs(gelu_tanh_grad_second(v)));
      });
  CHECK_MESSAGE(wt.ulps <= 8.0, wt.str());  // measured 4.58 / 4.58
  // the far negative tails, in absolute terms
  std::vector<float> tail;
  for (float v = -16.0f; v < kGeluGradSubnormalBelow; v += 1.0f / 64) tail.push_back(v);
  Tensor t = sl::from_vector(tail);
  std::vector<float> g = grad_kernel(BinaryOp::gelu_backward, t).to_vector<float>();
  std::vector<float> gt = grad_kernel(BinaryOp::gelu_tanh_backward, t).to_vector<float>();
  double worst_abs = 0;
  for (size_t i = 0; i < tail.size(); ++i) {
    worst_abs = std::max(worst_abs, std::fabs(g[i] - gelu_grad_ref(tail[i])));
    worst_abs = std::max(worst_abs, std::fabs(gt[i] - gelu_tanh_grad_ref(tail[i])));
  }
  CHECK(worst_abs <= kFltMin);
}

namespace {

struct ThreadsGuard {
  int saved = sl::get_num_threads();
  ~ThreadsGuard() { sl::set_num_threads(saved); }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

}  // namespace

// Determinism: which elements a vector loop, its narrower epilogue or the scalar tail computes
// depends on the thread split, the alignment and the strides, and all of them must give the
// same bits (FMA contraction is the same in every one of them).
// In place, out is the input: the AVX2 form of gelu loads a block's 32 inputs before it stores
// any output (Note [Interleaved gelu]), and a block that leaves the fast domain must be left
// untouched for the selecting form. Values from -6 to 6 give all-fast blocks and, near both
// ends, mixed ones; 1003 elements end in a partial block.
TEST_CASE("cpu math f32: gelu in place gives the out-of-place bits") {
  INFO(isa());
  const Tensor x = sl::linspace(-6.0, 6.0, 1003);
  for (UnaryOp op : {UnaryOp::gelu, UnaryOp::gelu_tanh}) {
    CAPTURE(sl::unary_op_name(op));
    const Tensor ref = unary(op, x);
    Tensor y = x.clone();
    sl::ops::unary_(op, y);
    CHECK(same_bits(y, ref));
  }
}

TEST_CASE("cpu math f32: same bits at any thread count, offset and stride") {
  INFO(isa());
  ThreadsGuard guard;
  // 200003 elements: the chunks of 2, 3 and 4 threads end at different vector lanes
  const int64_t n = 200003;
  Tensor x = sl::linspace(-16.0, 16.0, n);
  Tensor x2 = sl::stack({x, x}, 1);  // column 0 is x with stride 2
  std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> fns;
  for (UnaryOp op : {UnaryOp::exp, UnaryOp::tanh, UnaryOp::sigmoid, UnaryOp::erf, UnaryOp::gelu,
                     UnaryOp::gelu_tanh, UnaryOp::silu}) {
    fns.emplace_back(sl::unary_op_name(op), [op](const Tensor& v) { return unary(op, v); });
  }
  for (BinaryOp op :
       {BinaryOp::gelu_backward, BinaryOp::gelu_tanh_backward, BinaryOp::silu_backward}) {
    fns.emplace_back(sl::binary_op_name(op), [op](const Tensor& v) { return grad_kernel(op, v); });
  }
  for (const auto& [name, f] : fns) {
    CAPTURE(name);
    sl::set_num_threads(1);
    const Tensor ref = f(x);
    for (int threads : {2, 3, 4}) {
      sl::set_num_threads(threads);
      CHECK_MESSAGE(same_bits(f(x), ref), "threads=", threads);
    }
    sl::set_num_threads(1);
    for (int64_t k : {1, 3, 5, 7}) {
      CHECK_MESSAGE(same_bits(f(x.narrow(0, k, n - k)), ref.narrow(0, k, n - k)), "offset ", k);
    }
    CHECK_MESSAGE(same_bits(f(x2.select(1, 0)), ref), "stride 2");
  }
}

// Note [Elementwise prefetch]: inputs of kPrefetchMinBytes or more run through loops cut into
// prefetch blocks, smaller ones through the plain loops. The values must not depend on which:
// one input just over the threshold, with a length that no block or vector divides, against the
// same elements computed in pieces below it (narrowed views, so also at odd offsets).
TEST_CASE("cpu math f32: inputs large enough for prefetch give the small inputs' bits") {
  INFO(isa());
  const int64_t n = sl::cpu::kPrefetchMinBytes / static_cast<int64_t>(sizeof(float)) + 4099;
  const Tensor x = sl::linspace(-16.0, 16.0, n);
  const int64_t piece = 100003;
  REQUIRE(piece * static_cast<int64_t>(sizeof(float)) < sl::cpu::kPrefetchMinBytes);
  for (UnaryOp op : {UnaryOp::exp, UnaryOp::log1p, UnaryOp::tanh, UnaryOp::sigmoid, UnaryOp::erf,
                     UnaryOp::silu, UnaryOp::sin, UnaryOp::gelu, UnaryOp::gelu_tanh}) {
    CAPTURE(sl::unary_op_name(op));
    const Tensor whole = unary(op, x);
    int64_t differ = 0;
    for (int64_t at = 0; at < n; at += piece) {
      const int64_t len = std::min(piece, n - at);
      differ += !same_bits(unary(op, x.narrow(0, at, len)), whole.narrow(0, at, len));
    }
    CHECK_MESSAGE(differ == 0, differ, " pieces differ");
  }
}
