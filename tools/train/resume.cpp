// Continuing a run from its checkpoint (see resume.h).
#include "resume.h"

#include <filesystem>
#include <utility>

#include "core/error.h"
#include "core/random.h"
#include "dist/checkpoint.h"
#include "nn/serialize/state_dict.h"
#include "resume_check.h"

namespace sl::train {

Resumed resume_from_checkpoint(const ResumeRun& run, const RunEnd& end, dist::Strategy& strategy,
                               optim::Optimizer& optimizer, optim::LRScheduler& scheduler,
                               dist::DistributedLoader& loader) {
  const std::string& name = run.job;
  const std::string& ckpt_dir = run.ckpt_dir;
  const std::string& lr_schedule = run.lr_schedule;
  const int64_t per_epoch = end.per_epoch, total_steps = end.total_steps();
  const int64_t stop_after = end.stop_after_epochs, stop_after_steps = end.stop_after_steps;
  Resumed out;
  SL_CHECK_IO(std::filesystem::exists(ckpt_dir), name,
              ": --resume 1 but there is no checkpoint at '", ckpt_dir, "'");
  // The configuration first (from the manifest alone), so a mismatch is named as one rather
  // than as the tensor it makes misfit.
  const serialize::Json manifest = dist::read_sharded_manifest(ckpt_dir);
  const serialize::Json* saved = manifest.at("extra").find("config");
  SL_CHECK(saved != nullptr, name, ": the checkpoint at '", ckpt_dir,
           "' holds no configuration (not written by sl_train's supervised loop)");
  // Only a schedule that ignores the run's length stays the same schedule under other epochs.
  const bool epochs_may_change =
      lr_schedule == "constant" || lr_schedule == "exp" || lr_schedule.rfind("step:", 0) == 0;
  out.changes =
      check_resume_config(name, ckpt_dir, *saved, run.config, run.documented, epochs_may_change);
  if (manifest.at("strategy").as_string() != strategy.name() ||
      manifest.at("world_size").as_int() != run.world) {
    out.changes.push_back("changed since the checkpoint: --strategy " +
                          manifest.at("strategy").as_string() + " on " +
                          std::to_string(manifest.at("world_size").as_int()) + " rank(s) -> " +
                          strategy.name() + " on " + std::to_string(run.world) + " rank(s)");
  }
  for (std::string& c :
       changed_settings(manifest.at("extra").find("run_settings"), run.run_settings)) {
    out.changes.push_back(std::move(c));
  }
  // Loading restores the optimizer's hyperparameters from the checkpoint (as PyTorch does):
  // they must be the ones the flags asked for, or the flags would be silently overridden.
  // Checked before any tensor is read: the optimizer parses the checkpoint's param groups
  // (from a file header) as the load will, which then restores them again with the state.
  const serialize::Json built_groups = optimizer.state_dict().meta.at("param_groups");
  {
    serialize::Json groups = dist::read_sharded_optimizer_meta(ckpt_dir);
    groups.set("state", serialize::Json::object());
    optimizer.load_state_dict({{}, groups});
  }
  check_resume_hyperparameters(name, ckpt_dir, optimizer.state_dict().meta.at("param_groups"),
                               built_groups);
  // Where the checkpoint is in the run: past this run's end is refused (no step can be taken
  // back), at its end there is nothing to train (said, as Lightning says max_epochs is reached).
  const serialize::Json& at = manifest.at("extra").at("data_position");
  const int64_t done_epochs = at.at("epoch").as_int(), done_batches = at.at("batch").as_int();
  const int64_t done = done_epochs * per_epoch + done_batches;
  SL_CHECK(done <= total_steps, name, ": --epochs ", end.epochs, " but the checkpoint at '",
           ckpt_dir, "' has ", done_epochs, " epoch(s)",
           done_batches > 0 ? " and " + std::to_string(done_batches) + " step(s) of the next" : "",
           " done already (a resumed run cannot take steps back: resume with --epochs ",
           done_epochs + (done_batches > 0 ? 1 : 0),
           " or more, or start a new run in another --checkpoint-dir)");
  // At or past a stop point (--stop-after-epochs, --stop-after-steps) there is nothing to
  // train either: the loop would stop before its first step (or, for steps, after one step it
  // would not save). Said as the run's end is.
  const std::string has =
      "', which has " +
      (done_batches > 0
           ? std::to_string(done) + " step(s) of the run (" + std::to_string(done_epochs) +
                 " epoch(s) and " + std::to_string(done_batches) + " step(s) of the next)"
           : std::to_string(done_epochs) + " epoch(s)") +
      " done";
  std::string& reason = out.nothing_to_do;
  if (done == total_steps) {
    reason = "all --epochs " + std::to_string(end.epochs) + " are done in the checkpoint at '" +
             ckpt_dir + "'";
  } else if (stop_after >= 0 && done >= stop_after * per_epoch) {
    reason = "--stop-after-epochs " + std::to_string(stop_after) +
             " is reached in the checkpoint at '" + ckpt_dir + has;
  } else if (stop_after_steps >= 0 && done >= stop_after_steps) {
    reason = "--stop-after-steps " + std::to_string(stop_after_steps) +
             " is reached in the checkpoint at '" + ckpt_dir + has;
  }
  const bool nothing_to_do = !reason.empty();
  // With nothing to train, what the run prints is in the manifest, the state digest included
  // (saved beside the tensors it hashes): no tensor is read. A checkpoint without it (an older
  // trainer's) is loaded to compute it.
  const serialize::Json* digest = manifest.at("extra").find("state_digest");
  serialize::Json extra;
  if (nothing_to_do && digest != nullptr) {
    out.saved_digest = digest->as_string();
    extra = manifest.at("extra");
    const serialize::Json& c = manifest.at("counters");  // as the load sets them
    strategy.set_counters({c.at("steps_taken").as_int(), c.at("loss_scale").as_double(),
                           c.at("growth_tracker").as_int()});
  } else {
    extra = dist::load_sharded_checkpoint(ckpt_dir, strategy);
  }
  // of the last epoch the checkpoint finished (-1: none yet)
  if (nothing_to_do) out.accuracy = extra.at("test_accuracy").as_double();
  scheduler.load_state_dict({{}, extra.at("scheduler")});
  default_generator().set_state(serialize::rng_state_from_json(extra.at("rng")));
  const serialize::Json& p = extra.at("data_position");
  loader.set_position(
      {std::stoull(p.at("seed").as_string()), p.at("epoch").as_int(), p.at("batch").as_int()});
  return out;
}

}  // namespace sl::train
