// The functional optimizer API: one update of one tensor (a whole parameter or a shard of a flat
// buffer) given its gradient and its state. The optimizer classes are loops over these; a
// sharded (ZeRO) optimizer calls them on the shard it owns, with its own ParamState per shard.
#pragma once

#include <bitset>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <string_view>

#include "core/ops/optim.h"
#include "core/tensor.h"

namespace sl::optim {

/// PyTorch's optimizer.state[p]. Which tensors are defined depends on the optimizer: SGD with
/// momentum has momentum_buffer (from its first step), Adam/AdamW have exp_avg, exp_avg_sq and
/// with amsgrad max_exp_avg_sq; RMSprop square_avg, with momentum momentum_buffer and centered
/// grad_avg; Adagrad sum. `master` is the fp32 copy of an f16/bf16 parameter when
/// master weights are on. All state tensors are contiguous and have the shape of the updated
/// tensor (the parameter, or the master copy).
struct ParamState {
  int64_t step = 0;  ///< steps taken on this parameter
  Tensor momentum_buffer;
  Tensor exp_avg;
  Tensor exp_avg_sq;
  Tensor max_exp_avg_sq;
  Tensor square_avg;
  Tensor grad_avg;
  Tensor sum;
  Tensor master;

  /// PyTorch's keys of the state tensors, in the order of tensor(k) (the fixed order of
  /// state_dict and of sharded checkpoints): momentum_buffer first, master last.
  static constexpr const char* kKeys[] = {
      "momentum_buffer", "exp_avg",  "exp_avg_sq", "max_exp_avg_sq",
      "square_avg",      "grad_avg", "sum",        "master"};
  static constexpr size_t kNumTensors = std::size(kKeys);
  Tensor& tensor(size_t k) {
    Tensor* fields[] = {&momentum_buffer, &exp_avg,  &exp_avg_sq, &max_exp_avg_sq,
                        &square_avg,      &grad_avg, &sum,        &master};
    static_assert(std::size(fields) == kNumTensors);
    return *fields[k];
  }
  const Tensor& tensor(size_t k) const { return const_cast<ParamState*>(this)->tensor(k); }
  bool empty() const {
    if (step != 0) return false;
    for (size_t k = 0; k < kNumTensors; ++k) {
      if (tensor(k).defined()) return false;
    }
    return true;
  }
};

/// A set of ParamState tensors, bit k standing for tensor(k) / kKeys[k].
using StateKeys = std::bitset<ParamState::kNumTensors>;
/// The set of the named keys (each one of ParamState::kKeys; another name throws ValueError).
StateKeys state_keys_of(std::initializer_list<std::string_view> names);

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

/// One RMSprop step, creating square_avg (and grad_avg when centered, momentum_buffer when
/// momentum > 0) as zeros when missing; otherwise as sgd_update. Throws as ops::rmsprop_step.
void rmsprop_update(const Tensor& param, const Tensor& grad, ParamState& st, const RmspropHyper& h,
                    bool master_weights = false);
/// One Adagrad step, creating sum filled with h.initial_accumulator_value when missing (PyTorch
/// creates it in the constructor: the same values); otherwise as sgd_update.
void adagrad_update(const Tensor& param, const Tensor& grad, ParamState& st, const AdagradHyper& h,
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
