// Differentiable shape ops: concatenation, splitting (views), padding, triangles, flips and
// tiling (see core/ops/shape.h for the exact rules and errors).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace sl {

/// Concatenates along dim (negative counts from the end). Sizes must match except along dim;
/// 1-d tensors of size 0 are skipped; the result dtype is the promoted dtype of all inputs.
/// Throws ValueError (empty list), ShapeError (sizes, 0-d inputs), DeviceError, IndexError (dim).
Tensor cat(const TensorList& tensors, int64_t dim = 0);
/// Joins equally-shaped tensors along a new dim (ShapeError when shapes differ).
Tensor stack(const TensorList& tensors, int64_t dim = 0);
/// Views of pieces of split_size along dim (the last may be smaller). Gradients of all pieces
/// are joined by one node.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
/// Views of pieces of the given sizes (which must add up to the dim's size).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes,
                                     int64_t dim = 0);
/// `chunks` views of ceil(size / chunks) elements along dim (fewer when the size runs out).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
/// torch.nn.functional.pad: `pads` = (left, right) pairs from the last dim backward; mode
/// "constant" (value; negative pads crop), "reflect" or "replicate" (negative pads crop in every
/// mode, as PyTorch). Throws ValueError for bad pads or mode.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode = "constant",
           Scalar value = 0);
/// Keeps elements of the last two dims with col - row <= diagonal (tril) / >= diagonal (triu),
/// zeroes the others. Needs >= 2 dims (ShapeError).
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
/// Reverses x along each of dims (a copy).
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);
/// torch.Tensor.repeat: tiles x `repeats[i]` times along dim i (repeats.size() >= x.dim()).
Tensor repeat(const Tensor& x, const Shape& repeats);

}  // namespace sl
