// ShardedOptimizer: the ZeRO optimizer update of one rank's shard of the flat buffers.
//
// The user's optimizer (SGD, Adam, AdamW, Lamb, RMSprop, Adagrad, Adamax, NAdam or RAdam) supplies
// the parameter groups and, at every step, their hyperparameters (so learning-rate schedulers and
// OneCycle's momentum work unchanged); the state lives here, in buffers of the shard layout (Note
// [Flat buffer layout]): one buffer per state kind per dtype group, each 1/N of the group. The
// update runs the fused kernels of core/ops/optim.h (Note [Optimizer kernels over flat spans]) over
// runs of consecutive owned pieces that share a parameter group, so it is the same element-wise
// math as the unsharded optimizer. For f16/bf16 parameters whose group asks for master weights, an
// fp32 master shard (and fp32 state) is updated and rounded into the parameter buffer.
//
// LAMB's trust ratio needs norms over whole parameters, which a rank sees only pieces of: every
// rank computes its pieces' sums of squares of w and of the update u per flat parameter (zero
// for parameters it owns nothing of), the 2 x num_params f64 vector is summed across the group
// by ONE all-reduce (the all_reduce_sum callback, on the gradients' device), and then each rank
// applies its pieces' updates with the ratio of the whole parameters (Note [LAMB over flat
// spans] in core/ops/optim.h).
//
// Note [Optimizer offload]
// With a state device other than the parameters' (StrategyOptions::offload_optimizer: the CPU
// for parameters on a GPU, ZeRO-Offload's split), the state, the fp32 master shard and two
// working copies live there, each in the group's parameter dtype, so 2 x the shard's bytes per
// dtype group with or without a master: the rank's parameter shard and its gradient shard. For
// a group without a master the parameter copy is what the update writes (it holds the same
// values as the GPU's pieces between steps); for a group with one, the update writes the master
// and the copy receives it rounded to the parameter dtype. A step copies the gradient shard
// over, runs the same kernels there, and copies each updated run of parameters from the
// parameter copy back into the flat parameter buffer, which the strategy then all-gathers on
// the GPU. The working copies are in pinned memory where the backend has it, so those copies
// back are asynchronous; the next step synchronises the parameters' device before the update
// writes the parameter copy again (stage_gradients). LAMB's norm sums travel to the parameters'
// device for their all-reduce and back.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "dist/flat_buffers.h"
#include "optim/optimizer.h"

namespace sl::dist {

/// Which update rule the optimizer applies.
enum class UpdateRule : uint8_t { sgd, adam, adamw, lamb, rmsprop, adagrad, adamax, nadam, radam };

/// The rule `opt` applies. Throws ValueError for an optimizer zero cannot shard (SGD, Adam, AdamW,
/// Lamb, RMSprop, Adagrad, Adamax, NAdam and RAdam are supported).
UpdateRule update_rule_of(const optim::Optimizer& opt);

/// What zero keeps per dtype group of a flat layout (Note [Flat buffer layout] 5): one buffer per
/// dtype group for each state tensor any optimizer group keeps (the union of
/// Optimizer::state_keys: RMSprop square_avg, plus grad_avg if any group is centered and
/// momentum_buffer if any has momentum), and an fp32
/// master (with fp32 state) for a low-precision group when any of its parameters' optimizer groups
/// asks for master weights. The one rule ShardedOptimizer allocates by and estimate_memory counts
/// by.
struct ShardStatePlan {
  optim::StateKeys state_keys;  ///< the union of the optimizer groups' state_keys
  int state_tensors = 0;        ///< state buffers per dtype group (state_keys' size)
  std::vector<bool> master;  ///< per dtype group: keeps an fp32 master shard
};

/// The plan for layout `L` and optimizer `opt`, whose `opt_index[i]` is (group, index) of flat
/// parameter i. Throws ValueError when opt_index does not have one entry per flat parameter.
ShardStatePlan plan_shard_state(const FlatLayout& L, const optim::Optimizer& opt,
                                const std::vector<std::pair<size_t, size_t>>& opt_index);

/// One rank's optimizer state for one dtype group, in the group's shard layout; undefined
/// tensors are not used by the optimizer's configuration.
struct ShardState {
  Tensor momentum_buffer;  ///< SGD or RMSprop with momentum
  Tensor exp_avg;          ///< Adam/AdamW/Lamb
  Tensor exp_avg_sq;
  Tensor max_exp_avg_sq;  ///< amsgrad
  Tensor square_avg;      ///< RMSprop
  Tensor grad_avg;        ///< centered RMSprop
  Tensor sum;             ///< Adagrad
  Tensor exp_inf;         ///< Adamax
  Tensor master;          ///< fp32 master weights of an f16/bf16 group
  /// The tensor of key optim::ParamState::kKeys[k] (the same order as ParamState::tensor).
  Tensor& tensor(size_t k);
  const Tensor& tensor(size_t k) const { return const_cast<ShardState*>(this)->tensor(k); }
  /// The defined state tensors with PyTorch's names ("momentum_buffer", "exp_avg", ...,
  /// "master").
  std::vector<std::pair<std::string, Tensor>> named() const;
};

class ShardedOptimizer {
 public:
  /// Sums a tensor element-wise across the ranks of the group, in place (blocking).
  using AllReduceSum = std::function<void(const Tensor&)>;

  /// `opt_index[i]` is (group, index) of flat parameter i in `opt`. `all_reduce_sum` is needed
  /// by Lamb only (the per-parameter norms), and may be empty when the group has one rank.
  /// Throws ValueError for an optimizer zero does not support (update_rule_of), or for Lamb over
  /// several ranks without all_reduce_sum.
  /// `state_device`: where the state lives and the update runs (default: the flat buffers'
  /// device; another one offloads, Note [Optimizer offload]).
  ShardedOptimizer(const FlatBuffers& flat, int rank, optim::Optimizer& opt,
                   std::vector<std::pair<size_t, size_t>> opt_index,
                   AllReduceSum all_reduce_sum = {}, std::optional<Device> state_device = {});

  UpdateRule rule() const { return rule_; }
  /// One update of this rank's shard from `grad_shards` (one per dtype group, shard layout):
  /// writes the parameter pieces it owns in the flat parameter buffers (the caller all-gathers).
  /// `skip` (empty, or one flag per flat parameter): parameters no rank computed a gradient for
  /// this step, which keep their values and state, as the unsharded optimizer skips a parameter
  /// without a gradient (Note [Unused parameters] in dist/flat_strategy.h).
  void step(const std::vector<Tensor>& grad_shards, const std::vector<bool>& skip = {});
  /// Steps taken so far by flat parameter `param` (PyTorch's per-parameter "step": a skipped
  /// parameter's does not advance). The same on every rank, owner of the parameter or not.
  int64_t step_count(int param) const { return steps_[static_cast<size_t>(param)]; }
  void set_step_count(int param, int64_t s) { steps_[static_cast<size_t>(param)] = s; }
  /// Whether flat parameter `param` has a momentum buffer in PyTorch's terms (it has taken a step
  /// with momentum: SGD's first one copies the gradient into it, RMSprop's starts from zeros).
  /// Before, zero's buffer holds nothing of it and checkpoints leave it out.
  /// NAdam's mu_product of flat parameter `param` (Note [NAdam's mu_product]): 1 before its first
  /// step, then advanced at each step it takes, the same on every rank (as step_count).
  double mu_product(int param) const { return mu_products_[static_cast<size_t>(param)]; }
  void set_mu_product(int param, double m) { mu_products_[static_cast<size_t>(param)] = m; }
  bool has_momentum(int param) const { return momentum_ready_[static_cast<size_t>(param)] != 0; }
  void set_has_momentum(int param, bool b) { momentum_ready_[static_cast<size_t>(param)] = b; }
  /// The value state tensor k (ParamState::kKeys) starts from in optimizer group `group`: 0, or
  /// Adagrad's initial_accumulator_value for its sum.
  double initial_state(size_t k, size_t group) const;
  std::vector<ShardState>& state() { return state_; }
  const std::vector<ShardState>& state() const { return state_; }
  int64_t state_bytes() const;
  int64_t master_bytes() const;
  /// Where the state lives and the update runs.
  Device state_device() const { return state_device_; }
  /// True when that is not the parameters' device (Note [Optimizer offload]).
  bool offloaded() const { return offload_; }
  /// Bytes of the offloaded step's working copies (parameter and gradient shards in the group
  /// dtype, for every group: 2 x the shard's bytes per group); 0 otherwise.
  int64_t working_copy_bytes() const;
  /// The fp32 master copy of the owned pieces (when `masters`) and the offloaded parameter copy
  /// of groups without a master (always) from the current parameter values, after a checkpoint
  /// load changed the parameters. (A master group's parameter copy is rewritten from the master
  /// before every use.)
  void refresh_master(bool masters = true);
  /// The same, with the masters of the pieces of parameter p refreshed only where
  /// !master_loaded[p] (flat parameter order): after a checkpoint that held the masters of some
  /// parameters only (one saved by single/ddp, whose optimizer groups may keep masters for some
  /// parameters of a dtype group that zero keeps masters for as a whole).
  void refresh_master(const std::vector<bool>& master_loaded);

 private:
  /// Owned pieces merged into runs over which one kernel call applies.
  struct Run {
    int group;         ///< dtype group
    size_t opt_group;  ///< optimizer parameter group
    int64_t flat_offset;
    int64_t shard_offset;
    int64_t numel;
    /// The run's pieces as segments (Note [LAMB over flat spans]): piece j is elements
    /// [bounds[j], bounds[j + 1]) of the run, of flat parameter params[j].
    std::vector<int64_t> bounds;
    std::vector<int64_t> params;
    int64_t step = 0;  ///< the step count of all its parameters (set by active_runs)
    double mu_product = 1.0;  ///< NAdam: the mu_product of all its parameters (after the step)
  };
  bool uses_master(int group) const;
  /// Where run `r`'s parameters are updated: the master shard, the offloaded parameter copy, or
  /// the flat parameter buffer itself.
  Tensor update_target(const Run& r) const;
  /// After the update: rounds / copies the target back into the flat parameter buffer (offloaded
  /// with a master: rounds it into host_params_ first and copies from there).
  void write_back(const Run& r, const Tensor& target) const;
  /// The gradient shards the update reads: `grad_shards`, or their copies on the state device.
  const std::vector<Tensor>& stage_gradients(const std::vector<Tensor>& grad_shards);
  /// Zeros on the state device; `pinned`: in page-locked memory when offloaded to the host and
  /// the parameters' backend has it.
  Tensor zeros_1d(int64_t n, DType dt, bool pinned = false) const;
  /// The dtype of group g's state: f32 beside a master, else the group's.
  DType state_dtype(size_t g) const;
  /// Allocates (zeros) the state buffers some optimizer group needs and lacks: a scheduler may
  /// give a group momentum, a loaded state_dict amsgrad or centered, after construction.
  void ensure_state_buffers();
  /// LAMB's two phases with the all-reduce of the norms between them.
  void lamb_step(const std::vector<Tensor>& grad_shards, const std::vector<Run>& runs);
  /// Records that run r's parameters have taken a step with momentum.
  void mark_momentum(const Run& r);
  /// runs_ without the pieces of the parameters `skip` flags, split where the parameters' step
  /// counts, has_momentum or NAdam's mu_product differ, each with its parameters' step count
  /// (as runs_ in the usual case).
  std::vector<Run> active_runs(const std::vector<bool>& skip) const;

  const FlatBuffers& flat_;
  int rank_;
  optim::Optimizer& opt_;
  UpdateRule rule_;
  std::vector<Run> runs_;
  std::vector<ShardState> state_;
  AllReduceSum all_reduce_sum_;
  Device state_device_;
  bool offload_ = false;
  std::vector<Tensor> host_params_;  // offload: per group, the parameter shard (master: rounded)
  std::vector<Tensor> host_grads_;   // offload: per group, the gradient shard
  std::vector<int64_t> steps_;       // per flat parameter
  std::vector<uint8_t> momentum_ready_;  // per flat parameter: has_momentum
  std::vector<double> mu_products_;      // per flat parameter: NAdam's mu_product
  std::vector<size_t> opt_group_;        // per flat parameter: its optimizer group
};

}  // namespace sl::dist
