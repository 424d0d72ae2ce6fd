// What a resumed run (--resume 1, supervised.h) must share with the checkpoint it continues, and
// what it may change and says it changed.
//
// Note [Resume configuration]
// A checkpoint's "extra" holds:
//   config        the run's configuration (the job's model and data settings; the loop's
//                 batch_size, seed, epochs, max_grad_norm, and optimizer, momentum,
//                 rmsprop_alpha, rmsprop_centered, adagrad_lr_decay, lr_schedule, lr_gamma,
//                 warmup_steps, param_dtype when not their defaults). A key whose
//                 default is not written reads as that default, so checkpoints written before the
//                 key existed still resume; max_grad_norm is always written, and a checkpoint
//                 without it (an older trainer's) resumes with the run's value, announced.
//   scheduler     the lr schedule's counters and base_lrs;
//   state_digest  models::state_digest of the saved model (rank 0's, as the saved buffers are):
//                 what a resume with nothing to do prints without reading a tensor (absent in
//                 older checkpoints, which that resume loads to compute it);
//   run_settings  flags that may change on resume ("accumulate", "precision", "device", ...: the
//                 flag's name without dashes -> its value as text); absent in older checkpoints,
//                 and a key an older checkpoint lacks ("bucket-mb", "first-bucket-mb",
//                 "offload-optimizer", "cudnn-benchmark" came later) is not announced.
//                 Some change the rounding though no formula: --accumulate and the autocast
//                 --precision; the bucket sizes where a sum's grouping follows the buckets (the
//                 blocked sums of --max-grad-norm's norm run over flat buffers whose padding and,
//                 under zero1/zero2, each rank's slices depend on them, as do LAMB's
//                 per-parameter norms under zero1/zero2; on more than 2 ranks MPI may pick
//                 another all-reduce algorithm for another message size), though every gradient
//                 sum is a + b on 2 ranks (the tiny CNN under ddp and zero2 on 2 ranks ended
//                 bit-identical with one bucket or many, also with --max-grad-norm and LAMB, 30
//                 steps, 2026-12-07: the norms are summed in float64, so a regrouping rarely
//                 reaches a float32 bit; not promised); --offload-optimizer (the CPU's update
//                 kernels instead of the GPU's); --cudnn-benchmark (other convolution algorithms).
// The optimizer's hyperparameters (lr through initial_lr, weight_decay, momentum, betas, ...) are
// in its param_groups, which loading restores as PyTorch does; they must equal the run's, else
// the flags would be silently overridden by the checkpoint's values.
// Any difference in the configuration or the hyperparameters is refused (ValueError naming each
// flag with both values); --epochs may grow or shrink only under a schedule that does not depend
// on the run's length (constant, exp, step:...), and is then announced with the other changes.
// The loop checks the hyperparameters from the optimizer file's header (dist::
// read_sharded_optimizer_meta) before it loads a tensor, and refuses a checkpoint past the run's
// end (no step can be taken back); one at the run's end, or at or past a --stop-after-epochs or
// --stop-after-steps point, resumes to "nothing to do".
#pragma once

#include <string>
#include <vector>

#include "nn/serialize/json.h"
#include "registry.h"

namespace sl::train {

/// Compares a checkpoint's configuration `saved` with the run's `run` key by key (Note [Resume
/// configuration]). Throws ValueError "<job>: the checkpoint at '<dir>' was written with another
/// configuration: --batch-size 32 there, 16 in this run; ..." naming every differing key by its
/// flag (the loop's keys, and the job's when `documented` lists a flag of that name; other keys
/// by name). `epochs_may_change`: whether the schedule leaves a changed "epochs" a continuation.
/// Returns what the run accepts and must announce, one line each ("changed since the checkpoint:
/// --epochs 3 -> 5 (...)"; "--max-grad-norm 0 is not checked: ..." for an older checkpoint).
std::vector<std::string> check_resume_config(const std::string& job, const std::string& dir,
                                             const serialize::Json& saved,
                                             const serialize::Json& run, const FlagDocs* documented,
                                             bool epochs_may_change);

/// Compares the optimizer's param_groups as the checkpoint restored them (`loaded`) with those
/// the run built from its flags (`built`), except the scheduled "lr": initial_lr is --lr,
/// weight_decay --weight-decay, momentum --momentum, alpha --rmsprop-alpha, centered
/// --rmsprop-centered, lr_decay --adagrad-lr-decay (others as "the optimizer's <key>"). Throws
/// ValueError as check_resume_config.
void check_resume_hyperparameters(const std::string& job, const std::string& dir,
                                  const serialize::Json& loaded, const serialize::Json& built);

/// The flags of `run` (an object of flag name -> value text) whose value differs from `saved`'s
/// (null for older checkpoints: nothing then), as lines "changed since the checkpoint:
/// --accumulate 1 -> 2".
std::vector<std::string> changed_settings(const serialize::Json* saved, const serialize::Json& run);

}  // namespace sl::train
