// Average pooling through cuDNN's legacy pooling API (Note [cuDNN routing]): the [P, H, W] planes
// are viewed as NCHW [n, c, H, W] with n * c = P (pool_cudnn_planes), one pooling descriptor per
// call.
#include "core/cuda/cudnn_pool.h"

#include "core/cuda/cudnn_handle.h"
#include "core/cuda/cudnn_routing.h"
#include "core/cuda/cudnn_tensor.h"
#include "core/cuda/runtime.h"
#include "core/ops/copy.h"

namespace sl::cuda {

namespace {

/// A pooling descriptor for geometry g (average, counting the padding or not), destroyed with
/// the object.
class PoolDesc {
 public:
  explicit PoolDesc(const Pool2dGeometry& g) {
    CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d_));
    const cudnnPoolingMode_t mode = g.count_include_pad
                                        ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                        : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    const cudnnStatus_t st = cudnnSetPooling2dDescriptor(
        d_, mode, CUDNN_PROPAGATE_NAN, static_cast<int>(g.kh), static_cast<int>(g.kw),
        static_cast<int>(g.pad_h), static_cast<int>(g.pad_w), static_cast<int>(g.stride_h),
        static_cast<int>(g.stride_w));
    if (st != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyPoolingDescriptor(d_);  // the constructor throws: no destructor will run
      detail::throw_cudnn_error(st, "cudnnSetPooling2dDescriptor", __FILE__, __LINE__);
    }
  }
  ~PoolDesc() { cudnnDestroyPoolingDescriptor(d_); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
  cudnnPoolingDescriptor_t get() const { return d_; }

 private:
  cudnnPoolingDescriptor_t d_ = nullptr;
};

/// The (n, c) view of P planes; throws ValueError naming op when there is none (the routing
/// refuses such calls, so this is reached only by a caller that skipped it).
CudnnPlanes planes_of(int64_t P, const char* op) {
  auto s = pool_cudnn_planes(P);
  SL_CHECK(s.has_value(), op, ": ", P,
           " planes do not split into cuDNN's n * c (each <= ", kCudnnPoolMaxDim, ")");
  return *s;
}

void check_geometry(const Pool2dGeometry& g, const char* op) {
  for (int64_t v : {g.kh, g.kw, g.pad_h, g.pad_w, g.stride_h, g.stride_w}) {
    SL_CHECK(v >= 0 && v <= INT32_MAX, op, ": pooling geometry value ", v,
             " is outside cuDNN's int range");
  }
}

}  // namespace

void cudnn_avg_pool2d_forward(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
  const char* op = "avg_pool2d (cuDNN)";
  check_geometry(g, op);
  const CudnnPlanes s = planes_of(input.size(0), op);
  const DType dt = input.dtype();
  DeviceGuard dg(input.device());
  CudnnTensorDesc xd(dt, s.n, s.c, input.size(1), input.size(2), op);
  CudnnTensorDesc yd(dt, s.n, s.c, g.out_h, g.out_w, op);
  PoolDesc pd(g);
  const CudnnBlend b = cudnn_blend(dt);
  CUDNN_CHECK(cudnnPoolingForward(cudnn_handle(input.device().index), pd.get(), b.one, xd.get(),
                                  input.data_ptr(), b.zero, yd.get(), out.data_ptr()));
}

void cudnn_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out,
                               const Pool2dGeometry& g) {
  const char* op = "avg_pool2d_backward (cuDNN)";
  check_geometry(g, op);
  const CudnnPlanes s = planes_of(grad_input.size(0), op);
  const DType dt = grad_out.dtype();
  DeviceGuard dg(grad_out.device());
  CudnnTensorDesc xd(dt, s.n, s.c, grad_input.size(1), grad_input.size(2), op);
  CudnnTensorDesc yd(dt, s.n, s.c, g.out_h, g.out_w, op);
  PoolDesc pd(g);
  const CudnnBlend b = cudnn_blend(dt);
  // cudnnPoolingBackward takes the forward's y and x, which an average's gradient does not
  // depend on (only max pooling reads them), and our backward kernel is not given them: y is
  // passed as grad_out (its shape), x as an uninitialised buffer of the input's shape (not
  // grad_input itself, so cuDNN never sees x and dx alias).
  Tensor x_unused = ops::empty(grad_input.sizes(), dt, grad_input.device());
  CUDNN_CHECK(cudnnPoolingBackward(cudnn_handle(grad_out.device().index), pd.get(), b.one, yd.get(),
                                   grad_out.data_ptr(), yd.get(), grad_out.data_ptr(), xd.get(),
                                   x_unused.data_ptr(), b.zero, xd.get(), grad_input.data_ptr()));
}

}  // namespace sl::cuda
