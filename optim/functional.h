// The functional optimizer API: one update of one tensor (a whole parameter or a shard of a flat
// buffer) given its gradient and its state. The optimizer classes are loops over these; a
// sharded (ZeRO) optimizer calls them on the shard it owns, with its own ParamState per shard.
#pragma once

#include <cstdint>

#include "core/ops/optim.h"
#include "core/tensor.h"

namespace sl::optim {

/// PyTorch's optimizer.state[p]. Which tensors are defined depends on the optimizer: SGD with
/// momentum has momentum_buffer (from its first step), Adam/AdamW have exp_avg, exp_avg_sq and
/// with amsgrad max_exp_avg_sq. `master` is the fp32 copy of an f16/bf16 parameter when
/// master weights are on. All state tensors are contiguous and have the shape of the updated
/// tensor (the parameter, or the master copy).
struct ParamState {
  int64_t step = 0;  ///< steps taken on this parameter
  Tensor momentum_buffer;
  Tensor exp_avg;
  Tensor exp_avg_sq;
  Tensor max_exp_avg_sq;
  Tensor master;
  bool empty() const {
    return step == 0 && !momentum_buffer.defined() && !exp_avg.defined() && !master.defined();
  }
};

/// One SGD step of `param` from `grad` (same numel; grad any layout, converted if needed) as
/// torch.optim.SGD does it, creating st.momentum_buffer on the first step when momentum != 0 and
/// incrementing st.step. With master_weights and an f16/bf16 param, the update runs on st.master
/// (created from param on first use) and param receives the rounded result. A non-contiguous
/// param is updated through a contiguous copy. Runs under no-grad. Throws as ops::sgd_step.
void sgd_update(const Tensor& param, const Tensor& grad, ParamState& st, const SgdHyper& h,
                bool master_weights = false);
/// One Adam (h.decoupled_weight_decay = false) or AdamW step, creating exp_avg/exp_avg_sq (and
/// max_exp_avg_sq with amsgrad) as zeros on the first step; otherwise as sgd_update.
void adam_update(const Tensor& param, const Tensor& grad, ParamState& st, const AdamHyper& h,
                 bool master_weights = false);

/// One LAMB step of a whole parameter (Note [LAMB] in optim/lamb.h: the trust ratio over all
/// of `param`), creating exp_avg/exp_avg_sq as zeros on the first step; otherwise as
/// sgd_update. Throws as ops::lamb_moments.
void lamb_update(const Tensor& param, const Tensor& grad, ParamState& st, const LambHyper& h,
                 bool master_weights = false);

/// True for f16 and bf16.
inline bool is_low_precision(DType t) {
  return t == DType::f16 || t == DType::bf16;
}

}  // namespace sl::optim
