// The functional optimizer API: one update of one tensor (a whole parameter or a shard of a flat
// buffer) given its gradient and its state. The optimizer classes are loops over these; a
// sharded (ZeRO) optimizer calls them on the shard it owns, with its own ParamState per shard.
#pragma once

#include <bitset>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <string_view>
#include <vector>

#include "core/ops/optim.h"
#include "core/tensor.h"

namespace sl::optim {

/// PyTorch's optimizer.state[p]. Which tensors are defined depends on the optimizer: SGD with
/// momentum has momentum_buffer (from its first step), Adam/AdamW have exp_avg, exp_avg_sq and
/// with amsgrad max_exp_avg_sq; RMSprop square_avg, with momentum momentum_buffer and centered
/// grad_avg; Adagrad sum; Adamax exp_avg and exp_inf; NAdam and RAdam exp_avg and exp_avg_sq, and
/// NAdam the scalar mu_product (Note [NAdam's mu_product]). `master` is the fp32 copy of an
/// f16/bf16 parameter when master weights are on. All state tensors are contiguous and have the
/// shape of the updated tensor (the parameter, or the master copy).
struct ParamState {
  int64_t step = 0;  ///< steps taken on this parameter
  Tensor momentum_buffer;
  Tensor exp_avg;
  Tensor exp_avg_sq;
  Tensor max_exp_avg_sq;
  Tensor square_avg;
  Tensor grad_avg;
  Tensor sum;
  Tensor exp_inf;
  Tensor master;
  /// NAdam's product of the momentum coefficients (a float32 value; Note [NAdam's mu_product]),
  /// from its first step; unset for the other optimizers.
  std::optional<double> mu_product;

  /// PyTorch's keys of the state tensors, in the order of tensor(k) (the fixed order of
  /// state_dict and of sharded checkpoints): momentum_buffer first, master last.
  static constexpr const char* kKeys[] = {
      "momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "square_avg",
      "grad_avg",        "sum",     "exp_inf",    "master"};
  static constexpr size_t kNumTensors = std::size(kKeys);
  Tensor& tensor(size_t k) {
    Tensor* fields[] = {&momentum_buffer, &exp_avg, &exp_avg_sq, &max_exp_avg_sq, &square_avg,
                        &grad_avg,        &sum,     &exp_inf,    &master};
    static_assert(std::size(fields) == kNumTensors);
    return *fields[k];
  }
  const Tensor& tensor(size_t k) const { return const_cast<ParamState*>(this)->tensor(k); }
  /// The optimizer's state tensors (every key but "master", which is last), defined or not: what
  /// memory reports count as optimizer state.
  std::vector<Tensor> state_tensors() const {
    std::vector<Tensor> out;
    for (size_t k = 0; k + 1 < kNumTensors; ++k) out.push_back(tensor(k));
    return out;
  }
  bool empty() const {
    if (step != 0 || mu_product) return false;
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

/// One Adamax step, creating exp_avg and exp_inf as zeros when missing; otherwise as sgd_update.
/// Throws as ops::adamax_step.
void adamax_update(const Tensor& param, const Tensor& grad, ParamState& st, const AdamaxHyper& h,
                   bool master_weights = false);
/// One NAdam step, creating exp_avg and exp_avg_sq as zeros and mu_product as 1 when missing, and
/// advancing st.mu_product (Note [NAdam's mu_product]); otherwise as sgd_update. Throws as
/// ops::nadam_step, and ValueError for a state that has taken steps without a mu_product.
void nadam_update(const Tensor& param, const Tensor& grad, ParamState& st, const NadamHyper& h,
                  bool master_weights = false);
/// One RAdam step, creating exp_avg and exp_avg_sq as zeros when missing; otherwise as
/// sgd_update. Throws as ops::radam_step.
void radam_update(const Tensor& param, const Tensor& grad, ParamState& st, const RadamHyper& h,
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
