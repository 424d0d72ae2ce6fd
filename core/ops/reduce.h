// The "reduce" family: reductions over any set of dims, arg-reductions, and cumulative sums.
// Not differentiable (see autograd/ops/reduce.h).
//
// Note [Reduction layout]
// Generic code turns every reduction into [outer, R, inner]: the reduced dims are moved together
// (a copy only when they are not already adjacent), so a kernel reduces the middle dim of a
// contiguous 3-d tensor into a contiguous [outer, inner] output. Floating sums accumulate in
// double; CPU kernels cut R into fixed-size blocks combined in order, so results do not depend
// on the thread count.
#pragma once

#include <cstdint>
#include <utility>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

enum class ReduceOp : uint8_t {
  sum,
  mean,
  prod,
  max,
  min,
  var,   // params.correction
  norm,  // params.p: (sum |x|^p)^(1/p); inf: max |x|, -inf: min |x|, 0: nonzero count
  logsumexp,
  all,
  any,  // bool results
  count_
};
const char* reduce_op_name(ReduceOp op);

struct ReduceParams {
  int64_t correction = 1;  ///< var: divisor is R - correction
  double p = 2.0;          ///< norm order
};

/// out[o, i] = reduce_r in[o, r, i]. `in` is a contiguous [outer, R, inner] tensor; `out` a
/// contiguous [outer, inner] tensor whose dtype is the result dtype (bool for all/any, the input
/// dtype otherwise; integer mean/var/norm inputs are cast to float32 by the caller).
SL_DECLARE_KERNEL(reduce_kernel, void(ReduceOp op, const Tensor& out, const Tensor& in,
                                      const ReduceParams& params));
/// Max/min with the index of the first extremum along r: values [outer, inner] (input dtype),
/// indices [outer, inner] i64. NaN counts as the extremum (as in PyTorch).
SL_DECLARE_KERNEL(arg_reduce_kernel, void(bool is_max, const Tensor& values,
                                          const Tensor& indices, const Tensor& in));
/// Inclusive cumulative sum along r of a contiguous [outer, R, inner] tensor into out (same
/// shape, same dtype).
SL_DECLARE_KERNEL(cumsum_kernel, void(const Tensor& out, const Tensor& in));

namespace ops {

/// Reduces `dims` (empty = all) of t. Result dtype: bool for all/any; float32 for integer inputs
/// of mean/var/norm/logsumexp; i64 for integer/bool sum and prod; else t's dtype.
/// Throws IndexError for bad dims, ValueError for an empty max/min/all-reduction of zero
/// elements where the op has no identity.
Tensor reduce(ReduceOp op, const Tensor& t, const std::vector<int64_t>& dims, bool keepdim,
              const ReduceParams& params = {});
/// (values, indices) of the max (is_max) or min along one dim.
std::pair<Tensor, Tensor> arg_reduce(bool is_max, const Tensor& t, int64_t dim, bool keepdim);
/// Inclusive cumulative sum along dim (integer/bool inputs give i64).
Tensor cumsum(const Tensor& t, int64_t dim);

}  // namespace ops
}  // namespace sl
