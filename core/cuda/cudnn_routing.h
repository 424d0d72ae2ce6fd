// Which CUDA pooling and batch-norm calls go through cuDNN and which stay on Shardlight's own
// kernels: plain host functions (no CUDA types), built in every build so their case tables are
// tested on any machine (tests/cuda/test_cudnn_routing.cpp).
//
// Note [cuDNN routing]
// cuDNN 9's legacy ops API (cudnn_ops.h) is used only where its results mean exactly what ours
// (and PyTorch's) do; everything else runs on the own kernels (core/cuda/pool.cu, norm.cu), which
// cover every case. The CUDA glue (core/cuda/pool.cpp, norm.cpp) asks the functions below, and
// takes cuDNN only when the build has it (SL_HAVE_CUDNN) and sl::cuda::cudnn_enabled().
//
// Batch norm (cudnn_norm.cpp, CUDNN_BATCHNORM_SPATIAL on x viewed as [N, C, S, 1], NCHW; the
// kernels receive contiguous inputs, so no strided case reaches cuDNN):
//  - cuDNN: forward training and evaluation, and the training backward, when
//      * the input is float16, float32 or float64: bfloat16 stays on the own kernels (cuDNN's
//        legacy calls document no bfloat16 data, and PyTorch keeps bfloat16 off cuDNN batch
//        norm; a refusal at run time would be an error, not a fallback);
//      * the parameters (weight, bias, running statistics, their gradients) are float32 beside a
//        float32 / float16 input and float64 beside a float64 input (cuDNN's derived
//        scale/bias/mean/variance descriptor type), or are all absent;
//      * S > 1 (2-d inputs and [N, C, 1, 1] stay on the own kernels: cuDNN's spatial kernels are
//        an order of magnitude slower at H = W = 1, pytorch/pytorch#57034, which is why PyTorch
//        keeps 2-d inputs off cuDNN too);
//      * N <= 880801 (training) / 65535 (evaluation) and N * C * S < 2^31 - 1 (cuDNN reports
//        NOT_SUPPORTED above these; the limits PyTorch applies, pytorch/pytorch#32763);
//      * eps >= CUDNN_BN_MIN_EPSILON (0 in cuDNN 9; kept as a rule for other versions).
//    Semantics that match: the output uses the biased batch variance; cuDNN's saved mean and
//    saved "inverse variance" are mean and 1 / sqrt(var + eps), exactly our save_mean /
//    save_invstd (so either side's backward takes the other's statistics); the running
//    statistics become (1 - f) * running + f * batch with f = momentum (exponentialAverageFactor)
//    and the unbiased batch variance n / (n - 1), as ours. An absent weight / bias is supplied
//    as ones / zeros, absent running statistics as null pointers (cuDNN then skips the update),
//    absent gradients as scratch buffers. Evaluation's save_mean / save_invstd (the running
//    statistics used) are computed beside cuDNN's inference call with the own formula.
//  - own kernels: 16-bit parameters (cuDNN takes float parameters beside 16-bit data; casting
//    them would make the in-place running-stat update a copy back), S == 1, larger N, and the
//    evaluation backward (cuDNN's backward differentiates through the batch statistics; in
//    evaluation they are constants).
//
// Average pooling (cudnn_pool.cpp; the [P, H, W] planes viewed as [n, c, H, W] with n * c = P):
//  - cuDNN when dilation is 1, divisor_override is unset and the output size is cuDNN's
//    1 + (H + 2 pad - k) / stride (floor), which holds for every floor-mode geometry and for
//    ceil_mode when it adds no window; count_include_pad maps to
//    CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING (divisor kh * kw: in floor mode no window
//    reaches past the padding) and otherwise to ..._EXCLUDE_PADDING (divisor = the in-bounds
//    elements; padding <= kernel / 2 means no window lies wholly in the padding); plus the
//    size limits of pool_cudnn_planes and 32-bit element counts.
//  - own kernels: bfloat16 (as for batch norm), ceil_mode windows cuDNN cannot express,
//    divisor_override, dilation.
//
// Max pooling and adaptive average pooling always run on the own kernels. Max pooling returns
// and consumes indices (the first maximum of a window on ties, NaN wins), which cuDNN's forward
// does not produce; its backward recomputes the argmax from x and y with unspecified
// tie-breaking, so after a ReLU (windows of equal zeros are common) the gradient could land on
// another element than PyTorch's, or on several. cuDNN has no adaptive pooling (its windows
// have one size). Convolution has no own CUDA kernel: it always goes through cuDNN
// (core/cuda/conv.cpp), whatever cudnn_enabled() says.
#pragma once

#include <cstdint>
#include <optional>

#include "core/dtype.h"
#include "core/ops/pool.h"

namespace sl::cuda {

/// CUDNN_BN_MIN_EPSILON of cuDNN 9 (cudnn_ops.h; cudnn_norm.cpp checks that the header agrees).
inline constexpr double kCudnnBnMinEpsilon = 0.0;
/// Largest batch N that cuDNN's spatial batch norm takes in training / evaluation.
inline constexpr int64_t kCudnnBnMaxBatchTraining = 880801;
inline constexpr int64_t kCudnnBnMaxBatchEval = 65535;
/// Largest n and c of the [n, c, H, W] view handed to cuDNN's pooling.
inline constexpr int64_t kCudnnPoolMaxDim = 65535;

/// One batch-norm kernel call as the CUDA glue sees it: input [N, C, S] (contiguous).
struct BatchNormCall {
  bool backward = false;  ///< the backward kernel (else the forward)
  bool training = true;
  DType input = DType::f32;
  /// The dtype shared by the given parameters (weight, bias, running statistics; in backward
  /// weight and the parameter gradients); nullopt when none is given.
  std::optional<DType> params;
  int64_t N = 0, C = 0, S = 0;
  double eps = 1e-5;  ///< the forward's epsilon (the backward hands cuDNN the same value)
};

/// Why `call` stays on the own kernels (a fixed sentence), or nullptr when it goes through
/// cuDNN (Note [cuDNN routing]). Pure: it does not look at cudnn_enabled() or the build.
const char* batch_norm_cudnn_refusal(const BatchNormCall& call);
/// batch_norm_cudnn_refusal(call) == nullptr.
bool batch_norm_uses_cudnn(const BatchNormCall& call);

/// One average-pooling kernel call: input [P, H, W] (contiguous), geometry g.
struct AvgPoolCall {
  DType input = DType::f32;
  int64_t P = 0, H = 0, W = 0;
  Pool2dGeometry g;
};

/// Why `call` stays on the own kernels, or nullptr when it goes through cuDNN (forward and
/// backward route alike). Pure, as batch_norm_cudnn_refusal.
const char* avg_pool_cudnn_refusal(const AvgPoolCall& call);
bool avg_pool_uses_cudnn(const AvgPoolCall& call);

/// P planes as cuDNN's (n, c) with n * c = P and both <= kCudnnPoolMaxDim: c is the largest
/// divisor of P within the limit. nullopt when P < 1 or no such split exists (P has no divisor
/// <= the limit whose cofactor is within it too, e.g. a prime above it).
struct CudnnPlanes {
  int64_t n, c;
};
std::optional<CudnnPlanes> pool_cudnn_planes(int64_t P);

}  // namespace sl::cuda
