// Tensor::str() against PyTorch's repr. The expected strings are the output of
// tools/print_reference.py (PyTorch 1.13), one case per line there, in the same order.
#include <limits>
#include <string>

#include "support/testing.h"

using namespace sl;

namespace {

struct PrintCase {
  const char* name;
  Tensor t;
  const char* expected;
};

Tensor i64s(std::vector<int64_t> v) {
  return from_vector(v);
}
const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace

TEST_CASE("printing matches PyTorch's repr: integers exact, empty tensors name their dtype") {
  const int64_t two53 = int64_t{1} << 53;
  const std::vector<PrintCase> cases = {
      {"int64 above 2^53", i64s({two53 + 1, -two53 - 3}),
       "tensor([ 9007199254740993, -9007199254740995])"},
      {"int64 extremes", i64s({int64_t{1} << 62, std::numeric_limits<int64_t>::min(), 5}),
       "tensor([ 4611686018427387904, -9223372036854775808,                    5])"},
      {"int64 max 0-d", scalar_tensor(std::numeric_limits<int64_t>::max(), {.dtype = DType::i64}),
       "tensor(9223372036854775807)"},
      {"int32", from_vector(std::vector<int32_t>{7, std::numeric_limits<int32_t>::min()}),
       "tensor([          7, -2147483648], dtype=torch.int32)"},
      {"empty int64", empty({0}, {.dtype = DType::i64}), "tensor([], dtype=torch.int64)"},
      {"empty int32", empty({0}, {.dtype = DType::i32}), "tensor([], dtype=torch.int32)"},
      {"empty bool", empty({0}, {.dtype = DType::b8}), "tensor([], dtype=torch.bool)"},
      {"empty float64", empty({0}, {.dtype = DType::f64}), "tensor([], dtype=torch.float64)"},
      {"empty float32", empty({0}), "tensor([])"},
      {"empty 2-d int64", zeros({2, 0}, {.dtype = DType::i64}),
       "tensor([], size=(2, 0), dtype=torch.int64)"},
      {"bool", from_vector(std::vector<bool>{true, false}), "tensor([ True, False])"},
      {"float int mode", tensor({1.f, -20.f, 300.f}), "tensor([  1., -20., 300.])"},
      {"float fixed", tensor({0.5f, -1.25f}), "tensor([ 0.5000, -1.2500])"},
      {"float sci", tensor({1e-5f, 1.f}), "tensor([1.0000e-05, 1.0000e+00])"},
      {"float64 nonfinite",
       tensor({std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
               2.0}),
       "tensor([nan, inf, 2.], dtype=torch.float64)"},
      {"float nonfinite wide", tensor({-kInf, 0.f, 1234.5f, kNaN}),
       "tensor([     -inf,    0.0000, 1234.5000,       nan])"},
      {"float zeros and nan", tensor({0.f, kNaN}), "tensor([0., nan])"},
      {"float sci with inf", tensor({1e-6f, -kInf, 20.f}),
       "tensor([1.0000e-06,       -inf, 2.0000e+01])"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    CHECK(c.t.str() == std::string(c.expected));
  }
}
