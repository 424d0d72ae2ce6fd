// Factory functions against PyTorch 1.13's results: linspace with one step, integer arange beyond
// 2^53 (where double cannot hold every integer).
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/testing.h"

using namespace sl;

TEST_CASE("linspace with one step gives start, as torch.linspace") {
  CHECK(linspace(0, 1, 1).to_vector<float>() == std::vector<float>{0.0f});
  CHECK(linspace(5, 1, 1).to_vector<float>() == std::vector<float>{5.0f});
  CHECK(linspace(-2.5, 7, 1, {.dtype = DType::f64}).to_vector<double>() ==
        std::vector<double>{-2.5});
  // two and more steps keep both ends
  CHECK(linspace(0, 1, 2).to_vector<float>() == std::vector<float>{0.0f, 1.0f});
  CHECK(linspace(0, 1, 5).to_vector<float>() == std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f, 1.0f});
  CHECK(linspace(0, 1, 0).numel() == 0);
}

TEST_CASE("linspace: ends that are not finite or do not fit the dtype are refused") {
  const double inf = std::numeric_limits<double>::infinity();
  // PyTorch 1.13 returns [nan, inf, nan, nan] for torch.linspace(0, inf, 4): refused here
  SL_CHECK_THROWS(linspace(0, inf, 4), ValueError,
                  "linspace: start and end must be finite for 4 steps, got 0 and inf");
  SL_CHECK_THROWS(linspace(std::nan(""), 1, 3), ValueError, "must be finite for 3 steps");
  // one step is start, whatever it is (as PyTorch)
  CHECK(std::isinf(linspace(inf, 0, 1, {.dtype = DType::f64}).item<double>()));
  // torch.linspace(0, 3e9, 3, dtype=torch.int32): "value cannot be converted to type int
  // without overflow"; Shardlight used to wrap the end to -2147483648
  SL_CHECK_THROWS(linspace(0, 3e9, 3, {.dtype = DType::i32}), ValueError,
                  "linspace: value 3e+09 cannot be converted to int32");
  SL_CHECK_THROWS(linspace(-1e39, 0, 3), ValueError,
                  "linspace: value -1e+39 cannot be converted to float32 without overflow");
  CHECK(linspace(0, 3e9, 3, {.dtype = DType::i64}).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1500000000, 3000000000});
  // ends further apart than the largest double: exact, where PyTorch 1.13 gives
  // [nan, -inf, nan] for torch.linspace(-1e308, 1e308, 3, dtype=torch.float64)
  CHECK(linspace(-1e308, 1e308, 3, {.dtype = DType::f64}).to_vector<double>() ==
        std::vector<double>{-1e308, 0.0, 1e308});
  CHECK(linspace(-1e308, 1e308, 2, {.dtype = DType::f64}).to_vector<double>() ==
        std::vector<double>{-1e308, 1e308});
  CHECK(linspace(-1e308, 1e308, 5, {.dtype = DType::f64}).to_vector<double>() ==
        std::vector<double>{-1e308, -5e307, 0.0, 5e307, 1e308});
}

TEST_CASE("integer arange is computed in int64: exact beyond 2^53 and near the int64 limits") {
  const int64_t p53 = int64_t{1} << 53, p62 = int64_t{1} << 62;
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  CHECK(arange(p53, p53 + 5).to_vector<int64_t>() ==
        std::vector<int64_t>{p53, p53 + 1, p53 + 2, p53 + 3, p53 + 4});
  CHECK(arange(p53 + 1, p53 + 9, 3).to_vector<int64_t>() ==
        std::vector<int64_t>{p53 + 1, p53 + 4, p53 + 7});
  CHECK(arange(p62, p62 + 3).to_vector<int64_t>() == std::vector<int64_t>{p62, p62 + 1, p62 + 2});
  CHECK(arange(lo, lo + 3).to_vector<int64_t>() == std::vector<int64_t>{lo, lo + 1, lo + 2});
  // i * step overflows int64 though every value fits
  CHECK(arange(lo, hi, p62).to_vector<int64_t>() == std::vector<int64_t>{lo, lo + p62, 0, p62});
  CHECK(arange(hi, hi - 3, -1).to_vector<int64_t>() == std::vector<int64_t>{hi, hi - 1, hi - 2});
  // the count is ceil((end - start) / step) for either sign
  CHECK(arange(10, 0, -3).to_vector<int64_t>() == std::vector<int64_t>{10, 7, 4, 1});
  CHECK(arange(0, 9, 3).to_vector<int64_t>() == std::vector<int64_t>{0, 3, 6});
  CHECK(arange(5, 5).numel() == 0);
  CHECK(arange(Scalar(0), Scalar(4), Scalar(1), {.dtype = DType::i32}).to_vector<int32_t>() ==
        std::vector<int32_t>{0, 1, 2, 3});
  SL_CHECK_THROWS(arange(lo, hi), ValueError, "has more elements than int64 can count");
  SL_CHECK_THROWS(arange(0, 5, 0), ValueError, "arange: step must be nonzero");
  SL_CHECK_THROWS(arange(5, 0, 1), ValueError, "inconsistent with step sign");
  // floating bounds keep the double path (and the default float dtype)
  CHECK(arange(0.0, 1.0, 0.25).to_vector<float>() == std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f});
}
