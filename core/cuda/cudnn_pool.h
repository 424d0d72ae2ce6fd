// Average pooling through cuDNN (internal header of the CUDA pool glue, core/cuda/pool.cpp; its
// definitions exist only in builds with cuDNN). The routing rules: Note [cuDNN routing].
#pragma once

#include "core/ops/pool.h"

namespace sl::cuda {

/// out [P, Ho, Wo] = window averages of input [P, H, W] (both contiguous, on one GPU), with
/// cudnnPoolingForward. Only for calls avg_pool_uses_cudnn accepts; throws CudaError when cuDNN
/// fails, ValueError for sizes outside cuDNN's int range.
void cudnn_avg_pool2d_forward(const Tensor& out, const Tensor& input, const Pool2dGeometry& g);
/// grad_input [P, H, W] (overwritten) from grad_out [P, Ho, Wo], with cudnnPoolingBackward.
/// Same preconditions and errors as the forward.
void cudnn_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out,
                               const Pool2dGeometry& g);

}  // namespace sl::cuda
