#include "core/cuda/cudnn_tensor.h"

#include "core/error.h"

namespace sl::cuda {

cudnnDataType_t cudnn_data_type(DType dt, const char* op) {
  switch (dt) {
    case DType::f16:
      return CUDNN_DATA_HALF;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::f64:
      return CUDNN_DATA_DOUBLE;
    default:
      ::sl::detail::throw_error<DTypeError>(
          op, ": cuDNN takes float16, bfloat16, float32 or float64 data, got ", dtype_name(dt));
  }
}

CudnnTensorDesc::CudnnTensorDesc() {
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_));
}

CudnnTensorDesc::CudnnTensorDesc(DType dt, int64_t n, int64_t c, int64_t h, int64_t w,
                                 const char* op) {
  for (int64_t v : {n, c, h, w}) {
    SL_CHECK(v >= 1 && v <= INT32_MAX, op, ": cuDNN tensor sizes must be in [1, 2^31 - 1], got [",
             n, ", ", c, ", ", h, ", ", w, "]");
  }
  const cudnnDataType_t cdt = cudnn_data_type(dt, op);
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_));
  const cudnnStatus_t st =
      cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, cdt, static_cast<int>(n),
                                 static_cast<int>(c), static_cast<int>(h), static_cast<int>(w));
  if (st != CUDNN_STATUS_SUCCESS) {
    cudnnDestroyTensorDescriptor(d_);  // the constructor throws: no destructor will run
    detail::throw_cudnn_error(st, "cudnnSetTensor4dDescriptor", __FILE__, __LINE__);
  }
}

CudnnTensorDesc::~CudnnTensorDesc() {
  // cannot fail for a valid descriptor; not checked, as this also runs during unwinding
  if (d_) cudnnDestroyTensorDescriptor(d_);
}

CudnnBlend cudnn_blend(DType dt) {
  static const double kOne = 1.0, kZero = 0.0;
  static const float kOneF = 1.0f, kZeroF = 0.0f;
  if (dt == DType::f64) return {&kOne, &kZero};
  return {&kOneF, &kZeroF};
}

}  // namespace sl::cuda
