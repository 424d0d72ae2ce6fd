// Shapes, strides and the index arithmetic every op shares: broadcasting, dim wrapping,
// contiguous strides, view compatibility.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace sl {

/// Sizes or strides of a tensor, outermost first.
using Shape = std::vector<int64_t>;

/// Product of sizes (1 for a 0-d shape). Throws ValueError on a negative size or when the
/// product overflows int64.
int64_t shape_numel(const Shape& sizes);
/// Row-major strides for `sizes` (in elements).
Shape contiguous_strides(const Shape& sizes);
/// True when a tensor with these sizes/strides is laid out row-major without gaps. Size-1 dims
/// may have any stride, as in PyTorch.
bool is_contiguous_layout(const Shape& sizes, const Shape& strides);
/// "[2, 3]".
std::string shape_str(const Shape& s);
std::ostream& operator<<(std::ostream& os, const Shape& s);

/// Wraps a possibly negative dim into [0, ndim). `op` names the caller in the IndexError.
/// For 0-d tensors, dims -1 and 0 are accepted (as in PyTorch) and wrap to 0.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
/// Wraps and checks a list of dims; duplicates throw ValueError. An empty list means all dims.
std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op);

/// NumPy broadcasting of two shapes. Throws ShapeError naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// Resolves one -1 in a requested shape against numel. Throws ShapeError when impossible.
Shape infer_size(const Shape& requested, int64_t numel, const char* op);
/// Strides that view (sizes, strides) as new_sizes without a copy, or empty when impossible
/// (the algorithm of PyTorch's computeStride).
bool compute_view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes,
                          Shape& new_strides);

}  // namespace sl
