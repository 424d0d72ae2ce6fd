// Batch norm through cuDNN's legacy API (Note [cuDNN routing]): CUDNN_BATCHNORM_SPATIAL on the
// input [N, C, S] viewed as NCHW [N, C, S, 1]; the parameters share the descriptor cuDNN derives
// from it (1 x C x 1 x 1, float, or double for double data).
#include "core/cuda/cudnn_norm.h"

#include "core/cuda/cudnn_handle.h"
#include "core/cuda/cudnn_routing.h"
#include "core/cuda/cudnn_tensor.h"
#include "core/cuda/runtime.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"

namespace sl::cuda {

static_assert(kCudnnBnMinEpsilon == CUDNN_BN_MIN_EPSILON,
              "cudnn_routing.h's kCudnnBnMinEpsilon must equal cudnn_ops.h's CUDNN_BN_MIN_EPSILON");

namespace {

constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;

/// The parameter dtype cuDNN takes beside data of dtype dt.
DType param_dtype(DType dt) {
  return dt == DType::f64 ? DType::f64 : DType::f32;
}

/// t, or a [C] tensor filled with value in dtype pdt when t is undefined.
Tensor or_filled(const Tensor& t, int64_t C, DType pdt, Device d, double value) {
  if (t.defined()) return t;
  Tensor r = ops::empty({C}, pdt, d);
  ops::fill_(r, value);
  return r;
}

/// t, or an uninitialised scratch tensor of `sizes` when t is undefined (an output cuDNN always
/// writes).
Tensor or_scratch(const Tensor& t, const Shape& sizes, DType dt, Device d) {
  return t.defined() ? t : ops::empty(sizes, dt, d);
}

void* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr() : nullptr;
}

/// The descriptors of one call: x (and y, dy, dx) [N, C, S, 1], and the derived parameter one.
struct BnDescs {
  CudnnTensorDesc x;
  CudnnTensorDesc p;
  BnDescs(const Tensor& input, const char* op)
      : x(input.dtype(), input.size(0), input.size(1), input.size(2), 1, op) {
    CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(p.get(), x.get(), kMode));
  }
};

}  // namespace

void cudnn_batch_norm_forward(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                              const Tensor& input, const Tensor& weight, const Tensor& bias,
                              const Tensor& running_mean, const Tensor& running_var, bool training,
                              double momentum, double eps) {
  const char* op = "batch_norm (cuDNN)";
  const Device dev = input.device();
  const int64_t C = input.size(1);
  const DType pdt = param_dtype(input.dtype());
  DeviceGuard g(dev);
  BnDescs d(input, op);
  Tensor w = or_filled(weight, C, pdt, dev, 1.0);
  Tensor b = or_filled(bias, C, pdt, dev, 0.0);
  const CudnnBlend blend = cudnn_blend(input.dtype());
  cudnnHandle_t h = cudnn_handle(dev.index);
  if (training) {
    CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
        h, kMode, blend.one, blend.zero, d.x.get(), input.data_ptr(), d.x.get(), out.data_ptr(),
        d.p.get(), w.data_ptr(), b.data_ptr(), momentum, ptr_or_null(running_mean),
        ptr_or_null(running_var), eps, save_mean.data_ptr(), save_invstd.data_ptr()));
    return;
  }
  CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
      h, kMode, blend.one, blend.zero, d.x.get(), input.data_ptr(), d.x.get(), out.data_ptr(),
      d.p.get(), w.data_ptr(), b.data_ptr(), running_mean.data_ptr(), running_var.data_ptr(), eps));
  // The statistics used, as the own kernel saves them: the running mean, and
  // 1 / sqrt(running_var + eps) computed in double and rounded once.
  ops::copy_(save_mean, running_mean);
  Tensor var_eps = ops::binary(BinaryOp::add, ops::cast(running_var, DType::f64), eps);
  ops::copy_(save_invstd,
             ops::binary(BinaryOp::div, Scalar(1.0), ops::unary(UnaryOp::sqrt, var_eps)));
}

void cudnn_batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight,
                               const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                               const Tensor& weight, const Tensor& save_mean,
                               const Tensor& save_invstd) {
  const char* op = "batch_norm_backward (cuDNN)";
  const Device dev = input.device();
  const int64_t C = input.size(1);
  const DType pdt = param_dtype(input.dtype());
  DeviceGuard g(dev);
  BnDescs d(input, op);
  Tensor w = or_filled(weight, C, pdt, dev, 1.0);
  Tensor gi = or_scratch(grad_input, input.sizes(), input.dtype(), dev);
  Tensor gw = or_scratch(grad_weight, {C}, pdt, dev);
  Tensor gb = or_scratch(grad_bias, {C}, pdt, dev);
  const CudnnBlend blend = cudnn_blend(input.dtype());
  // cuDNN reads epsilon only to recompute the statistics when savedMean / savedInvVariance are
  // null; they are always given here (the forward's, whichever path computed them: both mean
  // mean and 1 / sqrt(var + eps)), so the backward kernel, which has no eps, passes the minimum.
  CUDNN_CHECK(cudnnBatchNormalizationBackward(
      cudnn_handle(dev.index), kMode, blend.one, blend.zero, blend.one, blend.zero, d.x.get(),
      input.data_ptr(), d.x.get(), grad_out.data_ptr(), d.x.get(), gi.data_ptr(), d.p.get(),
      w.data_ptr(), gw.data_ptr(), gb.data_ptr(), kCudnnBnMinEpsilon, save_mean.data_ptr(),
      save_invstd.data_ptr()));
}

}  // namespace sl::cuda
