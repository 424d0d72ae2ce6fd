#include "lr_schedule.h"

#include <sstream>
#include <vector>

#include "core/error.h"
#include "registry.h"

namespace sl::train {

LrSchedule make_lr_schedule(const std::string& job, const std::string& spec, double gamma,
                            int64_t warmup, int64_t per_epoch, int64_t total_steps,
                            optim::Optimizer& opt) {
  using namespace optim;
  SL_CHECK(gamma > 0, job, ": --lr-gamma must be > 0, got ", gamma);
  const std::string kind = spec.substr(0, spec.find(':'));
  if (spec == "auto")
    return make_lr_schedule(job, warmup > 0 ? "linear" : "cosine", gamma, warmup, per_epoch,
                            total_steps, opt);
  if (spec == "linear") {
    return {std::make_unique<LinearWarmupLR>(opt, warmup, total_steps),
            warmup > 0 ? "linear warmup (" + std::to_string(warmup) + " steps) and decay"
                       : "linear decay"};
  }
  // The schedule after the warmup, over the steps that remain.
  const int64_t rest = total_steps - warmup;
  std::unique_ptr<LRScheduler> main;
  std::string what;
  std::ostringstream g;
  g << gamma;
  if (spec == "cosine") {
    main = std::make_unique<CosineAnnealingLR>(opt, std::max<int64_t>(rest, 1));
    what = "cosine";
  } else if (spec == "exp") {
    main = std::make_unique<StepLR>(opt, per_epoch, gamma);
    what = "x" + g.str() + " each epoch";
  } else if (kind == "step" && spec.size() > 5) {
    const auto epochs = parse_positive_ints(spec.substr(5), /*increasing=*/true);
    SL_CHECK(epochs.has_value(), job, ": --lr-schedule ", spec,
             ": expected step:E1,E2,... with epoch counts that are positive and increasing");
    std::vector<int64_t> milestones;
    for (int64_t e : *epochs) milestones.push_back(e * per_epoch);
    main = std::make_unique<MultiStepLR>(opt, milestones, gamma);
    what = "x" + g.str() + " after epochs " + spec.substr(5);
  } else if (spec == "constant") {
    main = std::make_unique<ConstantLR>(opt, 1.0, 1);
    what = "constant";
  } else {
    SL_CHECK(kind != "step", job, ": --lr-schedule ", spec,
             ": expected step:E1,E2,... with epoch counts that are positive and increasing");
    SL_CHECK(false, job, ": --lr-schedule must be auto, linear, cosine, exp, step:E1,E2,... or ",
             "constant, got '", spec, "'");
  }
  if (warmup == 0) return {std::move(main), what};
  std::vector<std::unique_ptr<LRScheduler>> parts;
  parts.push_back(
      std::make_unique<LinearLR>(opt, 1.0 / static_cast<double>(warmup + 1), 1.0, warmup));
  parts.push_back(std::move(main));
  return {std::make_unique<SequentialLR>(opt, std::move(parts), std::vector<int64_t>{warmup}),
          "linear warmup (" + std::to_string(warmup) + " steps), then " + what};
}

}  // namespace sl::train
