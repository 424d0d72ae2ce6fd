// Continuing a run from its checkpoint (--resume 1, supervised.h): the run's configuration and
// its optimizer's hyperparameters checked against the checkpoint's (Note [Resume configuration]
// in resume_check.h), where the checkpoint stands in the run (past its end: refused; at its end or
// at or past a stop point: nothing to do), and the restore of the strategy's, the scheduler's,
// the random generator's and the data loader's state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/sampler.h"
#include "dist/strategy.h"
#include "nn/serialize/json.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "registry.h"

namespace sl::train {

/// Where a run ends, in its optimizer steps (epoch * per_epoch + batch, as a checkpoint's data
/// position counts them).
struct RunEnd {
  int64_t epochs = 0;              ///< --epochs
  int64_t per_epoch = 0;           ///< optimizer steps per epoch
  int64_t stop_after_epochs = -1;  ///< --stop-after-epochs (-1: none)
  int64_t stop_after_steps = -1;   ///< --stop-after-steps (-1: none)
  int64_t total_steps() const { return epochs * per_epoch; }
};

/// What the resumed run must match and announce.
struct ResumeRun {
  std::string job;       ///< the prefix of the messages
  std::string ckpt_dir;  ///< --checkpoint-dir
  /// The run's configuration (the job's settings and the loop's run_config, supervised.cpp) and
  /// its run settings (flag -> value text, the flags that may change).
  serialize::Json config, run_settings;
  /// The job's flag table, to name the job's configuration keys by their flags.
  const FlagDocs* documented = nullptr;
  /// --lr-schedule: --epochs may change under constant, exp and step:... only.
  std::string lr_schedule;
  int world = 1;  ///< the run's ranks
};

/// What resume_from_checkpoint found and restored.
struct Resumed {
  /// What the run prints as "resume: <line>", one line each: the accepted changes
  /// (check_resume_config's, a changed strategy or world size, changed_settings').
  std::vector<std::string> changes;
  /// Why there is nothing to train, as printed after "resume: nothing to do: " ("all --epochs 3
  /// are done in the checkpoint at 'c'"); empty: the run trains on.
  std::string nothing_to_do;
  /// With nothing to do: the test accuracy of the last epoch the checkpoint finished (-1: none).
  /// Otherwise -1 (the run evaluates its own).
  double accuracy = -1;
  /// The checkpoint's state digest when its tensors were not loaded (nothing to do, and the
  /// manifest holds it); empty when the model holds the checkpoint's state (then its own digest
  /// is the run's).
  std::string saved_digest;
};

/// Resumes `strategy` (with its `optimizer`), `scheduler` and `loader`, and the default generator,
/// from the sharded checkpoint at run.ckpt_dir, which must hold a supervised loop's run. Checks
/// first, before any tensor is read: the configuration (check_resume_config), then the
/// hyperparameters the optimizer would restore from the checkpoint's header against those it was
/// built with (check_resume_hyperparameters). A checkpoint past end.total_steps() is refused;
/// one at it, or at or past end.stop_after_epochs * end.per_epoch or end.stop_after_steps
/// (when >= 0), leaves nothing to do: its tensors are then not read when the manifest holds the
/// state digest (older checkpoints are loaded to compute it), and the strategy's counters, the
/// scheduler, the generator and the loader are restored from the manifest alone. Throws IOError
/// when there is no checkpoint, ValueError naming each mismatch or the position past the run's
/// end (messages start with run.job).
Resumed resume_from_checkpoint(const ResumeRun& run, const RunEnd& end, dist::Strategy& strategy,
                               optim::Optimizer& optimizer, optim::LRScheduler& scheduler,
                               dist::DistributedLoader& loader);

}  // namespace sl::train
