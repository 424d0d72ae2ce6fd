// The "view" family: tensors that share storage with their input (no kernels; metadata only).
// Not differentiable; the Tensor methods (autograd/ops/view.cpp) wrap these with gradients.
#pragma once

#include "core/tensor.h"

namespace sl::ops {

/// A view with explicit sizes/strides/offset (elements). Throws IndexError when it would reach
/// outside the storage.
Tensor as_strided(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset);
/// Throws ShapeError when the element count differs or the layout needs a copy.
Tensor view(const Tensor& t, const Shape& shape);
/// view when possible, else a contiguous copy.
Tensor reshape(const Tensor& t, const Shape& shape);
Tensor permute(const Tensor& t, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& t, int64_t d0, int64_t d1);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
Tensor expand(const Tensor& t, const Shape& shape);
Tensor squeeze(const Tensor& t);
Tensor squeeze(const Tensor& t, int64_t dim);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor flatten(const Tensor& t, int64_t start_dim, int64_t end_dim);
Tensor unflatten(const Tensor& t, int64_t dim, const Shape& sizes);
Tensor movedim(const Tensor& t, int64_t src, int64_t dst);
/// The inverse permutation of `dims`.
std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& dims);

}  // namespace sl::ops
