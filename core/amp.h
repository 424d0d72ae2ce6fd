// Automatic mixed precision: an autocast scope, as torch.autocast.
//
// Note [Autocast]
// Inside an AutocastGuard for a device kind, differentiable ops on tensors of that kind cast
// their floating inputs by the op's policy before computing:
//   - AmpPolicy::lower    (matmul, mm, bmm, linear, conv, attention): float32 inputs are cast to
//                         the scope's dtype (bfloat16 or float16), so the product runs on tensor
//                         cores and its result has that dtype;
//   - AmpPolicy::fp32     (softmax, log_softmax, layer/batch norm, losses, sum/mean/norm,
//                         exp/log/pow): 16-bit inputs are cast to float32;
//   - AmpPolicy::promote  (ops mixing inputs, e.g. add, cat, where): every input is cast to the
//                         widest floating dtype among them.
// float64 tensors, non-floating tensors and tensors of other device kinds are never touched.
// The casts are differentiable (Tensor::to), so gradients arrive at float32 parameters in
// float32: the optimizer keeps float32 master weights, and a GradScaler (optim/) protects
// float16 gradients from underflow. Ops opt in by calling autocast(inputs, policy) on their
// inputs first; an op that does not is simply computed in its inputs' dtypes. Opted in today:
// lower: matmul, mm, bmm, addmm, linear, conv1d, conv2d (so attention's projections and
// products); fp32: softmax, log_softmax (unless given a dtype), layer_norm, batch_norm, sum,
// norm and every loss in nn/loss.h. Not yet: exp/log/pow and the fused GRU/LSTM kernels (a
// model can still call autocast() on their inputs itself). The state is per thread (as PyTorch's),
// so a data-loading thread is unaffected; backward runs outside any scope in the dtypes the forward
// recorded.
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace sl {

enum class AmpPolicy : uint8_t { lower, fp32, promote };

/// Enables (or, with enabled = false, disables) autocast for `kind` on this thread until
/// destruction, then restores the previous state; scopes nest. dtype must be float16 or bfloat16
/// (DTypeError otherwise).
class AutocastGuard {
 public:
  explicit AutocastGuard(DeviceKind kind = DeviceKind::cuda, DType dtype = DType::bf16,
                         bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceKind kind_;
  bool prev_enabled_;
  DType prev_dtype_;
};

/// Whether an autocast scope for `kind` is active on this thread.
bool is_autocast_enabled(DeviceKind kind);
/// The lower-precision dtype of the active scope for `kind` (bfloat16 when none is active).
DType autocast_dtype(DeviceKind kind);

/// `t` as an op of `policy` should see it in the current scope (Note [Autocast]); `t` itself when
/// nothing applies. Differentiable.
Tensor autocast(const Tensor& t, AmpPolicy policy);
/// All inputs of one op (promote looks at all of them); undefined tensors stay undefined.
std::vector<Tensor> autocast(const std::vector<Tensor>& ts, AmpPolicy policy);

}  // namespace sl
