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

TEST_CASE("printing summarises more than 1000 elements as PyTorch's repr") {
  // Three edge items each side; "..." stands for the rest, written " ..." among a row's
  // elements (one of its items when the row wraps) and on its own line between rows.
  const std::vector<PrintCase> cases = {
      {"summarised 1-d", arange(2000), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"},
      {"summarised 1-d wrapped", arange(0, 1001, 1, {.dtype = DType::f64}) * 1e10,
       "tensor([0.0000e+00, 1.0000e+10, 2.0000e+10,  ..., 9.9800e+12, 9.9900e+12,\n"
       "        1.0000e+13], dtype=torch.float64)"},
      {"summarised rows", arange(3000).reshape({1000, 3}),
       "tensor([[   0,    1,    2],\n"
       "        [   3,    4,    5],\n"
       "        [   6,    7,    8],\n"
       "        ...,\n"
       "        [2991, 2992, 2993],\n"
       "        [2994, 2995, 2996],\n"
       "        [2997, 2998, 2999]])"},
      {"summarised rows and columns", arange(2000).reshape({10, 200}),
       "tensor([[   0,    1,    2,  ...,  197,  198,  199],\n"
       "        [ 200,  201,  202,  ...,  397,  398,  399],\n"
       "        [ 400,  401,  402,  ...,  597,  598,  599],\n"
       "        ...,\n"
       "        [1400, 1401, 1402,  ..., 1597, 1598, 1599],\n"
       "        [1600, 1601, 1602,  ..., 1797, 1798, 1799],\n"
       "        [1800, 1801, 1802,  ..., 1997, 1998, 1999]])"},
      {"summarised 3-d", arange(0, 2000, 1, {.dtype = DType::f32}).reshape({10, 10, 20}) / 8,
       "tensor([[[0.0000e+00, 1.2500e-01, 2.5000e-01,  ..., 2.1250e+00,\n"
       "          2.2500e+00, 2.3750e+00],\n"
       "         [2.5000e+00, 2.6250e+00, 2.7500e+00,  ..., 4.6250e+00,\n"
       "          4.7500e+00, 4.8750e+00],\n"
       "         [5.0000e+00, 5.1250e+00, 5.2500e+00,  ..., 7.1250e+00,\n"
       "          7.2500e+00, 7.3750e+00],\n"
       "         ...,\n"
       "         [1.7500e+01, 1.7625e+01, 1.7750e+01,  ..., 1.9625e+01,\n"
       "          1.9750e+01, 1.9875e+01],\n"
       "         [2.0000e+01, 2.0125e+01, 2.0250e+01,  ..., 2.2125e+01,\n"
       "          2.2250e+01, 2.2375e+01],\n"
       "         [2.2500e+01, 2.2625e+01, 2.2750e+01,  ..., 2.4625e+01,\n"
       "          2.4750e+01, 2.4875e+01]],\n"
       "\n"
       "        [[2.5000e+01, 2.5125e+01, 2.5250e+01,  ..., 2.7125e+01,\n"
       "          2.7250e+01, 2.7375e+01],\n"
       "         [2.7500e+01, 2.7625e+01, 2.7750e+01,  ..., 2.9625e+01,\n"
       "          2.9750e+01, 2.9875e+01],\n"
       "         [3.0000e+01, 3.0125e+01, 3.0250e+01,  ..., 3.2125e+01,\n"
       "          3.2250e+01, 3.2375e+01],\n"
       "         ...,\n"
       "         [4.2500e+01, 4.2625e+01, 4.2750e+01,  ..., 4.4625e+01,\n"
       "          4.4750e+01, 4.4875e+01],\n"
       "         [4.5000e+01, 4.5125e+01, 4.5250e+01,  ..., 4.7125e+01,\n"
       "          4.7250e+01, 4.7375e+01],\n"
       "         [4.7500e+01, 4.7625e+01, 4.7750e+01,  ..., 4.9625e+01,\n"
       "          4.9750e+01, 4.9875e+01]],\n"
       "\n"
       "        [[5.0000e+01, 5.0125e+01, 5.0250e+01,  ..., 5.2125e+01,\n"
       "          5.2250e+01, 5.2375e+01],\n"
       "         [5.2500e+01, 5.2625e+01, 5.2750e+01,  ..., 5.4625e+01,\n"
       "          5.4750e+01, 5.4875e+01],\n"
       "         [5.5000e+01, 5.5125e+01, 5.5250e+01,  ..., 5.7125e+01,\n"
       "          5.7250e+01, 5.7375e+01],\n"
       "         ...,\n"
       "         [6.7500e+01, 6.7625e+01, 6.7750e+01,  ..., 6.9625e+01,\n"
       "          6.9750e+01, 6.9875e+01],\n"
       "         [7.0000e+01, 7.0125e+01, 7.0250e+01,  ..., 7.2125e+01,\n"
       "          7.2250e+01, 7.2375e+01],\n"
       "         [7.2500e+01, 7.2625e+01, 7.2750e+01,  ..., 7.4625e+01,\n"
       "          7.4750e+01, 7.4875e+01]],\n"
       "\n"
       "        ...,\n"
       "\n"
       "        [[1.7500e+02, 1.7512e+02, 1.7525e+02,  ..., 1.7712e+02,\n"
       "          1.7725e+02, 1.7738e+02],\n"
       "         [1.7750e+02, 1.7762e+02, 1.7775e+02,  ..., 1.7962e+02,\n"
       "          1.7975e+02, 1.7988e+02],\n"
       "         [1.8000e+02, 1.8012e+02, 1.8025e+02,  ..., 1.8212e+02,\n"
       "          1.8225e+02, 1.8238e+02],\n"
       "         ...,\n"
       "         [1.9250e+02, 1.9262e+02, 1.9275e+02,  ..., 1.9462e+02,\n"
       "          1.9475e+02, 1.9488e+02],\n"
       "         [1.9500e+02, 1.9512e+02, 1.9525e+02,  ..., 1.9712e+02,\n"
       "          1.9725e+02, 1.9738e+02],\n"
       "         [1.9750e+02, 1.9762e+02, 1.9775e+02,  ..., 1.9962e+02,\n"
       "          1.9975e+02, 1.9988e+02]],\n"
       "\n"
       "        [[2.0000e+02, 2.0012e+02, 2.0025e+02,  ..., 2.0212e+02,\n"
       "          2.0225e+02, 2.0238e+02],\n"
       "         [2.0250e+02, 2.0262e+02, 2.0275e+02,  ..., 2.0462e+02,\n"
       "          2.0475e+02, 2.0488e+02],\n"
       "         [2.0500e+02, 2.0512e+02, 2.0525e+02,  ..., 2.0712e+02,\n"
       "          2.0725e+02, 2.0738e+02],\n"
       "         ...,\n"
       "         [2.1750e+02, 2.1762e+02, 2.1775e+02,  ..., 2.1962e+02,\n"
       "          2.1975e+02, 2.1988e+02],\n"
       "         [2.2000e+02, 2.2012e+02, 2.2025e+02,  ..., 2.2212e+02,\n"
       "          2.2225e+02, 2.2238e+02],\n"
       "         [2.2250e+02, 2.2262e+02, 2.2275e+02,  ..., 2.2462e+02,\n"
       "          2.2475e+02, 2.2488e+02]],\n"
       "\n"
       "        [[2.2500e+02, 2.2512e+02, 2.2525e+02,  ..., 2.2712e+02,\n"
       "          2.2725e+02, 2.2738e+02],\n"
       "         [2.2750e+02, 2.2762e+02, 2.2775e+02,  ..., 2.2962e+02,\n"
       "          2.2975e+02, 2.2988e+02],\n"
       "         [2.3000e+02, 2.3012e+02, 2.3025e+02,  ..., 2.3212e+02,\n"
       "          2.3225e+02, 2.3238e+02],\n"
       "         ...,\n"
       "         [2.4250e+02, 2.4262e+02, 2.4275e+02,  ..., 2.4462e+02,\n"
       "          2.4475e+02, 2.4488e+02],\n"
       "         [2.4500e+02, 2.4512e+02, 2.4525e+02,  ..., 2.4712e+02,\n"
       "          2.4725e+02, 2.4738e+02],\n"
       "         [2.4750e+02, 2.4762e+02, 2.4775e+02,  ..., 2.4962e+02,\n"
       "          2.4975e+02, 2.4988e+02]]])"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    CHECK(c.t.str() == std::string(c.expected));
  }
}
