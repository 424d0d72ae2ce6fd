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
  /// Throws ValueError naming op when a geometry value is outside cuDNN's int range.
  PoolDesc(const Pool2dGeometry& g, const char* op) {
    for (int64_t v : {g.kh, g.kw, g.pad_h, g.pad_w, g.stride_h, g.stride_w}) {
      SL_CHECK(v >= 0 && v <= INT32_MAX, op, ": pooling geometry value ", v,
               " is outside cuDNN's int range");
    }
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

/// What the forward and the backward share: the current device set to x_like's, the pooling
/// descriptor, the descriptors of x (and dx) [n, c, H, W] and y (and dy) [n, c, Ho, Wo] of
/// dtype dt, with x_like the [P, H, W] input (forward) or grad_input (backward), and the scaling
/// factors.
struct PoolCall {
  DeviceGuard guard;
  PoolDesc pool;
  CudnnPlanes planes;
  CudnnTensorDesc x, y;
  CudnnBlend blend;
  cudnnHandle_t handle;
  PoolCall(const Tensor& x_like, DType dt, const Pool2dGeometry& g, const char* op)
      : guard(x_like.device()),
        pool(g, op),
        planes(planes_of(x_like.size(0), op)),
        x(dt, planes.n, planes.c, x_like.size(1), x_like.size(2), op),
        y(dt, planes.n, planes.c, g.out_h, g.out_w, op),
        blend(cudnn_blend(dt)),
        handle(cudnn_handle(x_like.device().index)) {}
};

}  // namespace

void cudnn_avg_pool2d_forward(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
  const PoolCall c(input, input.dtype(), g, "avg_pool2d (cuDNN)");
  CUDNN_CHECK(cudnnPoolingForward(c.handle, c.pool.get(), c.blend.one, c.x.get(), input.data_ptr(),
                                  c.blend.zero, c.y.get(), out.data_ptr()));
}

void cudnn_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out,
                               const Pool2dGeometry& g) {
  const DType dt = grad_out.dtype();
  const PoolCall c(grad_input, dt, g, "avg_pool2d_backward (cuDNN)");
  // cudnnPoolingBackward takes the forward's y and x, which an average's gradient does not
  // depend on (only max pooling reads them), and our backward kernel is not given them: y is
  // passed as grad_out (its shape), x as an uninitialised buffer of the input's shape (not
  // grad_input itself, so cuDNN never sees x and dx alias).
  Tensor x_unused = ops::empty(grad_input.sizes(), dt, grad_input.device());
  CUDNN_CHECK(cudnnPoolingBackward(c.handle, c.pool.get(), c.blend.one, c.y.get(),
                                   grad_out.data_ptr(), c.y.get(), grad_out.data_ptr(), c.x.get(),
                                   x_unused.data_ptr(), c.blend.zero, c.x.get(),
                                   grad_input.data_ptr()));
}

}  // namespace sl::cuda
