// Learning-rate schedulers with PyTorch 1.13's semantics: constructing one sets each group's lr
// to the schedule's value at epoch 0 (PyTorch's _initial_step), and step() advances one epoch
// (or iteration) and sets the new lr. The recursive ("chainable") formulas of torch.optim.
// lr_scheduler are used where PyTorch uses them, so the lrs agree to double rounding.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/serialize/state_dict.h"
#include "optim/optimizer.h"

namespace sl::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  virtual const char* name() const = 0;
  /// Advances one epoch and sets every group's lr. Call after optimizer.step().
  void step();
  /// The lrs set by the last step (PyTorch's get_last_lr()).
  const std::vector<double>& last_lr() const { return last_lr_; }
  /// Completed step() calls, counting the one made by the constructor as epoch 0.
  int64_t last_epoch() const { return last_epoch_; }
  /// Each group's initial_lr (Optimizer::initial_lr): its lr when the first scheduler on the
  /// optimizer was created, which this constructor sets if no scheduler has.
  const std::vector<double>& base_lrs() const { return base_lrs_; }

  /// Meta-only section: {"scheduler": name, "last_epoch", "step_count", "base_lrs", "last_lr",
  /// plus the scheduler's own fields}. The optimizer's current lrs are the optimizer's state.
  serialize::Section state_dict() const;
  /// Restores the counters (and fields); throws ValueError for another scheduler type or a
  /// different number of groups. Does not change the optimizer's lrs.
  void load_state_dict(const serialize::Section& s);
  /// The optimizer whose lrs this scheduler sets.
  const Optimizer& optimizer() const { return opt_; }

 protected:
  friend class SequentialLR;
  explicit LRScheduler(Optimizer& opt);
  /// PyTorch's _initial_step: called at the end of each subclass constructor.
  void initial_step();
  /// The lrs for last_epoch_ (already incremented); may update other group hyperparameters.
  virtual std::vector<double> compute_lr() = 0;
  /// The lrs at epoch 0 by the schedule's closed form, from base_lrs_ (what PyTorch's step(0)
  /// sets, SequentialLR's restart at a milestone). The default suits the schedulers whose
  /// compute_lr is already a closed form; the recursive ones override it.
  virtual std::vector<double> restart_lr() { return compute_lr(); }
  /// Sets last_epoch_ to 0 and the lrs to restart_lr() (PyTorch's step(0)).
  void restart();
  /// Sets every group's lr and last_lr_.
  void apply(std::vector<double> lrs);
  virtual void save_fields(serialize::Json&) const {}
  virtual void load_fields(const serialize::Json&) {}

  Optimizer& opt_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
};

/// lr * gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  /// Throws ValueError when step_size < 1.
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);
  const char* name() const override { return "StepLR"; }

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> restart_lr() override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// Cosine annealing from the base lr to eta_min over T_max epochs (then back up, as PyTorch's
/// recursive formula does past T_max).
class CosineAnnealingLR : public LRScheduler {
 public:
  /// Throws ValueError when T_max < 1.
  CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min = 0.0);
  const char* name() const override { return "CosineAnnealingLR"; }

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> restart_lr() override;

 private:
  int64_t t_max_;
  double eta_min_;
};

/// lr * gamma^k at each epoch that appears k times in milestones (MultiStepLR: any order,
/// repeats multiply; a milestone 0 applies at construction, as in PyTorch).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& opt, std::vector<int64_t> milestones, double gamma = 0.1);
  const char* name() const override { return "MultiStepLR"; }

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> restart_lr() override;
  void save_fields(serialize::Json& j) const override;
  void load_fields(const serialize::Json& j) override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

/// lr * gamma every epoch (ExponentialLR; deepspeech.pytorch's learning_anneal). Throws
/// ValueError for a negative gamma (the lr would turn negative).
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& opt, double gamma);
  const char* name() const override { return "ExponentialLR"; }

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> restart_lr() override;

 private:
  double gamma_;
};

/// base_lr * factor for epochs 0..total_iters-1, then base_lr (ConstantLR). Throws ValueError
/// unless 0 < factor <= 1 and total_iters >= 1 (PyTorch 1.13 accepts factor 0 and then divides
/// by zero at total_iters).
class ConstantLR : public LRScheduler {
 public:
  ConstantLR(Optimizer& opt, double factor = 1.0 / 3, int64_t total_iters = 5);
  const char* name() const override { return "ConstantLR"; }

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> restart_lr() override;

 private:
  double factor_;
  int64_t total_iters_;
};

/// The multiplier moves linearly from start_factor at epoch 0 to end_factor at total_iters, then
/// stays (LinearLR; a warmup with start_factor < 1). Throws ValueError unless 0 < start_factor
/// <= 1, 0 <= end_factor <= 1 and total_iters >= 1 (PyTorch 1.13 divides by zero for a
/// start_factor of 0; 2.x refuses it).
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& opt, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5);
  const char* name() const override { return "LinearLR"; }

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> restart_lr() override;

 private:
  double start_, end_;
  int64_t total_iters_;
};

/// base_lr * (1 - min(epoch, total_iters) / total_iters)^power (PolynomialLR). Throws
/// ValueError for total_iters < 1 or a negative power.
class PolynomialLR : public LRScheduler {
 public:
  PolynomialLR(Optimizer& opt, int64_t total_iters = 5, double power = 1.0);
  const char* name() const override { return "PolynomialLR"; }

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> restart_lr() override;

 private:
  int64_t total_iters_;
  double power_;
};

/// SGDR (CosineAnnealingWarmRestarts): cosine from the base lr to eta_min over T_i epochs, then
/// a restart at the base lr with T_i *= T_mult; T_0 is the first period. Throws ValueError for
/// T_0 < 1 or T_mult < 1. The position in the period is saved in state_dict.
class CosineAnnealingWarmRestarts : public LRScheduler {
 public:
  CosineAnnealingWarmRestarts(Optimizer& opt, int64_t T_0, int64_t T_mult = 1,
                              double eta_min = 0.0);
  const char* name() const override { return "CosineAnnealingWarmRestarts"; }

 protected:
  std::vector<double> compute_lr() override;
  void save_fields(serialize::Json& j) const override;
  void load_fields(const serialize::Json& j) override;

 private:
  int64_t t0_, t_mult_, t_i_, t_cur_ = -1;
  double eta_min_;
};

/// base_lr * lambda(epoch) (torch.optim.lr_scheduler.LambdaLR). The function is not saved in
/// state_dict; recreate the scheduler with the same function and load the counters.
class LambdaLR : public LRScheduler {
 public:
  using Fn = std::function<double(int64_t epoch)>;
  /// One function for all groups.
  LambdaLR(Optimizer& opt, Fn lr_lambda);
  const char* name() const override { return "LambdaLR"; }

 protected:
  std::vector<double> compute_lr() override;

 private:
  Fn fn_;
};

/// BERT's schedule, as transformers.get_linear_schedule_with_warmup: lr rises linearly from 0
/// to the base lr over num_warmup_steps, then falls linearly to 0 at num_training_steps.
/// A LambdaLR whose state_dict also records the two step counts (checked on load).
class LinearWarmupLR : public LRScheduler {
 public:
  /// Throws ValueError for negative counts or warmup > training steps.
  LinearWarmupLR(Optimizer& opt, int64_t num_warmup_steps, int64_t num_training_steps);
  const char* name() const override { return "LinearWarmupLR"; }
  /// The multiplier at `step` (transformers' lr_lambda).
  static double factor(int64_t step, int64_t warmup, int64_t total);

 protected:
  std::vector<double> compute_lr() override;
  void save_fields(serialize::Json& j) const override;
  void load_fields(const serialize::Json& j) override;

 private:
  int64_t warmup_, total_;
};

struct OneCycleOptions {
  int64_t total_steps = 0;  ///< required (> 0)
  double pct_start = 0.3;
  bool cos_anneal = true;  ///< anneal_strategy 'cos' (true) or 'linear'
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
};

/// torch.optim.lr_scheduler.OneCycleLR: lr from max_lr/div_factor up to max_lr over
/// pct_start of the steps, then down to initial_lr/final_div_factor; with cycle_momentum the
/// optimizer's momentum (SGD) or beta1 (Adam/AdamW) moves inversely between max_momentum and
/// base_momentum. The constructor sets them on the optimizer, as PyTorch does.
class OneCycleLR : public LRScheduler {
 public:
  /// max_lrs: one per group, or a single value for all. Throws ValueError for bad options,
  /// including a pct_start and total_steps that leave a reachable phase zero steps wide (PyTorch
  /// divides by zero there: Note [OneCycle empty phases]).
  OneCycleLR(Optimizer& opt, std::vector<double> max_lrs, OneCycleOptions o);
  const char* name() const override { return "OneCycleLR"; }

 protected:
  std::vector<double> compute_lr() override;
  void save_fields(serialize::Json& j) const override;
  void load_fields(const serialize::Json& j) override;

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr, start_m, end_m;  ///< 0 initial, 1 max, 2 min / 0 max_m, 1 base_m
  };
  double anneal(double start, double end, double pct) const;
  OneCycleOptions o_;
  std::vector<Phase> phases_;
  std::vector<double> initial_lr_, max_lr_, min_lr_, max_m_, base_m_;
};

/// SequentialLR: schedulers[0] drives the lr until milestones[0], schedulers[1] from there,
/// and so on; each later scheduler restarts at its milestone from the groups' initial lr (its
/// closed form at epoch 0, as PyTorch's step(0)). Construction resets the lrs to the initial
/// ones and redoes schedulers[0]'s first step, undoing what the others' constructors did. Its
/// state_dict nests theirs. Throws ValueError when a scheduler drives another optimizer, when
/// there is not exactly one milestone fewer than schedulers, or when the milestones are not
/// positive and increasing (PyTorch does not check, and bisects them anyway).
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& opt, std::vector<std::unique_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  const char* name() const override { return "SequentialLR"; }
  const LRScheduler& scheduler(size_t i) const { return *schedulers_.at(i); }

 protected:
  std::vector<double> compute_lr() override;
  void save_fields(serialize::Json& j) const override;
  void load_fields(const serialize::Json& j) override;

 private:
  std::vector<std::unique_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

/// Options of ReduceLROnPlateau, with PyTorch's defaults.
struct PlateauOptions {
  bool maximize = false;  ///< mode 'max': a larger metric is better (accuracy); else 'min' (loss)
  double factor = 0.1;    ///< new lr = max(lr * factor, min_lr); in [0, 1)
  int64_t patience = 10;  ///< bad epochs tolerated before a reduction
  double threshold = 1e-4;
  bool relative_threshold = true;  ///< threshold_mode 'rel' (true) or 'abs'
  int64_t cooldown = 0;            ///< epochs after a reduction during which bad epochs don't count
  std::vector<double> min_lrs = {0.0};  ///< one for all groups, or one per group
  double eps = 1e-8;                    ///< a reduction smaller than eps is not applied
};

/// torch.optim.lr_scheduler.ReduceLROnPlateau (1.13): step(metric) after each evaluation; when
/// the metric has not improved on the best one seen for more than `patience` steps, every
/// group's lr is multiplied by `factor` (not below its min_lr), then `cooldown` steps pass before
/// bad steps count again. "Improved" means, for mode min, metric < best * (1 - threshold) (rel)
/// or metric < best - threshold (abs); for mode max, metric > best * (1 + threshold) or
/// metric > best + threshold. A NaN metric never improves (it counts as a bad step, as in
/// PyTorch). Unlike the epoch schedulers it does not set the lr at construction.
class ReduceLROnPlateau {
 public:
  /// Throws ValueError for factor outside [0, 1), negative patience, cooldown or eps, or a
  /// min_lrs list whose size is neither 1 nor the number of groups.
  ReduceLROnPlateau(Optimizer& opt, PlateauOptions o = {});
  ReduceLROnPlateau(const ReduceLROnPlateau&) = delete;
  ReduceLROnPlateau& operator=(const ReduceLROnPlateau&) = delete;

  const char* name() const { return "ReduceLROnPlateau"; }
  /// Takes one evaluation's metric; may lower the lrs (returns whether it did).
  bool step(double metric);
  /// The groups' lrs after the last step (the optimizer's at construction).
  const std::vector<double>& last_lr() const { return last_lr_; }
  /// step() calls so far.
  int64_t last_epoch() const { return last_epoch_; }
  /// The best metric so far (+inf for min, -inf for max before the first step).
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }

  /// Meta-only section: {"scheduler": "ReduceLROnPlateau", "last_epoch", "best" (null before a
  /// finite best), "num_bad_epochs", "cooldown_counter", "last_lr", and the options}.
  serialize::Section state_dict() const;
  /// Restores the counters and the best metric; throws ValueError for another scheduler's
  /// state, another number of groups, or different options (mode, factor, patience, threshold,
  /// cooldown, min_lrs, eps), naming the option. Does not change the optimizer's lrs.
  void load_state_dict(const serialize::Section& s);

 private:
  bool is_better(double a) const;
  serialize::Json options_json() const;

  Optimizer& opt_;
  PlateauOptions o_;
  std::vector<double> last_lr_;
  double best_;
  int64_t last_epoch_ = 0;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
};

}  // namespace sl::optim
