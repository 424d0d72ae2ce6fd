// The interface between the CUDA glue and the kernels of the softmax, index and sort families:
// pointers, sizes and scalars only (Note [CUDA glue and kernels]). Indices reaching the index
// kernels were checked by generic code (Note [Index checks]) unless checked indexing is off;
// the kernels guard every index either way (Note [Unchecked indexing]), so none is used out of
// range.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/cuda/index_error.h"
#include "core/cuda/kernels.h"
#include "core/dtype.h"

namespace sl::cuda {

// ---- softmax family (softmax.cu): floating dtypes, contiguous [outer, n, inner] -------------
/// out = softmax (log_softmax when `log`) of in along the middle dim, with the CPU kernel's
/// formulas (core/cpu/softmax_kernels.h): maximum, then the sum of exps in double.
void launch_softmax_forward(DType dt, void* out, const void* in, int64_t outer, int64_t n,
                            int64_t inner, bool log, cudaStream_t s);
/// grad_in from grad_out and the forward output.
void launch_softmax_backward(DType dt, void* grad_in, const void* grad_out, const void* out,
                             int64_t outer, int64_t n, int64_t inner, bool log, cudaStream_t s);

// ---- index family (index.cu) ----------------------------------------------------------------
/// What an index kernel needs to guard its indices (Note [Unchecked indexing]): an index t is
/// used only when 0 <= t < size; otherwise its element is skipped and the first such index is
/// written to *record (claimed through *claim).
struct IndexGuard {
  int64_t size = 0;                    ///< valid indices are [0, size)
  const char* op = nullptr;            ///< the op's name (a string literal), recorded as is
  IndexErrorRecord* record = nullptr;  ///< the device's record (mapped host memory)
  unsigned int* claim = nullptr;       ///< device word: 0 until a thread claims the record
};
/// out [outer, k, inner] = in [outer, n, inner] at rows index[j]; elements of `elem_size` bytes
/// (any dtype: the values are moved, not computed on). guard.size == n; rows of bad indices
/// are written with zeros.
void launch_index_select(int elem_size, void* out, const void* in, const int64_t* index,
                         int64_t outer, int64_t n, int64_t inner, int64_t k,
                         const IndexGuard& guard, cudaStream_t s);
/// out[:, index[j], :] += alpha * src[:, j, :] in order of j (skipping index[j] == skip and bad
/// indices); one thread per (outer, inner) position, or, when few positions face many entries,
/// one per (run of equal targets in the stably sorted index, position) (Note [Sorted index_add]
/// in index_plan.h): either way the additions into an element keep the CPU's order and
/// roundings. guard.size == n.
void launch_index_add(DType dt, void* out, const int64_t* index, const void* src, DevScalar alpha,
                      int64_t skip, int64_t outer, int64_t n, int64_t inner, int64_t k,
                      const IndexGuard& guard, cudaStream_t s);

/// Sizes of the index tensor and element strides of three operands along every dim, for
/// gather (0: out, 1: in, 2: index) and scatter (0: out, 1: src, 2: index).
struct IndexGeom {
  int ndim = 0;
  int dim = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[3][kMaxDims];
};
/// out[p] = in[p with coordinate `dim` replaced by index[p]], one thread per element;
/// guard.size is in's size along dim; out[p] = 0 for a bad index.
void launch_gather(int elem_size, void* out, const void* in, const int64_t* index,
                   const IndexGeom& g, const IndexGuard& guard, cudaStream_t s);
/// out[p with coordinate `dim` replaced by index[p]] (+)= src[p]; one thread per line along dim
/// (lines write disjoint output lines), walking the line in order as the CPU does, or, for few
/// long lines, one per run of equal targets in each line's stably sorted index, walking the run
/// in order (Note [Sorted index_add]); guard.size is out's size along dim; bad indices write
/// nothing.
void launch_scatter(DType dt, void* out, const void* src, const int64_t* index, const IndexGeom& g,
                    bool accumulate, const IndexGuard& guard, cudaStream_t s);

/// nonzero in two passes: the true count of each tile of kNonzeroTile mask elements, then (given
/// each tile's exclusive prefix) the positions of the true elements in increasing order.
inline constexpr int64_t kNonzeroTile = 4096;
void launch_nonzero_count(const bool* mask, int64_t n, int64_t* tile_counts, cudaStream_t s);
void launch_nonzero_write(const bool* mask, int64_t n, const int64_t* tile_offsets, int64_t* out,
                          cudaStream_t s);

// ---- sort family (sort.cu) ------------------------------------------------------------------
/// For every slice of in [outer, n, inner] (any dtype), the first k (<= n) elements of the slice
/// sorted by (value, then position), NaN after every number, descending when `descending` (NaN
/// first; ties still by position): values / indices [outer, k, inner]. A bitonic network over
/// the whole padded slice; since the order is total the result is unique, hence the CPU's.
void launch_sort(DType dt, void* values, int64_t* indices, const void* in, int64_t outer, int64_t n,
                 int64_t inner, int64_t k, bool descending, cudaStream_t s);

}  // namespace sl::cuda
