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
// norm and every loss in nn/loss.h; PyTorch's CUDA fp32 list as far as Shardlight has the ops:
// exp, expm1, log, log1p, rsqrt, reciprocal, pow (all three forms), div(scalar, tensor), prod,
// cumsum, logsumexp; and its lower list's recurrent cells: lstm_cell, gru_cell, and the fused
// lstm/gru over sequences (every floating input, states and weights included, is lowered, so
// the recurrence runs in one dtype). The state is per thread (as PyTorch's), so a data-loading
// thread is unaffected.
// Backward runs in the dtypes the forward recorded: the engine disables autocast while it runs
// (autograd/engine.cpp), so calling backward() inside a scope changes nothing, and activation
// checkpointing (nn/checkpoint.h) recomputes under the autocast state its forward saw.
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

/// This thread's autocast settings for every device kind, as the scopes in force left them.
struct AutocastState {
  bool enabled[kNumDeviceKinds] = {};
  DType dtype[kNumDeviceKinds] = {DType::bf16, DType::bf16};
};

/// This thread's autocast state now (to hand to an AutocastStateGuard later).
AutocastState autocast_state();

/// Sets this thread's whole autocast state (every device kind) to `state` until destruction,
/// then restores the previous one. The autograd engine runs backward under an all-disabled
/// state; checkpointing recomputes under the state saved at forward.
class AutocastStateGuard {
 public:
  explicit AutocastStateGuard(const AutocastState& state);
  ~AutocastStateGuard();
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  AutocastState prev_;
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
