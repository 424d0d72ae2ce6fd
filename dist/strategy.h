// Strategy: one flag chooses how a model trains, and the training loop does not change.
//
//   auto strategy = dist::make_strategy(flag, model, optimizer, opts);  // flag: single|dp|ddp|
//   for (...) {                                                          //       zero1|zero2
//     strategy->zero_grad();
//     for (int m = 0; m < micro_batches; ++m) {
//       auto sync = strategy->no_sync(m + 1 < micro_batches);   // accumulate without syncing
//       Tensor loss = loss_fn(strategy->forward(x[m]), y[m]) / micro_batches;
//       strategy->backward(loss);
//     }
//     dist::StepResult r = strategy->step();   // sync, clip, inf/NaN check, update
//     scheduler.step();
//   }
//
// What each mode keeps per rank and communicates (Psi parameters; see dist/accounting.h):
// - single: one process, the model and the optimizer as they are.
// - dp: one process, several devices (cpu:0..cpu:K-1 logical CPU devices, or GPUs): each
//   forward copies the parameters to the replicas, splits the batch along dim 0, runs the
//   replicas in parallel threads and gathers the outputs on the first device; step() adds the
//   replicas' gradients onto the first device (torch.nn.DataParallel's semantics).
// - ddp: parameters broadcast from rank 0 and moved into flat buffers (Note [Flat buffer
//   layout]); gradients land in a flat gradient buffer and each bucket is all-reduced (avg) from
//   the post-accumulate-grad hooks while backward still runs; buffers (BatchNorm statistics)
//   are broadcast from rank 0 before each forward. Full optimizer state on every rank.
// - zero1: as ddp, but each bucket's gradient is reduce-scattered, so each rank receives the
//   average of its 1/N shard; the optimizer state (and fp32 master weights of f16/bf16
//   parameters) exists only for that shard; the updated shards are all-gathered into the flat
//   parameter buffer.
// - zero2: as zero1, but no full gradient buffer: a gradient hook consumes each parameter's
//   gradient into a per-bucket staging buffer, a full bucket is reduce-scattered straight into
//   the rank's gradient shard, and the staging buffer is freed. Micro-batches accumulate into
//   the shard (each micro-batch communicates; no_sync has no effect).
// Every mode: a parameter no rank computed a gradient for since zero_grad (a branch the forward
// did not take, a head the loss does not use) is left alone by the update, values and optimizer
// state alike, as PyTorch's optimizers skip a parameter whose .grad is None (Note [Unused
// parameters] in dist/flat_strategy.h). Every mode: clipping uses the global norm (the squared
// norms of the shards are all-reduced where gradients are sharded), and a step whose gradients hold
// an inf or NaN is skipped on every rank alike (the flag is all-reduced with max), with dynamic
// loss scaling if enabled.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dist/process_group.h"
#include "nn/module.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer.h"

namespace sl::dist {

enum class StrategyKind : uint8_t { single = 0, dp, ddp, zero1, zero2 };
/// Parses "single", "dp", "ddp", "zero1", "zero2". Throws ValueError listing the choices.
StrategyKind parse_strategy(const std::string& name);
const char* strategy_name(StrategyKind k);

struct StrategyOptions {
  /// ddp/zero1/zero2: the ranks to train over (default: world() for CPU parameters, a NCCL
  /// group over world() for CUDA parameters, one GPU per rank). single/dp ignore it.
  ProcessGroupPtr group;
  /// Bucket size for gradient communication (Note [Flat buffer layout]); 25 MB by default.
  int64_t bucket_cap_bytes = 25 * 1024 * 1024;
  /// The first bucket (the gradients backward produces first) closes at min(this,
  /// bucket_cap_bytes), so that its communication overlaps the rest of backward even in a model
  /// smaller than one bucket; 1 MiB, as PyTorch DDP (dist._DEFAULT_FIRST_BUCKET_BYTES).
  int64_t first_bucket_cap_bytes = 1024 * 1024;
  /// Clip the global gradient norm to this value when > 0 (clip_grad_norm_ semantics).
  double max_grad_norm = 0.0;
  double norm_type = 2.0;
  /// Skip (on every rank) a step whose gradients contain an inf or NaN. With loss scaling on,
  /// non-finite steps are always skipped.
  bool skip_nonfinite = true;
  /// Dynamic loss scaling (GradScaler semantics): backward() multiplies the loss by the scale,
  /// step() divides the gradients by it, skips non-finite steps and adapts the scale.
  std::optional<optim::GradScalerOptions> loss_scaling;
  /// ddp/zero1/zero2: BatchNorm layers normalise with the statistics of every rank's batch
  /// (nn::convert_sync_batchnorm, Note [SyncBatchNorm]) while the strategy lives: one allgather
  /// per layer in each training forward, one allreduce in its backward. single: no effect (one
  /// rank); dp: ValueError (its replicas are threads of one process).
  bool sync_batchnorm = false;
  /// ddp/zero1/zero2: the dtype gradients travel in (FSDP's reduce_dtype; DDP's
  /// bf16_compress_hook / fp16_compress_hook). Each bucket is cast to it, divided there by the
  /// world size, summed over the ranks in it, and widened back into the gradient (or shard)
  /// buffers, so the optimizer, clipping and the inf/NaN check see the gradients' own dtype
  /// (Note [Gradient communication dtype] in dist/flat_strategy.h). Unset, or equal to a
  /// gradient's dtype: averaged in that dtype, as before. f16, bf16, f32 or f64; f16 overflows
  /// beyond 65504 (the step is then skipped as non-finite). single: no effect; dp: ValueError.
  std::optional<DType> reduce_dtype;
  /// zero1/zero2 with parameters on a GPU: the optimizer state, fp32 master weights and the
  /// update live in host memory and run on the CPU (ZeRO-Offload's split, Note [Optimizer
  /// offload] in dist/sharded_optimizer.h); per step the rank's gradient shard goes to the host
  /// and its updated parameter shard back. The GPU keeps parameters and gradients only (zero2:
  /// 4 Psi + 4 Psi / N bytes in float32). ValueError for single/dp/ddp and for CPU parameters.
  bool offload_optimizer = false;
  /// dp: devices of the replicas, the model's device first, each at most once (ValueError
  /// otherwise; default: cpu:0..cpu:dp_replicas-1 on CPU, cuda:0..cuda:dp_replicas-1 on CUDA).
  std::vector<Device> dp_devices;
  int dp_replicas = 2;
  /// dp: builds a module with the model's structure (its values are overwritten before every
  /// forward); C++ cannot copy a module of unknown type, so dp needs this.
  std::function<std::shared_ptr<nn::Module>()> replica_factory;
};

/// What step() did.
struct StepResult {
  bool taken = false;  ///< false when skipped for a non-finite gradient
  bool found_nonfinite = false;
  double grad_norm = -1.0;  ///< global norm before clipping; -1 when not computed
  double loss_scale = 1.0;  ///< scale used for this step's backward
};

/// Per-rank bytes by category (see dist/accounting.h for the ZeRO paper's prediction).
struct MemoryReport {
  std::string strategy;
  int world_size = 1;
  int64_t numel = 0;                  ///< Psi: trainable parameter elements (unpadded)
  int64_t param_bytes = 0;            ///< model parameters held by this rank (padding included)
  int64_t grad_bytes = 0;             ///< gradients kept between steps (full or shard)
  int64_t optimizer_state_bytes = 0;  ///< momentum / Adam moments (full or shard)
  int64_t master_weight_bytes = 0;    ///< fp32 copies of f16/bf16 parameters (full or shard)
  /// offload_optimizer: host bytes of the state, master weights and the step's working copies
  /// (then not counted in optimizer_state_bytes / master_weight_bytes, which are the device's)
  int64_t offloaded_bytes = 0;
  int64_t comm_buffer_bytes = 0;      ///< peak bytes of communication buffers (staging, shards)
  int64_t allocator_peak_bytes = 0;   ///< the device allocator's peak since the last reset
  /// One line per category.
  std::string str() const;
};

class Strategy {
 public:
  using ForwardFn = std::function<Tensor(nn::Module&, const TensorList&)>;

  virtual ~Strategy();
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  StrategyKind kind() const { return kind_; }
  const char* name() const { return strategy_name(kind_); }
  int rank() const { return group_->rank(); }
  int world_size() const { return group_->size(); }
  /// The ranks this strategy spans (a single-rank group for single and dp).
  const ProcessGroupPtr& group() const { return group_; }
  nn::Module& module() const { return *model_; }
  optim::Optimizer& optimizer() const { return opt_; }
  const StrategyOptions& options() const { return opts_; }

  /// model.forward(x) (dp: split along dim 0 over the replicas, outputs gathered).
  Tensor forward(const Tensor& x);
  /// fn(module, inputs) for models with another signature; dp splits every input along dim 0.
  virtual Tensor forward(const TensorList& inputs, const ForwardFn& fn);
  /// Backpropagates `loss` (times the loss scale when scaling is on) and finishes this
  /// micro-batch's gradient communication (launches the buckets still waiting).
  virtual void backward(const Tensor& loss);
  /// Waits for the gradients, clips, checks for inf/NaN on every rank alike, and updates the
  /// parameters (all-gathering the shards in zero1/zero2). See StepResult.
  StepResult step();
  /// Clears the gradients (flat buffers are zeroed, not dropped).
  virtual void zero_grad();

  /// While the returned guard lives (and `active`), backward() accumulates gradients locally
  /// without communicating (ddp, zero1; zero2 still reduce-scatters each micro-batch).
  class NoSync {
   public:
    NoSync(Strategy* s, bool active);
    ~NoSync();
    NoSync(NoSync&& o) noexcept;
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;

   private:
    Strategy* s_;
    bool prev_ = false;
  };
  NoSync no_sync(bool active = true) { return NoSync(this, active); }

  /// Per-rank bytes by category.
  virtual MemoryReport memory_report() const;
  /// BatchNorm layers that sync_batchnorm made synchronise (0 when off or on one rank).
  int64_t synced_batchnorms() const { return synced_batchnorms_; }
  /// Steps taken (not counting skipped ones).
  int64_t steps_taken() const { return steps_taken_; }
  double loss_scale() const { return scale_; }

  /// What checkpoints save besides tensors: steps taken, loss scale, growth tracker.
  struct Counters {
    int64_t steps_taken = 0;
    double loss_scale = 1.0;
    int64_t growth_tracker = 0;
  };
  Counters counters() const { return {steps_taken_, scale_, growth_tracker_}; }
  void set_counters(const Counters& c) {
    steps_taken_ = c.steps_taken;
    scale_ = c.loss_scale;
    growth_tracker_ = c.growth_tracker;
  }

  /// Trainable parameters in the order the strategy lays them out (named_parameters order).
  const std::vector<std::pair<std::string, Tensor>>& named_params() const { return named_params_; }

 protected:
  Strategy(StrategyKind kind, std::shared_ptr<nn::Module> model, optim::Optimizer& opt,
           StrategyOptions opts, ProcessGroupPtr group);

  /// Waits until this rank's gradients are complete (all-reduced / reduce-scattered / summed).
  virtual void sync_gradients() {}
  /// The gradient tensors this rank clips and checks (contiguous).
  virtual TensorList owned_gradients() = 0;
  /// True when owned_gradients() are equal on every rank (nothing to all-reduce for checks).
  virtual bool gradients_replicated() const { return true; }
  /// Per trainable parameter (named_params order): whether this rank computed a gradient for it
  /// since zero_grad. Empty where the optimizer sees each parameter's own gradient, undefined
  /// when none was computed, and skips it itself (single, dp). Note [Unused parameters].
  virtual std::vector<uint8_t> local_gradient_flags() const { return {}; }
  /// The optimizer update of this rank's parameters (and the allgather in zero modes), leaving
  /// out the parameters `skip` flags (empty, or one flag per trainable parameter: those no rank
  /// computed a gradient for).
  virtual void update_parameters(const std::vector<bool>& skip) = 0;
  /// Called when the no_sync flag changes.
  bool no_sync_ = false;

  StrategyKind kind_;
  std::shared_ptr<nn::Module> model_;
  optim::Optimizer& opt_;
  StrategyOptions opts_;
  ProcessGroupPtr group_;
  std::vector<std::pair<std::string, Tensor>> named_params_;
  double scale_ = 1.0;
  int64_t growth_tracker_ = 0;
  int64_t steps_taken_ = 0;
  int64_t synced_batchnorms_ = 0;  // layers sync_batchnorm converted; reverted by ~Strategy
};

/// Builds the strategy named `kind` (parse_strategy) around `model` and `opt` (which must hold
/// exactly the model's trainable parameters). ddp/zero modes move the parameters into flat
/// buffers and broadcast them from rank 0; zero modes keep the optimizer state themselves
/// (the optimizer object supplies hyperparameters, learning rates and param groups, so
/// schedulers work unchanged). Throws ValueError for an unknown kind or parameters the
/// optimizer does not cover, and what the process group throws.
std::unique_ptr<Strategy> make_strategy(const std::string& kind, std::shared_ptr<nn::Module> model,
                                        optim::Optimizer& opt, StrategyOptions opts = {});

}  // namespace sl::dist
