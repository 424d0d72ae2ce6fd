// The interface between the CUDA glue and the kernel of the embedding_bag family
// (embedding_bag.cu): pointers, sizes and scalars only (Note [CUDA glue and kernels]).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace sl::cuda {

/// embedding_bag_max_kernel of core/ops/embedding_bag.h: out [B, D] of dtype dt (floating), arg
/// [B, D], rows [L, D], bounds [B + 1], index [L], all contiguous. One thread per (bag, column)
/// walks the bag's entries in order, as the CPU.
void launch_embedding_bag_max(DType dt, void* out, int64_t* arg, const void* rows,
                              const int64_t* bounds, const int64_t* index, int64_t skip, int64_t B,
                              int64_t D, int64_t L, cudaStream_t s);

}  // namespace sl::cuda
