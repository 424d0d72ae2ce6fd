// The cuDNN routing rules of Note [cuDNN routing] (core/cuda/cudnn_routing.h) and the
// sl::cuda::set_cudnn_enabled switch. Plain host code: these run in every build, with or
// without a GPU (the GPU comparisons of both paths are in test_cuda_cudnn_parity.cpp).
#include <cmath>
#include <string>
#include <vector>

#include "core/cuda/cudnn_routing.h"
#include "core/ops/pool.h"
#include "cuda_testing.h"

using namespace sl;
using sl::cuda::AvgPoolCall;
using sl::cuda::BatchNormCall;

namespace {

/// A batch-norm call: forward in training with float32 input and parameters, [8, 5, 21].
BatchNormCall bn(DType input, std::optional<DType> params) {
  BatchNormCall c;
  c.input = input;
  c.params = params;
  c.N = 8;
  c.C = 5;
  c.S = 21;
  return c;
}

/// The average-pooling call the CUDA glue sees for `input` [N, C, H, W] pooled with these
/// arguments (the geometry from the ops layer, as the kernels receive it).
AvgPoolCall pool_call(const Shape& sizes, DType dt, ExpandingArray<2> k, ExpandingArray<2> s,
                      ExpandingArray<2> p, bool ceil_mode, bool count_include_pad = true) {
  Tensor x = zeros({1, 1, sizes[2], sizes[3]});  // the geometry reads only H and W
  AvgPoolCall c;
  c.input = dt;
  c.g = ops::pool2d_geometry("avg_pool2d", x, k, s, p, {}, ceil_mode);
  c.g.count_include_pad = count_include_pad;
  c.P = sizes[0] * sizes[1];
  c.H = sizes[2];
  c.W = sizes[3];
  return c;
}

/// "cuDNN" or the refusal, for readable failure messages.
std::string route(const char* refusal) {
  return refusal == nullptr ? "cuDNN" : refusal;
}

}  // namespace

TEST_CASE("cudnn: set_cudnn_enabled round trip (default on, as torch.backends.cudnn.enabled)") {
  // every test that switches it restores it, so the process default is still visible here
  CHECK(cuda::cudnn_enabled());
  cuda::set_cudnn_enabled(false);
  CHECK_FALSE(cuda::cudnn_enabled());
  cuda::set_cudnn_enabled(false);
  CHECK_FALSE(cuda::cudnn_enabled());
  cuda::set_cudnn_enabled(true);
  CHECK(cuda::cudnn_enabled());
}

TEST_CASE("cudnn routing: batch norm case table") {
  struct Case {
    const char* what;
    BatchNormCall call;
    const char* refusal;  // substring of the expected refusal, nullptr: cuDNN
  };
  std::vector<Case> cases;
  auto add = [&](const char* what, BatchNormCall c, const char* refusal) {
    cases.push_back({what, c, refusal});
  };
  // dtypes: float parameters beside f32 / f16 data, double beside double, or none; bf16 data
  // stays on the own kernels whatever the parameters
  add("f32 / f32 params", bn(DType::f32, DType::f32), nullptr);
  add("f32 / no params", bn(DType::f32, std::nullopt), nullptr);
  add("f16 / f32 params (mixed precision)", bn(DType::f16, DType::f32), nullptr);
  add("bf16 / f32 params (mixed precision)", bn(DType::bf16, DType::f32), "bfloat16 input");
  add("bf16 / no params", bn(DType::bf16, std::nullopt), "bfloat16 input");
  add("f16 / no params", bn(DType::f16, std::nullopt), nullptr);
  add("f64 / f64 params", bn(DType::f64, DType::f64), nullptr);
  add("f64 / no params", bn(DType::f64, std::nullopt), nullptr);
  add("f16 / f16 params", bn(DType::f16, DType::f16), "parameters are not float32");
  add("bf16 / bf16 params", bn(DType::bf16, DType::bf16), "bfloat16 input");
  add("f32 / f64 params", bn(DType::f32, DType::f64), "parameters are not float32");
  add("f64 / f32 params", bn(DType::f64, DType::f32), "not float64 beside a float64 input");
  add("i64 input", bn(DType::i64, std::nullopt), "input dtype");
  // passes: evaluation forward and training backward go through cuDNN, evaluation backward not
  BatchNormCall c = bn(DType::f32, DType::f32);
  c.training = false;
  add("evaluation forward", c, nullptr);
  c.backward = true;
  add("evaluation backward", c, "evaluation backward");
  c.training = true;
  add("training backward", c, nullptr);
  c.eps = -1;  // the backward hands cuDNN the forward's eps, which must be >= its minimum too
  add("training backward, eps < 0", c, "eps");
  // S == 1: 2-d inputs and [N, C, 1, 1]
  c = bn(DType::f32, DType::f32);
  c.S = 1;
  add("S == 1", c, "S == 1");
  c.backward = true;
  add("S == 1 backward", c, "S == 1");
  // batch limits, each side of the boundary
  c = bn(DType::f32, DType::f32);
  c.C = 1;
  c.S = 2;
  c.N = cuda::kCudnnBnMaxBatchTraining;
  add("training N at the limit", c, nullptr);
  c.N += 1;
  add("training N above the limit", c, "batch N");
  c.training = false;
  c.N = cuda::kCudnnBnMaxBatchEval;
  add("evaluation N at the limit", c, nullptr);
  c.N += 1;
  add("evaluation N above the limit", c, "batch N");
  // element count: below 2^31 - 1 only
  c = bn(DType::f32, DType::f32);
  c.N = 2;
  c.C = 1;
  c.S = 1073741823;  // 2^31 - 2 elements
  add("2^31 - 2 elements", c, nullptr);
  c.S = 1073741824;  // 2^31
  add("2^31 elements", c, "N * C * S");
  c.N = 4096;
  c.C = 4096;
  c.S = 4096;  // 2^36: the product is formed without overflow
  add("2^36 elements", c, "N * C * S");
  // eps: CUDNN_BN_MIN_EPSILON is 0 in cuDNN 9
  c = bn(DType::f32, DType::f32);
  c.eps = 0;
  add("eps 0", c, nullptr);
  c.eps = -1e-3;
  add("eps < 0", c, "eps");
  c.eps = std::nan("");
  add("eps NaN", c, "eps");
  for (const Case& k : cases) {
    CAPTURE(k.what);
    const std::string got = route(cuda::batch_norm_cudnn_refusal(k.call));
    if (k.refusal == nullptr) {
      CHECK(got == "cuDNN");
      CHECK(cuda::batch_norm_uses_cudnn(k.call));
    } else {
      CHECK_MESSAGE(got.find(k.refusal) != std::string::npos, got);
      CHECK_FALSE(cuda::batch_norm_uses_cudnn(k.call));
    }
  }
}

TEST_CASE("cudnn routing: the planes of a pooling call as cuDNN's n * c") {
  using cuda::pool_cudnn_planes;
  auto split = [](int64_t P) {
    auto s = pool_cudnn_planes(P);
    return s ? std::pair{s->n, s->c} : std::pair{int64_t{-1}, int64_t{-1}};
  };
  CHECK(split(1) == std::pair<int64_t, int64_t>{1, 1});
  CHECK(split(12) == std::pair<int64_t, int64_t>{1, 12});
  CHECK(split(65535) == std::pair<int64_t, int64_t>{1, 65535});
  // 2^17: the largest divisor within 65535 is 2^15
  CHECK(split(131072) == std::pair<int64_t, int64_t>{4, 32768});
  CHECK(split(256 * 512) == std::pair<int64_t, int64_t>{4, 32768});
  CHECK(split(75000) == std::pair<int64_t, int64_t>{2, 37500});
  CHECK(split(int64_t{65535} * 65535) == std::pair<int64_t, int64_t>{65535, 65535});
  // 65537 is prime: 1 * 65537 only; 2 * 65537: c = 2 leaves n = 65537
  CHECK_FALSE(pool_cudnn_planes(65537).has_value());
  CHECK_FALSE(pool_cudnn_planes(2 * 65537).has_value());
  CHECK_FALSE(pool_cudnn_planes(0).has_value());
  for (int64_t P : {int64_t{7}, int64_t{65534}, int64_t{100000}, int64_t{3} * 65535 * 7}) {
    CAPTURE(P);
    auto s = pool_cudnn_planes(P);
    REQUIRE(s.has_value());
    CHECK(s->n * s->c == P);
    CHECK(s->n <= cuda::kCudnnPoolMaxDim);
    CHECK(s->c <= cuda::kCudnnPoolMaxDim);
  }
}

TEST_CASE("cudnn routing: average pooling case table") {
  struct Case {
    const char* what;
    AvgPoolCall call;
    const char* refusal;  // substring of the expected refusal, nullptr: cuDNN
  };
  const Shape s1{2, 3, 10, 7};
  std::vector<Case> cases = {
      {"k3 s2 p1, count_include_pad", pool_call(s1, DType::f32, 3, 2, 1, false), nullptr},
      {"k3 s2 p1, exclude padding", pool_call(s1, DType::f32, 3, 2, 1, false, false), nullptr},
      {"k2 (stride = kernel)", pool_call(s1, DType::f32, 2, {}, 0, false), nullptr},
      {"k {3, 2} s {1, 2} p {1, 0}", pool_call(s1, DType::f32, {3, 2}, {1, 2}, {1, 0}, false),
       nullptr},
      {"f64", pool_call(s1, DType::f64, 3, 2, 1, false), nullptr},
      {"f16", pool_call(s1, DType::f16, 3, 2, 1, false), nullptr},
      {"bf16", pool_call(s1, DType::bf16, 3, 2, 1, false), "bfloat16 input"},
      // H = 11, k 3, s 2, p 1: floor and ceil both give 6 rows, W = 7: 4 both ways
      {"ceil_mode adding no window", pool_call({2, 3, 11, 7}, DType::f32, 3, 2, 1, true), nullptr},
      // H = 10: ceil gives 6 rows, floor 5
      {"ceil_mode adding a window", pool_call(s1, DType::f32, 3, 2, 1, true),
       "output size differs"},
      {"many planes (300 * 250 = 2 * 37500)",
       pool_call({300, 250, 4, 4}, DType::f32, 2, 2, 0, false), nullptr},
      {"65537 planes (prime)", pool_call({1, 65537, 4, 4}, DType::f32, 2, 2, 0, false),
       "do not split"},
      {"2^31 + elements", pool_call({65535, 4, 100, 100}, DType::f32, 2, 2, 0, false),
       "2^31 - 2 elements"},
  };
  AvgPoolCall c = pool_call(s1, DType::f32, 2, {}, 0, false);
  c.g.divisor_override = 3;
  cases.push_back({"divisor_override", c, "divisor_override"});
  c = pool_call(s1, DType::f32, 2, {}, 0, false);
  c.g.dilation_w = 2;
  cases.push_back({"dilation", c, "dilation"});
  c = pool_call(s1, DType::i64, 2, {}, 0, false);
  cases.push_back({"i64 input", c, "input dtype"});
  c = pool_call(s1, DType::f32, 1, 1, 0, false);
  c.g.pad_h = 1;  // not reachable through pool2d_geometry (padding <= kernel / 2)
  c.g.out_h = 12;
  cases.push_back({"padding as large as the window", c, "padding as large"});
  for (const Case& k : cases) {
    CAPTURE(k.what);
    const std::string got = route(cuda::avg_pool_cudnn_refusal(k.call));
    if (k.refusal == nullptr) {
      CHECK(got == "cuDNN");
      CHECK(cuda::avg_pool_uses_cudnn(k.call));
    } else {
      CHECK_MESSAGE(got.find(k.refusal) != std::string::npos, got);
      CHECK_FALSE(cuda::avg_pool_uses_cudnn(k.call));
    }
  }
}
