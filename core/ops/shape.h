// The "shape" family: ops that move elements around without arithmetic: cat, stack, split and
// chunk (views), pad, tril/triu, flip, repeat. Not differentiable (see autograd/ops/shape.h).
//
// Most of them are compositions of copy_ into views, so they run on any device that has the copy
// kernels; only flip needs a kernel of its own.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// A tensor's sizes seen as [outer, n, inner] around one dim (Note [Reduction layout]): outer is
/// the product of the sizes before the dim, inner of those after it. A 0-d tensor is [1, 1, 1].
struct DimSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
/// `dim` must already be wrapped (0 <= dim < sizes.size(), or 0 for a 0-d shape).
DimSplit split_at_dim(const Shape& sizes, int64_t dim);

namespace ops {

/// Concatenates along dim. All tensors have the same number of dims and equal sizes except
/// along dim (1-d tensors of size 0 are skipped, as in PyTorch); the result dtype is their
/// promoted type. Throws ValueError for an empty list, ShapeError for mismatched sizes,
/// DeviceError for mixed devices, IndexError for a bad dim.
Tensor cat(const TensorList& ts, int64_t dim);
/// Stacks equally-shaped tensors along a new dim (-(n+1) <= dim <= n for n-d inputs).
Tensor stack(const TensorList& ts, int64_t dim);
/// Views of consecutive pieces of `sizes[i]` elements along dim; the sizes must be >= 0 and add
/// up to the dim's size (ShapeError otherwise).
std::vector<Tensor> split_with_sizes(const Tensor& t, const std::vector<int64_t>& sizes,
                                     int64_t dim);
/// Pieces of split_size along dim (the last one may be smaller); split_size > 0, or 0 for a
/// zero-size dim.
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim);
/// `chunks` (> 0) pieces of ceil(size / chunks) elements; may return fewer pieces.
std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim);
/// torch.nn.functional.pad: `pads` holds (left, right) pairs starting from the last dim. Modes:
/// "constant" (fill with value; negative pads crop), "reflect" (mirror without the edge; pads
/// must be < the dim's size) and "replicate" (repeat the edge; non-empty dims); in every mode a
/// negative pad crops (reflect and replicate must keep at least one element; a constant pad that
/// keeps no input element is all `value`). Throws ValueError for an odd-length or too long pad
/// list, an unknown mode, or a bad pad amount.
Tensor pad(const Tensor& t, const std::vector<int64_t>& pads, const std::string& mode,
           Scalar value);
/// Checks the arguments of pad() (same errors) for mode "reflect" or "replicate" and returns, for
/// each padded dim, the int64 index (on t's device) that index_select along that dim applies.
std::vector<std::pair<int64_t, Tensor>> pad_index_maps(const Tensor& t,
                                                       const std::vector<int64_t>& pads,
                                                       const std::string& mode);
/// Lower (upper) triangle of the last two dims: elements with col - row <= diagonal
/// (>= diagonal) kept, others zero. Needs >= 2 dims.
Tensor tril(const Tensor& t, int64_t diagonal);
Tensor triu(const Tensor& t, int64_t diagonal);
/// Reverses the order of elements along each of dims (a copy; dims may be negative, no
/// duplicates).
Tensor flip(const Tensor& t, const std::vector<int64_t>& dims);
/// Tiles t: repeats.size() >= t.dim() (missing leading dims count as 1); every repeat >= 0.
Tensor repeat(const Tensor& t, const Shape& repeats);

}  // namespace ops
}  // namespace sl
