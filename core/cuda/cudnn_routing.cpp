// The routing rules of Note [cuDNN routing] (core/cuda/cudnn_routing.h).
#include "core/cuda/cudnn_routing.h"

#include <algorithm>
#include <limits>

namespace sl::cuda {

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

constexpr const char* kCudnnNoBf16 =
    "bfloat16 input (cuDNN's legacy batch-norm and pooling calls are documented for float16, "
    "float32 and float64; PyTorch keeps bfloat16 off cuDNN batch norm too)";

/// a * b * c < 2^31 - 1, without overflowing int64 (all non-negative).
bool product_below_int32(int64_t a, int64_t b, int64_t c) {
  if (a == 0 || b == 0 || c == 0) return true;
  if (a >= kInt32Max || b >= kInt32Max || c >= kInt32Max) return false;
  const int64_t ab = a * b;  // < 2^62
  return ab < kInt32Max && ab * c < kInt32Max;
}

/// cuDNN's pooling output size 1 + (in + 2 pad - k) / stride, or -1 when in + 2 pad < k.
int64_t cudnn_pool_out(int64_t in, int64_t k, int64_t pad, int64_t stride) {
  const int64_t span = in + 2 * pad - k;
  return span < 0 ? -1 : 1 + span / stride;
}

}  // namespace

const char* batch_norm_cudnn_refusal(const BatchNormCall& call) {
  if (call.input == DType::bf16) return kCudnnNoBf16;
  if (call.input != DType::f16 && call.input != DType::f32 && call.input != DType::f64) {
    return "input dtype is not float16, float32 or float64";
  }
  const DType want = call.input == DType::f64 ? DType::f64 : DType::f32;
  if (call.params && *call.params != want) {
    return call.input == DType::f64 ? "parameters are not float64 beside a float64 input"
                                    : "parameters are not float32 (cuDNN takes float32 "
                                      "parameters beside float32, float16 and bfloat16 inputs)";
  }
  if (call.backward && !call.training) {
    return "evaluation backward (cuDNN's backward differentiates through batch statistics)";
  }
  if (call.S <= 1) return "S == 1 (2-d input or H = W = 1: cuDNN's spatial kernels are slow)";
  const int64_t max_n = call.training ? kCudnnBnMaxBatchTraining : kCudnnBnMaxBatchEval;
  if (call.N > max_n) return "batch N above cuDNN's spatial batch-norm limit";
  if (!product_below_int32(call.N, call.C, call.S)) return "N * C * S >= 2^31 - 1";
  // The backward hands cuDNN the forward's eps too, so the rule holds in both directions.
  if (!(call.eps >= kCudnnBnMinEpsilon)) return "eps below CUDNN_BN_MIN_EPSILON";
  return nullptr;
}

bool batch_norm_uses_cudnn(const BatchNormCall& call) {
  return batch_norm_cudnn_refusal(call) == nullptr;
}

std::optional<CudnnPlanes> pool_cudnn_planes(int64_t P) {
  if (P < 1) return std::nullopt;
  for (int64_t c = std::min(P, kCudnnPoolMaxDim); c >= 1; --c) {
    if (P % c != 0) continue;
    const int64_t n = P / c;
    if (n > kCudnnPoolMaxDim) return std::nullopt;  // smaller c only makes n larger
    return CudnnPlanes{n, c};
  }
  return std::nullopt;
}

const char* avg_pool_cudnn_refusal(const AvgPoolCall& call) {
  const Pool2dGeometry& g = call.g;
  if (call.input == DType::bf16) return kCudnnNoBf16;
  if (call.input != DType::f16 && call.input != DType::f32 && call.input != DType::f64) {
    return "input dtype is not float16, float32 or float64";
  }
  if (g.divisor_override != 0) return "divisor_override (cuDNN divides by the window)";
  if (g.dilation_h != 1 || g.dilation_w != 1) return "dilation (cuDNN pooling has none)";
  if (g.out_h != cudnn_pool_out(call.H, g.kh, g.pad_h, g.stride_h) ||
      g.out_w != cudnn_pool_out(call.W, g.kw, g.pad_w, g.stride_w)) {
    return "output size differs from cuDNN's floor rule (a ceil_mode window)";
  }
  if (g.pad_h >= g.kh || g.pad_w >= g.kw) return "padding as large as the window";
  if (!pool_cudnn_planes(call.P)) return "P planes do not split into cuDNN's n * c";
  if (!product_below_int32(call.P, call.H, call.W) ||
      !product_below_int32(call.P, g.out_h, g.out_w)) {
    return "more than 2^31 - 2 elements";
  }
  return nullptr;
}

bool avg_pool_uses_cudnn(const AvgPoolCall& call) {
  return avg_pool_cudnn_refusal(call) == nullptr;
}

}  // namespace sl::cuda
