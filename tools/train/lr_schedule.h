// The trainer's --lr-schedule: which optim:: scheduler the supervised loop (supervised.h) steps
// once per batch, built from the flag, the run's length and --warmup-steps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "optim/lr_scheduler.h"

namespace sl::train {

/// A scheduler on the run's optimizer and a phrase saying what it does (for the run's banner).
struct LrSchedule {
  std::unique_ptr<optim::LRScheduler> scheduler;
  std::string description;
};

/// Builds the schedule `spec` names over total_steps steps of per_epoch steps each:
///   auto      linear when warmup > 0, else cosine (the jobs' defaults);
///   linear    BERT's: from 0 up to the lr over `warmup` steps, then down to 0 at the last step;
///   cosine    cosine annealing to 0 at the last step;
///   exp       the lr times gamma after every epoch;
///   step:E1,E2,...  the lr times gamma after E1 epochs, again after E2, ... (torchvision's
///             ResNet recipe is step:30,60,80 with gamma 0.1);
///   constant  the lr, unchanged.
/// With warmup W > 0, cosine, exp, step and constant first rise linearly over W steps from
/// lr / (W + 1) to the lr (SequentialLR of LinearLR and the schedule, which then counts its steps
/// and epochs from the end of the warmup). Throws ValueError, naming the job and the flag, for an
/// unknown spec, epochs that are not positive and increasing, or gamma <= 0.
LrSchedule make_lr_schedule(const std::string& job, const std::string& spec, double gamma,
                            int64_t warmup, int64_t per_epoch, int64_t total_steps,
                            optim::Optimizer& opt);

}  // namespace sl::train
