// Differentiable reductions. `dims` may hold negative dims; an empty list reduces all dims.
// Errors: IndexError for dims out of range, ValueError for duplicate dims or a max/min over a
// zero-size dim.
#pragma once

#include <utility>
#include <vector>

#include "core/tensor.h"

namespace sl {

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Product over one dim, or all dims when dim is nullopt.
Tensor prod(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
/// Max/min over all elements; the gradient is split evenly between tied maxima, or between the
/// NaNs when the result is NaN (as torch.max()).
Tensor max(const Tensor& a);
Tensor min(const Tensor& a);
/// (values, indices) along dim; the gradient goes to the returned index.
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);
/// Max/min over dims; ties share the gradient evenly (as torch.amax).
Tensor amax(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Index of the first max/min; over the flattened tensor when dim is nullopt. Not differentiable.
Tensor argmax(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
/// Variance with divisor max(0, N - correction) (PyTorch's default correction is 1): a
/// correction >= N gives inf, or NaN where all values are equal, as torch.var.
Tensor var(const Tensor& a, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
           bool keepdim = false);
Tensor std(const Tensor& a, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
           bool keepdim = false);
/// log(sum(exp(a))) computed stably.
Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
/// Vector p-norm over dims (p > 0, inf allowed).
Tensor norm(const Tensor& a, double p = 2.0, const std::vector<int64_t>& dims = {},
            bool keepdim = false);
/// Boolean reductions (not differentiable).
Tensor all(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor any(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Inclusive cumulative sum along dim.
Tensor cumsum(const Tensor& a, int64_t dim);

}  // namespace sl
