// The supervised training loop behind the trainer's jobs (cnn, resnet, bert): the job's model
// trained on the job's data with AdamW (or --optimizer lamb | sgd | rmsprop | adagrad | adamax |
// nadam | radam: optim/, the flags in optimizer_flags.h)
// and a cosine learning-rate schedule through dist::Strategy, so one flag picks the parallel mode
// and nothing else changes. A sharded checkpoint (dist/checkpoint.h) is written after every epoch;
// `--resume 1` continues from it, with any world size and mode.
//
//   sl_train --model JOB [--strategy single|dp|ddp|zero1|zero2] [--epochs 2] [--batch-size B]
//            [--lr LR] [--seed 0] [--data-dir DIR] [--checkpoint-dir checkpoints/JOB]
//            [--resume 0|1] [--weight-decay 0.01] [--stop-after-epochs K] [--dp-replicas 2]
//            [--log-every 100] [--device cpu|cuda|cuda:N] [--max-grad-norm 0] [--warmup-steps W]
//            [--accumulate K] [--precision 32|bf16-mixed|f16-mixed|bf16-true]
//            [--checkpoint-every N] [--stop-after-steps S]
//            [--optimizer adamw|lamb|sgd|rmsprop|adagrad|adamax|nadam|radam]
//            [--momentum 0.9 (sgd) | 0 (rmsprop)] [--rmsprop-alpha 0.99] [--rmsprop-centered 0|1]
//            [--adagrad-lr-decay 0]
//            [--sync-batchnorm 0|1] [--bucket-mb 25] [--first-bucket-mb 1]
//            [--reduce-dtype same|bf16|f16] [--offload-optimizer 0|1] [--estimate-memory N]
//            [--lr-schedule auto|linear|cosine|exp|step:E1,E2,...|constant] [--lr-gamma 0.1]
//            (plus the job's own flags)
//
// --estimate-memory N prints, for the job's model and these flags, the model-state bytes per
// rank of every strategy on 1, 2, 4, ..., N ranks (tools/train/memory_estimate.h) and exits
// before training; the flags of a run's course (--resume, --checkpoint-every, --stop-after-epochs,
// --stop-after-steps, --log-every, --profile*) are refused beside it.
//
// --sync-batchnorm 1 (ddp, zero1, zero2) makes every BatchNorm of the model normalise, in
// training, with the statistics of the whole global batch rather than of its rank's share
// (Note [SyncBatchNorm] in nn/sync_batch_norm.h): what small per-rank batches need.
//
// --optimizer lamb trains with LAMB instead of AdamW (the same --lr, --weight-decay and groups:
// no decay on biases and norms); the optimizer is part of the run's configuration, so a
// checkpoint resumes only with the optimizer that wrote it.
//
// --optimizer sgd trains with SGD and momentum (optim::SGD, as torch.optim.SGD: --momentum M,
// default 0.9, in [0, 1); no dampening, no Nesterov), torchvision's ResNet recipe with
// --lr-schedule step:30,60,80 and --weight-decay 1e-4. Its weight decay is L2, added to the
// gradient before the momentum (AdamW's and LAMB's is decoupled); the groups are the same.
// --momentum with another optimizer than sgd and rmsprop is refused (ValueError naming it). The
// momentum joins the configuration beside the optimizer: a checkpoint resumes only with both
// unchanged. The state is
// one float32 buffer per parameter (K = 4 in --estimate-memory's paper column; none, K = 0, with
// --momentum 0, which allocates no buffer), sharded by zero1/zero2 as Adam's moments are.
//
// --optimizer rmsprop trains with torch.optim.RMSprop (optim::RMSprop: eps 1e-8) with
// --rmsprop-alpha A (default 0.99, >= 0), --rmsprop-centered 0|1 (default 0) and --momentum M
// (default 0 as PyTorch's); --optimizer adagrad with torch.optim.Adagrad (optim::Adagrad: eps
// 1e-10, initial accumulator 0) with --adagrad-lr-decay D (default 0, >= 0: the lr of step t is
// the scheduled lr / (1 + (t - 1) D), as PyTorch's lr_decay on top of a scheduler). Both decay
// weights as SGD (L2 in the gradient), with the same groups; the optimizer, RMSprop's momentum,
// alpha and centered and Adagrad's lr_decay are part of the configuration as SGD's momentum is
// (alpha, centered and lr_decay recorded only when not their defaults, so older checkpoints
// resume). --rmsprop-alpha and --rmsprop-centered with another optimizer than rmsprop, and
// --adagrad-lr-decay with another than adagrad, are refused (ValueError naming the flag, its
// value and the optimizer). State: RMSprop's square_avg, plus grad_avg when centered and a
// momentum buffer when M > 0 (K = 4, 8 or 12 in --estimate-memory), Adagrad's sum (K = 4),
// float32, sharded by zero1/zero2.
//
// --optimizer adamax | nadam | radam trains with torch.optim.Adamax, NAdam or RAdam as PyTorch
// 1.13 has them (optim::Adamax, NAdam, RAdam: betas 0.9, 0.999, eps 1e-8, NAdam's momentum_decay
// 4e-3), whose weight decay is L2 in the gradient in 1.13 (not decoupled), with the same groups.
// Their betas are fixed (--momentum is refused); the optimizer is part of the configuration.
// State: two float32 tensors per parameter (Adamax exp_avg and exp_inf, NAdam and RAdam exp_avg
// and exp_avg_sq: K = 8, 12 with bf16-true's masters), sharded by zero1/zero2; NAdam also keeps
// one float64 mu_product per parameter tensor (on the host, in the checkpoint's optimizer header;
// not in --estimate-memory's bytes).
//
// --checkpoint-every N also writes the checkpoint every N steps of the run inside an epoch (a
// long epoch is not lost to a crash); --resume 1 then continues from that step of the epoch, bit
// for bit as from an epoch's end (the epoch's printed loss then averages the steps run since).
// --stop-after-steps S ends the run after its S-th step, as a crash would (for tests): at an
// epoch's last step, before that epoch's evaluation and checkpoint. --stop-after-epochs K ends it
// after K epochs. Both must be >= 1 (-1: never); on a fresh run K must be below --epochs and S at
// most the run's steps (a stop point past the end would stop nothing: ValueError, S's once the
// data is loaded, before the first step).
//
// --accumulate K splits each rank's share of a batch into K equal micro-batches whose gradients
// add up before one optimizer step (each loss weighted 1/K): the same step as without it, for
// per-example mean losses up to float rounding, with a K times smaller activation peak. ddp and
// zero1 communicate once per step (Strategy::no_sync on the first K - 1), zero2 once per micro-
// batch. BatchNorm sees micro-batch statistics, as in PyTorch. K may change on resume (e.g. half
// the ranks, twice the micro-batches: the same global batch and data order).
// --precision: "32" (default) trains in float32; "bf16-mixed" / "f16-mixed" run forward, loss
// and evaluation under an autocast scope (core/amp.h: matmul/conv in 16 bits, reductions, norms
// and losses in float32) with float32 parameters, f16 with dynamic loss scaling (GradScaler's
// semantics: a step with an inf/NaN gradient is skipped on every rank and the scale halves;
// the epoch line counts them); "bf16-true" stores parameters, buffers, gradients and inputs in
// bfloat16 and AdamW updates float32 master weights (2 + 2 bytes per parameter, plus 12 of
// optimizer state that zero1/zero2 shard: the ZeRO paper's mixed-precision accounting). Only
// bf16-true changes what a checkpoint holds, so only it must match on resume.
//
// --device cuda trains on a GPU: cuda:N, or with plain "cuda" GPU (rank mod the visible GPUs)
// for each rank; ddp/zero1/zero2 ranks then exchange gradients over NCCL (one GPU per rank), dp
// spreads its replicas over cuda:N, cuda:N+1, ... Batches are copied to the device each step;
// checkpoints hold CPU tensors, so a run may resume on another device.
// --batch-size is the global batch: each of N ranks takes its 1/N share of every global batch
// (dist::DistributedLoader), so the examples seen per step do not depend on N. Weight decay
// applies to weights, not to biases and normalisation parameters (optim::split_no_decay with the
// job's name list; parameters of fewer than 2 dims never decay). The schedule is stepped once
// per batch. By default it anneals from --lr to 0 over all steps of all epochs: a cosine, or with
// W > 0 warmup steps BERT's linear warmup from 0 to --lr over W steps, then a linear decay to 0
// (optim::LinearWarmupLR). --lr-schedule picks another (lr_schedule.h: cosine, exp, step:E1,...
// and constant, after a linear warmup when W > 0); it is part of the run's configuration, so a
// checkpoint resumes only under the schedule that wrote it. After each epoch the model is
// evaluated on the test split, each rank on its 1/N of it, and the job's metric (a fraction of
// predictions counted correct) is summed over the ranks.
// On resume, the run continues exactly where the checkpoint's epoch ended: bit for bit on CPU
// with the same world size and mode (the final "state digest" lines then agree), and with the
// same data order at any other world size or mode.
// A resume must be given the flags that shaped the run (Note [Resume configuration] in
// resume_check.h): a changed --lr, --weight-decay, --max-grad-norm, --batch-size, --seed,
// --epochs, --optimizer, --momentum, --rmsprop-alpha, --rmsprop-centered, --adagrad-lr-decay,
// --lr-schedule, --lr-gamma, --warmup-steps, bf16-true's
// --precision or job flag of the model or data is refused (ValueError naming each flag, the
// checkpoint's value and the run's), never overridden by the checkpoint's optimizer groups.
// --epochs may change under --lr-schedule constant, exp and step:... (the longer run's lrs).
// The hyperparameters are compared from the checkpoint's optimizer header, before its tensors are
// read. A checkpoint that holds all of --epochs ends the run at once with "resume: nothing to
// do: ..." (exit 0, the checkpoint untouched); one past --epochs (a smaller --epochs) is refused.
// So does a checkpoint at or past --stop-after-epochs K or --stop-after-steps S ("resume:
// nothing to do: --stop-after-epochs 1 is reached in the checkpoint at 'c', which has 2
// epoch(s) done"), where the run's end is not passed. Such a resume reads no tensor: the state
// digest it prints was saved in the manifest beside them (one hash of the model per save).
// --strategy and the ranks, --accumulate, the autocast --precision, --device, --dp-replicas,
// --sync-batchnorm, --reduce-dtype, --tf32, --bucket-mb, --first-bucket-mb, --offload-optimizer,
// --cudnn-benchmark, --log-every and --checkpoint-every may change; the run prints "resume:
// changed since the checkpoint: --accumulate 1 -> 2" for each that did. (The buckets, the offload
// and cuDNN's algorithms change no formula but may change the rounding: see Note [Resume
// configuration].)
//
// A flag given but ignored under the other flags is refused (ValueError naming it and what
// ignores it), not silently dropped: --lr-gamma under a schedule other than exp and step:...,
// --dp-replicas without --strategy dp, --bucket-mb and --first-bucket-mb with single or dp
// (unless --estimate-memory), --reduce-dtype and --sync-batchnorm 1 with single or dp,
// --momentum without --optimizer sgd or rmsprop, --rmsprop-alpha / --rmsprop-centered without
// rmsprop, --adagrad-lr-decay without adagrad, --tf32 1 with --precision bf16-true (no float32
// product left to round; under bf16-mixed / f16-mixed it is taken, as PyTorch's allow_tf32 with
// autocast, and rounds the float32 products autocast leaves; on the CPU it is refused whatever
// the precision); and, once the model is built, --cudnn-benchmark 1
// on a model without a convolution module and --sync-batchnorm 1 on one without a BatchNorm layer
// (ValueError naming the flag and the model).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dist/strategy.h"
#include "nn/data.h"
#include "nn/module.h"
#include "nn/serialize/json.h"
#include "registry.h"

namespace sl::train {

/// A job's data, as its load_data returns it.
struct JobData {
  std::shared_ptr<nn::Dataset> train, test;
  /// One line printed after loading, e.g. "fashion-mnist: 60000 train / 10000 test images".
  std::string summary;
};

/// What a job brings to the shared loop.
struct SupervisedJob {
  /// The job's name: the prefix of its messages and its default checkpoint folder's name.
  std::string name;
  /// The model as printed in the run's "model:" line, e.g. "FashionCNN(32, 64, 128)".
  std::string description;
  /// The model's and data's settings; a checkpoint resumes only into a run with equal settings.
  serialize::Json config;
  int64_t default_batch_size = 128;  ///< when --batch-size is not given
  double default_lr = 2e-3;          ///< when --lr is not given
  /// When > 0 and --warmup-steps is not given: BERT's schedule (optim::LinearWarmupLR) with this
  /// fraction of the run's steps as warmup, instead of the cosine.
  double default_warmup_fraction = 0;
  /// Parameters whose names contain one of these take no weight decay.
  std::vector<std::string> no_decay = {"bias"};
  /// What evaluate counts, as printed: "test accuracy".
  std::string metric = "test accuracy";
  /// Loads (or builds) the data; called once per rank before the model is made. Throws IOError
  /// naming what is missing.
  std::function<JobData()> load_data;
  /// A new model; called once per replica after the run's seed is set (the same initial model on
  /// every rank) and after load_data.
  std::function<std::shared_ptr<nn::Module>()> make_model;
  /// The training loss of one batch of the train split (the loader's CPU tensors) in `epoch`
  /// (0-based): moves what it needs to `device` and runs the model through strategy.forward.
  std::function<Tensor(dist::Strategy& strategy, const TensorList& batch, const Device& device,
                       int64_t epoch)>
      loss;
  /// Optional: what the job stores in each checkpoint beside the loop's own state (an object
  /// whose members land in the manifest's "extra", e.g. the bert job's vocabulary); called on
  /// every rank at each save, after load_data.
  std::function<serialize::Json()> checkpoint_extra;
  /// {correct, counted} over examples [begin, end) of the test split. The loop calls it in eval
  /// mode under no-grad and restores training mode after.
  std::function<std::pair<int64_t, int64_t>(nn::Module& model, const nn::Dataset& test,
                                            int64_t begin, int64_t end)>
      evaluate;
};

/// Calls fn(batch) for examples [begin, end) of `data` in order, in batches of at most `size`
/// (the evaluations' loop).
void for_each_batch(const nn::Dataset& data, int64_t begin, int64_t end, int64_t size,
                    const std::function<void(const TensorList& batch)>& fn);

/// The flags run_supervised reads, for the jobs' --help tables (registry.h FlagDoc).
const FlagDocs& loop_flags();

/// Runs the loop for `opt` (see the file comment); returns the exit code. Throws ValueError /
/// DeviceError / IOError for bad flags, devices or data, with messages that start with the job's
/// name.
int run_supervised(const Options& opt, const SupervisedJob& job);

}  // namespace sl::train
