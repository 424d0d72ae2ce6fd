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

/// What the forward and the backward share: the current device set to the input's, the
/// descriptors of x (and y, dy, dx) [N, C, S, 1] and the parameter one cuDNN derives from it,
/// the weight (ones when undefined), the scaling factors and the handle.
struct BnCall {
  Device dev;
  int64_t C;
  DType pdt;  ///< the parameters' dtype
  DeviceGuard guard;
  CudnnTensorDesc x;
  CudnnTensorDesc p;
  Tensor weight;
  CudnnBlend blend;
  cudnnHandle_t handle;
  BnCall(const Tensor& input, const Tensor& w, const char* op)
      : dev(input.device()),
        C(input.size(1)),
        pdt(param_dtype(input.dtype())),
        guard(dev),
        x(input.dtype(), input.size(0), input.size(1), input.size(2), 1, op),
        weight(or_filled(w, C, pdt, dev, 1.0)),
        blend(cudnn_blend(input.dtype())),
        handle(cudnn_handle(dev.index)) {
    CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(p.get(), x.get(), kMode));
  }
};

}  // namespace

void cudnn_batch_norm_forward(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                              const Tensor& input, const Tensor& weight, const Tensor& bias,
                              const Tensor& running_mean, const Tensor& running_var, bool training,
                              double momentum, double eps) {
  const BnCall c(input, weight, "batch_norm (cuDNN)");
  Tensor b = or_filled(bias, c.C, c.pdt, c.dev, 0.0);
  if (training) {
    CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
        c.handle, kMode, c.blend.one, c.blend.zero, c.x.get(), input.data_ptr(), c.x.get(),
        out.data_ptr(), c.p.get(), c.weight.data_ptr(), b.data_ptr(), momentum,
        ptr_or_null(running_mean), ptr_or_null(running_var), eps, save_mean.data_ptr(),
        save_invstd.data_ptr()));
    return;
  }
  CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
      c.handle, kMode, c.blend.one, c.blend.zero, c.x.get(), input.data_ptr(), c.x.get(),
      out.data_ptr(), c.p.get(), c.weight.data_ptr(), b.data_ptr(), running_mean.data_ptr(),
      running_var.data_ptr(), eps));
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
                               const Tensor& save_invstd, double eps) {
  const BnCall c(input, weight, "batch_norm_backward (cuDNN)");
  Tensor gi = or_scratch(grad_input, input.sizes(), input.dtype(), c.dev);
  Tensor gw = or_scratch(grad_weight, {c.C}, c.pdt, c.dev);
  Tensor gb = or_scratch(grad_bias, {c.C}, c.pdt, c.dev);
  // epsilon: the forward's, as cuDNN documents it ("Same epsilon as forward pass" at this
  // parameter in cudnn_ops_v9.h; the forward's reads "Has to be >= CUDNN_BN_MIN_EPSILON. Should
  // be the same in forward and backward functions"). savedMean / savedInvVariance are always
  // given (the forward's, whichever path computed them: both mean mean and 1 / sqrt(var + eps)),
  // so cuDNN does not recompute the statistics from it.
  CUDNN_CHECK(cudnnBatchNormalizationBackward(
      c.handle, kMode, c.blend.one, c.blend.zero, c.blend.one, c.blend.zero, c.x.get(),
      input.data_ptr(), c.x.get(), grad_out.data_ptr(), c.x.get(), gi.data_ptr(), c.p.get(),
      c.weight.data_ptr(), gw.data_ptr(), gb.data_ptr(), eps, save_mean.data_ptr(),
      save_invstd.data_ptr()));
}

}  // namespace sl::cuda
