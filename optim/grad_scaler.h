// Dynamic loss scaling for f16 training, as torch.cuda.amp.GradScaler: the loss is multiplied by
// a scale before backward; before the optimizer step the gradients are divided by it and
// checked for inf/NaN; a step with an inf/NaN is skipped and the scale halved (backoff), and
// after growth_interval clean steps in a row the scale doubles (growth).
//
// Distributed training must skip or take a step on every rank alike: set_found_inf_sync
// installs a function that receives the local flag (a one-element f32 tensor, 1 when this
// rank saw an inf/NaN) and turns it into the global one in place, e.g. an all-reduce with max.
#pragma once

#include <functional>
#include <unordered_map>

#include "nn/serialize/state_dict.h"
#include "optim/optimizer.h"

namespace sl::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  /// When false every method is a pass-through (scale() returns the loss, step() steps).
  bool enabled = true;
};

class GradScaler {
 public:
  /// Throws ValueError for growth_factor <= 1, backoff_factor outside (0, 1), a non-positive
  /// init_scale or growth_interval.
  explicit GradScaler(GradScalerOptions o = {});

  /// loss * scale (differentiable).
  Tensor scale(const Tensor& loss) const;
  /// Divides the gradients of opt's parameters by the scale in place and records whether any
  /// is inf/NaN (after the found-inf sync, if set). Throws ValueError when called twice for the
  /// same optimizer before update().
  void unscale_(Optimizer& opt);
  /// unscale_ unless already done, then opt.step() unless an inf/NaN was found. Returns true
  /// when the step was taken.
  bool step(Optimizer& opt);
  /// Backs off after a skipped step or grows after growth_interval clean ones; clears the
  /// per-step records. Call once per iteration after step().
  void update();

  double get_scale() const { return scale_; }
  /// Whether an inf/NaN was found since the last update (over all optimizers).
  bool found_inf() const;
  int64_t growth_tracker() const { return growth_tracker_; }
  bool enabled() const { return o_.enabled; }
  void set_found_inf_sync(std::function<void(const Tensor& found_inf)> fn) {
    sync_ = std::move(fn);
  }

  /// Meta-only section {"scale", "growth_tracker", "growth_factor", "backoff_factor",
  /// "growth_interval"}; load_state_dict restores all of them.
  serialize::Section state_dict() const;
  void load_state_dict(const serialize::Section& s);

 private:
  struct PerOptimizer {
    bool unscaled = false;
    bool found_inf = false;
  };
  GradScalerOptions o_;
  double scale_;
  int64_t growth_tracker_ = 0;
  std::unordered_map<const Optimizer*, PerOptimizer> per_opt_;
  std::function<void(const Tensor&)> sync_;
};

}  // namespace sl::optim
