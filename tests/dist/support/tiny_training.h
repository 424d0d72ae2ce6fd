// A tiny model and training loop shared by the strategy tests (single-process and under
// mpirun): the same 10 steps trained by a plain reference loop (no dist code at all) and by
// every strategy, so their parameters can be compared.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <shardlight/shardlight.h>

#include "dist/strategy.h"

namespace sl::testing {

/// fc2(tanh(fc1(x))) * scale, with a one-element float64 `scale` (smaller than any world
/// size > 1, and a second dtype, so the flat buffers have two groups and padding).
struct TinyNet : nn::Module {
  TinyNet();
  std::shared_ptr<nn::Linear> fc1, fc2;
  Tensor scale;
  /// false: fc2 is left out (fc1(x)'s first 3 columns * scale), so fc2 gets no gradient
  bool use_fc2 = true;
  Tensor forward(const Tensor& x) override;
};
/// Built after manual_seed(seed), so every process gets the same initial values.
std::shared_ptr<TinyNet> make_tiny_net(uint64_t seed = 0);

/// The *_mixed kinds give the two groups different state tensors (momentum in one SGD group only;
/// amsgrad in one Adam group; one RMSprop group centered, the other with momentum).
enum class OptKind {
  sgd,
  adam,
  adamw,
  lamb,
  rmsprop,
  adagrad,
  sgd_mixed,
  adam_mixed,
  rmsprop_mixed,
  sgd_dampened,  ///< momentum with dampening in both groups
  adamax,
  nadam,  ///< a different momentum_decay per group
  radam   ///< rho_t > 5 (the rectified update) from step 6 on, so 10 steps take both branches
};
const char* opt_name(OptKind k);

struct TrainConfig {
  OptKind opt = OptKind::adamw;
  int steps = 10;
  int accum = 1;      ///< micro-batches per step
  double clip = 0.0;  ///< max grad norm (0: off)
  int64_t global_batch = 12;
  int64_t bucket_cap = 16;  ///< bytes: several buckets even for the tiny model
  int inf_step = -1;        ///< at this step, rank inf_rank's inputs get an inf
  int inf_rank = -1;
  /// > 0: fc2 takes part in the forward only on steps divisible by this (unused on the others)
  int fc2_every = 0;
  /// fc2 takes part in the forward from this step on (before, it has no gradient)
  int fc2_from = 0;
  /// >= 0: fc2 takes part in the forward only on this rank (train_strategy, TinyTrainer; dp:
  /// only on this replica, the model itself being replica 0)
  int fc2_rank = -1;
  /// > 0: the loss adds penalty * mean over rows of |d sum(out_row) / d x_row|^2, a gradient
  /// penalty built with grad(create_graph) (its gradient w.r.t. the parameters is a second
  /// derivative); the strategies see a plain backward of the total, as in WGAN-GP / R1 training
  double penalty = 0.0;
  /// Whether fc2 takes part in step `step`'s forward on rank `rank`.
  bool uses_fc2(int step, int rank) const;
  std::string str() const;
};

/// Two parameter groups (weights with weight decay, biases and scale without), StepLR.
std::unique_ptr<optim::Optimizer> make_optimizer(OptKind k, nn::Module& m);

/// Inputs [G, 5] and targets [G, 3] of global batch `step` (deterministic).
std::pair<Tensor, Tensor> global_batch(int step, int64_t g);

struct RunResult {
  std::vector<Tensor> params;  ///< final values (detached copies), named_parameters order
  std::vector<dist::StepResult> steps;
  std::vector<double> losses;  ///< this rank's loss per step (sum over micro-batches)
};

/// A training run that can stop, checkpoint, and continue: the loop of train_strategy, split.
struct TinyTrainer {
  TinyTrainer(const std::string& kind, const TrainConfig& c, dist::ProcessGroupPtr group,
              dist::StrategyOptions opts = {});
  /// Runs steps [from, to) (data of global batch `step` as train_strategy); returns the losses.
  std::vector<double> run(int from, int to);
  /// Scheduler state for a checkpoint's `extra`, and back.
  serialize::Json extra() const;
  void restore(const serialize::Json& extra);
  std::vector<Tensor> params() const;

  TrainConfig config;
  std::shared_ptr<TinyNet> net;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<optim::StepLR> sched;
  std::unique_ptr<dist::Strategy> strategy;
  std::vector<dist::StepResult> results;
  /// dp: the replicas the default replica_factory built (replica i + 1), so run() can set their
  /// fc2 use per replica; empty for the other kinds or a caller's factory.
  std::shared_ptr<std::vector<std::shared_ptr<TinyNet>>> replicas;
};

/// The reference: one process, the whole global batch, model + optimizer + clip_grad_norm_ +
/// StepLR, no strategy. `ranks` > 1: the batch is cut into the ranks' shares, each forwarded
/// with its rank's fc2 setting (TrainConfig::uses_fc2), and the loss is the mean of the shares'.
RunResult train_reference(const TrainConfig& c, int ranks = 1);
/// The same training through make_strategy(kind): rank r of `group` trains on its share of
/// each global batch, split into c.accum micro-batches with no_sync on all but the last.
RunResult train_strategy(const std::string& kind, const TrainConfig& c, dist::ProcessGroupPtr group,
                         dist::StrategyOptions opts = {});

}  // namespace sl::testing
