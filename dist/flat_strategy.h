// FlatStrategy: ddp, zero1 and zero2 over flat buffers (see dist/strategy.h for what each
// keeps and communicates, and Note [Flat buffer layout] for the buffers).
//
// Note [Bucket launch order]
// Collectives must be issued in the same order on every rank. Gradient hooks fire in the
// order backward produces gradients, which is the same on every rank for the same graph, but
// a bucket is only launched after every bucket with a smaller index: hooks mark buckets
// ready, and the launcher issues ready buckets strictly in index order. Buckets whose
// parameters received no gradient are launched (in order) when the micro-batch ends:
// backward() returns, or step() is called after a plain loss.backward().
//
// Note [Gradient communication dtype]
// StrategyOptions::reduce_dtype lets gradients travel in another dtype than they are kept in,
// usually bf16 or f16 for float32 gradients: half the bytes on the wire, as PyTorch DDP's
// bf16_compress_hook / fp16_compress_hook and FSDP's MixedPrecision(reduce_dtype). A bucket is
// cast to that dtype (rounded once), divided there by the world size (rounded again unless the
// world size is a power of two; dividing first keeps f16 sums in range, as the PyTorch hooks
// do), summed over the ranks in that dtype (NCCL adds in it; MPI's 16-bit sum adds two values in
// float and rounds), and widened back into the kept buffer: ddp's gradient buffer, or the
// rank's gradient shard in zero1/zero2 (zero2 stages each gradient in the reduced dtype right
// away, so its staging buffers shrink too). The optimizer, clipping and the inf/NaN check then
// see the kept dtype; a value beyond f16's range (65504, after the division) becomes inf and the
// step is skipped on every rank. With gradient accumulation, ddp and zero1 round the sum of the
// micro-batches once, while zero2 (which communicates every micro-batch) rounds each one.
// The casts' buffers count as communication buffers in memory_report().
//
// Note [Unused parameters]
// A parameter the forward did not use gets no gradient. Unsharded, its .grad stays undefined
// (None) and the optimizer skips it: no weight decay, no momentum or moment decay, no step count,
// as in PyTorch (and DDP with find_unused_parameters, which leaves a gradient no rank computed
// untouched). Flat buffers always hold a gradient, zero for such a parameter, which the optimizer
// would apply: AdamW's weight decay and momentum would move the parameter where single mode does
// not. So each rank records which parameters' gradient hooks fired since zero_grad, step() takes
// the maximum over the ranks in the collective that already carries the inf/NaN flag (one float
// per parameter more; ddp gains this one small all-reduce per step), and the update leaves out
// the parameters no rank has a gradient for: ddp hides their gradient views from the optimizer
// during its step, and zero skips their pieces and keeps a step count and a momentum flag per
// parameter, so a parameter unused on some steps has PyTorch's bias corrections, lr decay and
// first momentum step (SGD's copies the gradient). A parameter used on any rank is updated with
// the average over all ranks (zero on the others), as DDP does. zero's state as checkpoints and
// full_optimizer_state see it is PyTorch's too: none for a parameter before its first step.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "dist/flat_buffers.h"
#include "dist/sharded_optimizer.h"
#include "dist/strategy.h"

namespace sl::dist {

/// Which buckets are complete and may be launched, in index order (Note [Bucket launch order]).
class BucketTracker {
 public:
  explicit BucketTracker(const FlatLayout& layout);
  /// Starts a new round (micro-batch): nothing ready, nothing launched.
  void reset();
  /// Records that parameter `param`'s gradient is in; returns the buckets that may now be
  /// launched, in order. A parameter already recorded this round starts a new round first
  /// (returned in `restarted`, so the caller can flush the old one beforehand).
  std::vector<int> mark_ready(int param);
  bool seen(int param) const { return seen_[static_cast<size_t>(param)]; }
  /// Every bucket not yet launched this round, in order; empty when the round saw nothing.
  std::vector<int> flush();
  bool round_started() const { return started_; }

 private:
  const FlatLayout& layout_;
  std::vector<int> pending_;  // per bucket: parameters still missing
  std::vector<bool> seen_;    // per parameter
  int next_launch_ = 0;
  bool started_ = false;
};

class FlatStrategy final : public Strategy {
 public:
  FlatStrategy(StrategyKind kind, std::shared_ptr<nn::Module> model, optim::Optimizer& opt,
               StrategyOptions opts, ProcessGroupPtr group);
  ~FlatStrategy() override;

  Tensor forward(const TensorList& inputs, const ForwardFn& fn) override;
  void backward(const Tensor& loss) override;
  void zero_grad() override;
  MemoryReport memory_report() const override;

  const FlatBuffers& flat() const { return *flat_; }
  /// zero1/zero2: the sharded optimizer and this rank's gradient shards; null / empty in ddp.
  ShardedOptimizer* sharded_optimizer() const { return sharded_.get(); }
  const std::vector<Tensor>& grad_shards() const { return grad_shards_; }
  /// Broadcasts the flat parameters, frozen parameters and buffers from rank 0.
  void broadcast_state();

 protected:
  void sync_gradients() override;
  TensorList owned_gradients() override;
  bool gradients_replicated() const override { return kind_ == StrategyKind::ddp; }
  std::vector<uint8_t> local_gradient_flags() const override { return has_grad_; }
  void update_parameters(const std::vector<bool>& skip) override;

 private:
  struct Pending {
    int bucket;
    WorkPtr work;
    // The collective's output when it is not the kept buffer itself (zero2 accumulation, or
    // another reduce dtype): after the wait it is added to (`add`) or copied into `dest`.
    Tensor temp;
    Tensor dest;
    bool add = false;
    int64_t counted_bytes = 0;  // of comm_live_, released after the wait
  };
  /// The dtype bucket gradients of dtype group `group` travel in (Note [Gradient communication
  /// dtype]).
  DType comm_dtype(int group) const;
  /// A new buffer of `n` elements of `dt` on the flat buffers' device, counted in comm_live_.
  Tensor comm_buffer(int64_t n, DType dt);
  void release_comm_bytes(int64_t n) const;
  /// Throws the AutogradError for a gradient with a graph (a backward with create_graph).
  [[noreturn]] void refuse_create_graph(int param) const;
  void on_grad_accumulated(int param);          // ddp, zero1 (post-accumulate hook)
  void on_grad(int param, const Tensor& grad);  // zero2 (consuming hook)
  void launch(int bucket);
  /// Widens (or adds) the outputs of the collectives that have finished, in launch order, and
  /// frees their buffers, without waiting for the others; drain() does the rest.
  void reap_finished();
  void finish(Pending& p);
  void end_round();  // launches what is left of the current micro-batch
  void drain();      // waits for every launched bucket (zero2: adds temps into the shard)
  void broadcast_buffers();

  std::unique_ptr<FlatBuffers> flat_;
  BucketTracker* tracker_ = nullptr;
  std::unique_ptr<BucketTracker> tracker_holder_;
  std::vector<Pending> pending_;
  std::vector<size_t> hook_ids_;
  // zero1/zero2
  std::vector<Tensor> grad_shards_;
  std::unique_ptr<ShardedOptimizer> sharded_;
  std::vector<bool> shard_written_;  // per bucket: the shard slice holds this step's values
  std::vector<uint8_t> has_grad_;    // per parameter: a gradient arrived since zero_grad
  // zero2
  std::vector<Tensor> staging_;
  // Bytes of communication buffers (zero2 staging, reduced-dtype copies, accumulation temps)
  // alive now and at most; shared with the collectives' completion callbacks.
  std::shared_ptr<std::atomic<int64_t>> comm_live_;
  std::shared_ptr<std::atomic<int64_t>> comm_peak_;
};

}  // namespace sl::dist
