// Tensor descriptors and scaling factors for the cuDNN pooling and batch-norm glue (internal
// header, only in builds with cuDNN).
#pragma once

#include <cstdint>

#include "core/cuda/cudnn_check.h"
#include "core/dtype.h"

namespace sl::cuda {

/// cuDNN's data type for a floating dtype (f16 HALF, bf16 BFLOAT16, f32 FLOAT, f64 DOUBLE).
/// Throws DTypeError naming op for any other dtype.
cudnnDataType_t cudnn_data_type(DType dt, const char* op);

/// A 4-d NCHW (fully packed) cuDNN tensor descriptor, destroyed with the object. Throws
/// ValueError naming op when a size is outside [1, 2^31 - 1], CudaError when cuDNN refuses.
class CudnnTensorDesc {
 public:
  CudnnTensorDesc(DType dt, int64_t n, int64_t c, int64_t h, int64_t w, const char* op);
  /// An empty descriptor, filled by cuDNN (cudnnDeriveBNTensorDescriptor).
  CudnnTensorDesc();
  ~CudnnTensorDesc();
  CudnnTensorDesc(const CudnnTensorDesc&) = delete;
  CudnnTensorDesc& operator=(const CudnnTensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

/// The alpha = 1 / beta = 0 scaling factors cuDNN reads for data of dtype dt: double for f64,
/// float otherwise (cuDNN's rule for its scaling parameters).
struct CudnnBlend {
  const void* one;
  const void* zero;
};
CudnnBlend cudnn_blend(DType dt);

}  // namespace sl::cuda
