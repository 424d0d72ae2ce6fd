#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

namespace sl::optim {

using serialize::Json;
using serialize::Section;

namespace {

Json doubles_to_json(const std::vector<double>& v) {
  Json a = Json::array();
  for (double x : v) a.push_back(x);
  return a;
}

Json ints_to_json(const std::vector<int64_t>& v) {
  Json a = Json::array();
  for (int64_t x : v) a.push_back(x);
  return a;
}

std::vector<double> doubles_from_json(const Json& j, size_t expected, const char* what) {
  SL_CHECK(j.size() == expected, "load_state_dict: '", what, "' has ", j.size(),
           " entries, expected ", expected);
  std::vector<double> out;
  for (const Json& x : j.items()) out.push_back(x.as_double());
  return out;
}

constexpr double kPi = std::numbers::pi;

// JSON values equal as saved options: numbers by value (1 and 1.0 alike), arrays elementwise.
bool same_value(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!same_value(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b;
}

}  // namespace

// ---- base ------------------------------------------------------------------------------------

// PyTorch: group.setdefault('initial_lr', group['lr']); base_lrs = each group's initial_lr. A
// second scheduler on the same optimizer therefore starts from the lr the first one found.
LRScheduler::LRScheduler(Optimizer& opt) : opt_(opt) {
  for (size_t g = 0; g < opt.num_param_groups(); ++g) {
    if (!opt.initial_lr(g)) opt.set_initial_lr(g, opt.lr(g));
    base_lrs_.push_back(*opt.initial_lr(g));
  }
}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

void LRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  apply(compute_lr());
}

void LRScheduler::restart() {
  ++step_count_;
  last_epoch_ = 0;
  apply(restart_lr());
}

void LRScheduler::apply(std::vector<double> lrs) {
  SL_ASSERT(lrs.size() == opt_.num_param_groups());
  for (size_t g = 0; g < lrs.size(); ++g) opt_.set_lr(g, lrs[g]);
  last_lr_ = std::move(lrs);
}

Section LRScheduler::state_dict() const {
  Section s;
  s.meta = Json::object({{"scheduler", name()},
                         {"last_epoch", last_epoch_},
                         {"step_count", step_count_},
                         {"base_lrs", doubles_to_json(base_lrs_)},
                         {"last_lr", doubles_to_json(last_lr_)}});
  save_fields(s.meta);
  return s;
}

void LRScheduler::load_state_dict(const Section& s) {
  const Json& m = s.meta;
  SL_CHECK(m.is_object() && m.contains("scheduler"), name(),
           ".load_state_dict: the section holds no scheduler state");
  SL_CHECK(m.at("scheduler").as_string() == name(), name(), ".load_state_dict: saved state is for ",
           m.at("scheduler").as_string(), ", not ", name());
  size_t n = opt_.num_param_groups();
  auto base = doubles_from_json(m.at("base_lrs"), n, "base_lrs");
  auto last = doubles_from_json(m.at("last_lr"), n, "last_lr");
  int64_t last_epoch = m.at("last_epoch").as_int();
  int64_t step_count = m.at("step_count").as_int();
  load_fields(m);
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
  last_epoch_ = last_epoch;
  step_count_ = step_count;
}

// ---- StepLR ----------------------------------------------------------------------------------

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma)
    : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  SL_CHECK(step_size >= 1, "StepLR: step_size must be >= 1, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::compute_lr() {
  std::vector<double> out;
  for (size_t g = 0; g < opt_.num_param_groups(); ++g) {
    double lr = opt_.lr(g);
    if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) {
      out.push_back(lr);
    } else {
      out.push_back(lr * gamma_);
    }
  }
  return out;
}

// The closed form at epoch 0: base_lr * gamma ** (0 // step_size).
std::vector<double> StepLR::restart_lr() {
  return base_lrs_;
}

// ---- CosineAnnealingLR -----------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min)
    : LRScheduler(opt), t_max_(T_max), eta_min_(eta_min) {
  SL_CHECK(T_max >= 1, "CosineAnnealingLR: T_max must be >= 1, got ", T_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::compute_lr() {
  std::vector<double> out;
  const double T = static_cast<double>(t_max_);
  const auto e = last_epoch_;
  for (size_t g = 0; g < opt_.num_param_groups(); ++g) {
    double lr = opt_.lr(g);
    if (e == 0) {
      out.push_back(lr);
    } else if ((((e - 1 - t_max_) % (2 * t_max_)) + 2 * t_max_) % (2 * t_max_) == 0) {
      // Python's % is non-negative for a positive divisor
      out.push_back(lr + (base_lrs_[g] - eta_min_) * (1 - std::cos(kPi / T)) / 2);
    } else {
      out.push_back((1 + std::cos(kPi * static_cast<double>(e) / T)) /
                        (1 + std::cos(kPi * static_cast<double>(e - 1) / T)) * (lr - eta_min_) +
                    eta_min_);
    }
  }
  return out;
}

std::vector<double> CosineAnnealingLR::restart_lr() {
  std::vector<double> out;  // the closed form at epoch 0
  for (double b : base_lrs_) {
    out.push_back(eta_min_ +
                  (b - eta_min_) * (1 + std::cos(kPi * 0.0 / static_cast<double>(t_max_))) / 2);
  }
  return out;
}

// ---- LambdaLR / LinearWarmupLR ---------------------------------------------------------------

LambdaLR::LambdaLR(Optimizer& opt, Fn lr_lambda) : LRScheduler(opt), fn_(std::move(lr_lambda)) {
  SL_CHECK(static_cast<bool>(fn_), "LambdaLR: lr_lambda is empty");
  initial_step();
}

std::vector<double> LambdaLR::compute_lr() {
  std::vector<double> out;
  double f = fn_(last_epoch_);
  for (double b : base_lrs_) out.push_back(b * f);
  return out;
}

LinearWarmupLR::LinearWarmupLR(Optimizer& opt, int64_t num_warmup_steps, int64_t num_training_steps)
    : LRScheduler(opt), warmup_(num_warmup_steps), total_(num_training_steps) {
  SL_CHECK(
      num_warmup_steps >= 0 && num_training_steps >= 0 && num_warmup_steps <= num_training_steps,
      "LinearWarmupLR: need 0 <= num_warmup_steps <= num_training_steps, got ", num_warmup_steps,
      " and ", num_training_steps);
  initial_step();
}

double LinearWarmupLR::factor(int64_t step, int64_t warmup, int64_t total) {
  if (step < warmup) {
    return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup));
  }
  return std::max(0.0, static_cast<double>(total - step) /
                           static_cast<double>(std::max<int64_t>(1, total - warmup)));
}

std::vector<double> LinearWarmupLR::compute_lr() {
  std::vector<double> out;
  double f = factor(last_epoch_, warmup_, total_);
  for (double b : base_lrs_) out.push_back(b * f);
  return out;
}

void LinearWarmupLR::save_fields(Json& j) const {
  j.set("num_warmup_steps", warmup_);
  j.set("num_training_steps", total_);
}

void LinearWarmupLR::load_fields(const Json& j) {
  SL_CHECK(
      j.at("num_warmup_steps").as_int() == warmup_ && j.at("num_training_steps").as_int() == total_,
      "LinearWarmupLR.load_state_dict: saved for ", j.at("num_warmup_steps").as_int(), "/",
      j.at("num_training_steps").as_int(), " warmup/training steps, this scheduler has ", warmup_,
      "/", total_);
}

// ---- MultiStepLR, ExponentialLR, ConstantLR, LinearLR, PolynomialLR -------------------------
// Each compute_lr is PyTorch 1.13's recursive get_lr (from the group's current lr, so other
// schedulers' changes compose), each restart_lr its _get_closed_form_lr at epoch 0, written with
// the same operations in the same order.

MultiStepLR::MultiStepLR(Optimizer& opt, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(opt), milestones_(std::move(milestones)), gamma_(gamma) {
  initial_step();
}

std::vector<double> MultiStepLR::compute_lr() {
  const auto hits = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  std::vector<double> out;
  for (size_t g = 0; g < opt_.num_param_groups(); ++g) {
    double lr = opt_.lr(g);
    out.push_back(hits == 0 ? lr : lr * std::pow(gamma_, static_cast<double>(hits)));
  }
  return out;
}

std::vector<double> MultiStepLR::restart_lr() {
  // base_lr * gamma ** bisect_right(sorted(milestones), 0): the milestones <= 0 count.
  const auto passed =
      std::count_if(milestones_.begin(), milestones_.end(), [](int64_t m) { return m <= 0; });
  std::vector<double> out;
  for (double b : base_lrs_) out.push_back(b * std::pow(gamma_, static_cast<double>(passed)));
  return out;
}

void MultiStepLR::save_fields(Json& j) const {
  j.set("milestones", ints_to_json(milestones_));
}

void MultiStepLR::load_fields(const Json& j) {
  std::vector<int64_t> saved;
  for (const Json& m : j.at("milestones").items()) saved.push_back(m.as_int());
  SL_CHECK(saved == milestones_, "MultiStepLR.load_state_dict: saved with milestones ",
           j.at("milestones").dump(), ", this scheduler has ", ints_to_json(milestones_).dump());
}

ExponentialLR::ExponentialLR(Optimizer& opt, double gamma) : LRScheduler(opt), gamma_(gamma) {
  SL_CHECK(gamma >= 0, "ExponentialLR: gamma must be >= 0, got ", gamma);
  initial_step();
}

std::vector<double> ExponentialLR::compute_lr() {
  std::vector<double> out;
  for (size_t g = 0; g < opt_.num_param_groups(); ++g) {
    out.push_back(last_epoch_ == 0 ? opt_.lr(g) : opt_.lr(g) * gamma_);
  }
  return out;
}

// The closed form at epoch 0: base_lr * gamma ** 0.
std::vector<double> ExponentialLR::restart_lr() {
  return base_lrs_;
}

ConstantLR::ConstantLR(Optimizer& opt, double factor, int64_t total_iters)
    : LRScheduler(opt), factor_(factor), total_iters_(total_iters) {
  SL_CHECK(factor > 0 && factor <= 1, "ConstantLR: factor must be in (0, 1], got ", factor);
  SL_CHECK(total_iters >= 1, "ConstantLR: total_iters must be >= 1, got ", total_iters);
  initial_step();
}

std::vector<double> ConstantLR::compute_lr() {
  std::vector<double> out;
  for (size_t g = 0; g < opt_.num_param_groups(); ++g) {
    double lr = opt_.lr(g);
    if (last_epoch_ == 0) {
      out.push_back(lr * factor_);
    } else if (last_epoch_ != total_iters_) {
      out.push_back(lr);
    } else {
      out.push_back(lr * (1.0 / factor_));
    }
  }
  return out;
}

std::vector<double> ConstantLR::restart_lr() {
  std::vector<double> out;
  for (double b : base_lrs_) out.push_back(b * factor_);
  return out;
}

LinearLR::LinearLR(Optimizer& opt, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(opt), start_(start_factor), end_(end_factor), total_iters_(total_iters) {
  SL_CHECK(start_factor > 0 && start_factor <= 1, "LinearLR: start_factor must be in (0, 1], got ",
           start_factor);
  SL_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR: end_factor must be in [0, 1], got ",
           end_factor);
  SL_CHECK(total_iters >= 1, "LinearLR: total_iters must be >= 1, got ", total_iters);
  initial_step();
}

std::vector<double> LinearLR::compute_lr() {
  std::vector<double> out;
  const auto T = static_cast<double>(total_iters_);
  const auto e = static_cast<double>(last_epoch_);
  for (size_t g = 0; g < opt_.num_param_groups(); ++g) {
    double lr = opt_.lr(g);
    if (last_epoch_ == 0) {
      out.push_back(lr * start_);
    } else if (last_epoch_ > total_iters_) {
      out.push_back(lr);
    } else {
      out.push_back(lr * (1. + (end_ - start_) / (T * start_ + (e - 1) * (end_ - start_))));
    }
  }
  return out;
}

std::vector<double> LinearLR::restart_lr() {
  std::vector<double> out;
  for (double b : base_lrs_) out.push_back(b * start_);
  return out;
}

PolynomialLR::PolynomialLR(Optimizer& opt, int64_t total_iters, double power)
    : LRScheduler(opt), total_iters_(total_iters), power_(power) {
  SL_CHECK(total_iters >= 1, "PolynomialLR: total_iters must be >= 1, got ", total_iters);
  SL_CHECK(power >= 0, "PolynomialLR: power must be >= 0, got ", power);
  initial_step();
}

std::vector<double> PolynomialLR::compute_lr() {
  std::vector<double> out;
  const auto T = static_cast<double>(total_iters_);
  const auto e = static_cast<double>(last_epoch_);
  for (size_t g = 0; g < opt_.num_param_groups(); ++g) {
    double lr = opt_.lr(g);
    if (last_epoch_ == 0 || last_epoch_ > total_iters_) {
      out.push_back(lr);
    } else {
      out.push_back(lr * std::pow((1.0 - e / T) / (1.0 - (e - 1) / T), power_));
    }
  }
  return out;
}

// The closed form at epoch 0: base_lr * (1 - 0 / total_iters) ** power.
std::vector<double> PolynomialLR::restart_lr() {
  return base_lrs_;
}

// ---- CosineAnnealingWarmRestarts --------------------------------------------------------------

CosineAnnealingWarmRestarts::CosineAnnealingWarmRestarts(Optimizer& opt, int64_t T_0,
                                                         int64_t T_mult, double eta_min)
    : LRScheduler(opt), t0_(T_0), t_mult_(T_mult), t_i_(T_0), eta_min_(eta_min) {
  SL_CHECK(T_0 >= 1, "CosineAnnealingWarmRestarts: T_0 must be >= 1, got ", T_0);
  SL_CHECK(T_mult >= 1, "CosineAnnealingWarmRestarts: T_mult must be >= 1, got ", T_mult);
  initial_step();
}

// PyTorch's step(): epoch 0 (the first step, or a restart) starts the first period; every
// later step advances T_cur and, at the end of a period, starts the next, T_mult times longer.
std::vector<double> CosineAnnealingWarmRestarts::compute_lr() {
  if (last_epoch_ == 0) {
    t_i_ = t0_;
    t_cur_ = 0;
  } else if (++t_cur_ >= t_i_) {
    t_cur_ -= t_i_;
    t_i_ *= t_mult_;
  }
  std::vector<double> out;
  for (double b : base_lrs_) {
    out.push_back(
        eta_min_ +
        (b - eta_min_) *
            (1 + std::cos(kPi * static_cast<double>(t_cur_) / static_cast<double>(t_i_))) / 2);
  }
  return out;
}

void CosineAnnealingWarmRestarts::save_fields(Json& j) const {
  j.set("T_0", t0_);
  j.set("T_mult", t_mult_);
  j.set("T_i", t_i_);
  j.set("T_cur", t_cur_);
}

void CosineAnnealingWarmRestarts::load_fields(const Json& j) {
  SL_CHECK(j.at("T_0").as_int() == t0_ && j.at("T_mult").as_int() == t_mult_,
           "CosineAnnealingWarmRestarts.load_state_dict: saved with T_0 = ", j.at("T_0").as_int(),
           ", T_mult = ", j.at("T_mult").as_int(), "; this scheduler has T_0 = ", t0_,
           ", T_mult = ", t_mult_);
  t_i_ = j.at("T_i").as_int();
  t_cur_ = j.at("T_cur").as_int();
}

// ---- SequentialLR ----------------------------------------------------------------------------

SequentialLR::SequentialLR(Optimizer& opt, std::vector<std::unique_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(opt), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  SL_CHECK(!schedulers_.empty(), "SequentialLR: needs at least one scheduler");
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    SL_CHECK(schedulers_[i] != nullptr, "SequentialLR: scheduler ", i, " is null");
    SL_CHECK(&schedulers_[i]->opt_ == &opt, "SequentialLR: scheduler ", i, " (",
             schedulers_[i]->name(), ") drives another optimizer than the one passed in");
  }
  SL_CHECK(milestones_.size() + 1 == schedulers_.size(), "SequentialLR: expected ",
           schedulers_.size() - 1, " milestones for ", schedulers_.size(), " schedulers, got ",
           milestones_.size());
  for (size_t i = 0; i < milestones_.size(); ++i) {
    SL_CHECK(milestones_[i] >= 1 && (i == 0 || milestones_[i] > milestones_[i - 1]),
             "SequentialLR: milestones must be positive and increasing, got ",
             ints_to_json(milestones_).dump());
  }
  // PyTorch: back to the initial lrs, undo every scheduler's first step, redo the first one's.
  for (size_t g = 0; g < opt.num_param_groups(); ++g) opt.set_lr(g, *opt.initial_lr(g));
  for (auto& s : schedulers_) --s->last_epoch_;
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->last_lr();
  last_epoch_ = 0;
  step_count_ = 1;
}

std::vector<double> SequentialLR::compute_lr() {
  const auto idx = static_cast<size_t>(
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin());
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_) {
    s.restart();
  } else {
    s.step();
  }
  return s.last_lr();
}

void SequentialLR::save_fields(Json& j) const {
  j.set("milestones", ints_to_json(milestones_));
  Json subs = Json::array();
  for (const auto& s : schedulers_) subs.push_back(s->state_dict().meta);
  j.set("schedulers", std::move(subs));
}

void SequentialLR::load_fields(const Json& j) {
  std::vector<int64_t> saved;
  for (const Json& m : j.at("milestones").items()) saved.push_back(m.as_int());
  SL_CHECK(saved == milestones_, "SequentialLR.load_state_dict: saved with milestones ",
           j.at("milestones").dump(), ", this scheduler has ", ints_to_json(milestones_).dump());
  const Json& subs = j.at("schedulers");
  SL_CHECK(subs.size() == schedulers_.size(), "SequentialLR.load_state_dict: saved ", subs.size(),
           " schedulers, this one has ", schedulers_.size());
  // Check every kind before loading any, so that a mismatch leaves all of them untouched.
  for (size_t i = 0; i < subs.size(); ++i) {
    const Json* kind = subs[i].find("scheduler");
    SL_CHECK(kind && kind->as_string() == schedulers_[i]->name(),
             "SequentialLR.load_state_dict: scheduler ", i, " was saved as ",
             (kind ? kind->as_string() : std::string("nothing")), ", this one is ",
             schedulers_[i]->name());
  }
  for (size_t i = 0; i < subs.size(); ++i) schedulers_[i]->load_state_dict(Section{{}, subs[i]});
}

// ---- OneCycleLR ------------------------------------------------------------------------------

OneCycleLR::OneCycleLR(Optimizer& opt, std::vector<double> max_lrs, OneCycleOptions o)
    : LRScheduler(opt), o_(o) {
  const size_t n = opt.num_param_groups();
  SL_CHECK(o.total_steps > 0, "OneCycleLR: expected a positive integer total_steps, got ",
           o.total_steps);
  SL_CHECK(o.pct_start >= 0 && o.pct_start <= 1,
           "OneCycleLR: expected a pct_start between 0 and 1, got ", o.pct_start);
  SL_CHECK(max_lrs.size() == 1 || max_lrs.size() == n, "OneCycleLR: expected ", n,
           " values for max_lr, got ", max_lrs.size());
  if (max_lrs.size() == 1) max_lrs.assign(n, max_lrs[0]);
  const double total = static_cast<double>(o.total_steps);
  if (o.three_phase) {
    phases_ = {{o.pct_start * total - 1, 0, 1, 0, 1},
               {2 * o.pct_start * total - 2, 1, 0, 1, 0},
               {total - 1, 0, 2, 0, 0}};
  } else {
    phases_ = {{o.pct_start * total - 1, 0, 1, 0, 1}, {total - 1, 1, 2, 1, 0}};
  }
  // Note [OneCycle empty phases]: compute_lr divides by a phase's width (end - start). A phase
  // that no step falls into is harmless, so only two widths can be reached at zero: the first
  // phase's when it ends at step 0 (step 0 is its only step), and the last one's when some step
  // lies past every earlier end. PyTorch raises ZeroDivisionError there, in the constructor or
  // mid-training; we refuse the options up front instead of producing a NaN or inf lr.
  double before_last = phases_.front().end_step;
  for (size_t i = 1; i + 1 < phases_.size(); ++i)
    before_last = std::max(before_last, phases_[i].end_step);
  const double last_start = phases_[phases_.size() - 2].end_step;
  const bool empty_first = phases_.front().end_step == 0;
  const bool empty_last = phases_.back().end_step == last_start && total > before_last;
  SL_CHECK(!empty_first && !empty_last, "OneCycleLR: pct_start ", o.pct_start, " with total_steps ",
           o.total_steps, (o.three_phase ? " (three_phase)" : ""), " leaves the ",
           (empty_first ? "first" : "last"),
           " phase zero steps wide, so its lr would divide by zero; change pct_start or "
           "total_steps");
  for (size_t g = 0; g < n; ++g) {
    initial_lr_.push_back(max_lrs[g] / o.div_factor);
    opt.set_initial_lr(g, initial_lr_.back());  // overrides an earlier scheduler's, as PyTorch
    max_lr_.push_back(max_lrs[g]);
    min_lr_.push_back(initial_lr_.back() / o.final_div_factor);
    if (o.cycle_momentum) {
      opt.set_momentum(g, o.max_momentum);
      max_m_.push_back(o.max_momentum);
      base_m_.push_back(o.base_momentum);
    }
  }
  base_lrs_ = initial_lr_;
  initial_step();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (o_.cos_anneal) {
    double cos_out = std::cos(kPi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

std::vector<double> OneCycleLR::compute_lr() {
  const int64_t step_num = last_epoch_;
  SL_CHECK(step_num <= o_.total_steps, "OneCycleLR: tried to step ", step_num + 1,
           " times; the specified number of total steps is ", o_.total_steps);
  std::vector<double> out;
  for (size_t g = 0; g < opt_.num_param_groups(); ++g) {
    const double lrs[3] = {initial_lr_[g], max_lr_[g], min_lr_[g]};
    double start_step = 0, lr = 0, m = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& ph = phases_[i];
      if (static_cast<double>(step_num) <= ph.end_step || i == phases_.size() - 1) {
        double pct = (static_cast<double>(step_num) - start_step) / (ph.end_step - start_step);
        lr = anneal(lrs[ph.start_lr], lrs[ph.end_lr], pct);
        if (o_.cycle_momentum) {
          const double ms[2] = {max_m_[g], base_m_[g]};
          m = anneal(ms[ph.start_m], ms[ph.end_m], pct);
        }
        break;
      }
      start_step = ph.end_step;
    }
    out.push_back(lr);
    if (o_.cycle_momentum) opt_.set_momentum(g, m);
  }
  return out;
}

void OneCycleLR::save_fields(Json& j) const {
  j.set("total_steps", o_.total_steps);
  j.set("initial_lr", doubles_to_json(initial_lr_));
  j.set("max_lr", doubles_to_json(max_lr_));
  j.set("min_lr", doubles_to_json(min_lr_));
  j.set("max_momentum", doubles_to_json(max_m_));
  j.set("base_momentum", doubles_to_json(base_m_));
}

void OneCycleLR::load_fields(const Json& j) {
  size_t n = opt_.num_param_groups();
  size_t nm = o_.cycle_momentum ? n : 0;
  SL_CHECK(j.at("total_steps").as_int() == o_.total_steps,
           "OneCycleLR.load_state_dict: saved "
           "for ",
           j.at("total_steps").as_int(), " total steps, this scheduler has ", o_.total_steps);
  auto init = doubles_from_json(j.at("initial_lr"), n, "initial_lr");
  auto mx = doubles_from_json(j.at("max_lr"), n, "max_lr");
  auto mn = doubles_from_json(j.at("min_lr"), n, "min_lr");
  auto mm = doubles_from_json(j.at("max_momentum"), nm, "max_momentum");
  auto bm = doubles_from_json(j.at("base_momentum"), nm, "base_momentum");
  initial_lr_ = init;
  max_lr_ = mx;
  min_lr_ = mn;
  max_m_ = mm;
  base_m_ = bm;
}

// ---- ReduceLROnPlateau -----------------------------------------------------------------------

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& opt, PlateauOptions o)
    : opt_(opt), o_(std::move(o)) {
  SL_CHECK(o_.factor >= 0 && o_.factor < 1, "ReduceLROnPlateau: factor must be in [0, 1), got ",
           o_.factor);
  SL_CHECK(o_.patience >= 0, "ReduceLROnPlateau: patience must be >= 0, got ", o_.patience);
  SL_CHECK(o_.cooldown >= 0, "ReduceLROnPlateau: cooldown must be >= 0, got ", o_.cooldown);
  SL_CHECK(o_.eps >= 0, "ReduceLROnPlateau: eps must be >= 0, got ", o_.eps);
  SL_CHECK(std::isfinite(o_.threshold), "ReduceLROnPlateau: threshold must be finite, got ",
           o_.threshold);
  const size_t n = opt.num_param_groups();
  SL_CHECK(o_.min_lrs.size() == 1 || o_.min_lrs.size() == n, "ReduceLROnPlateau: expected 1 or ", n,
           " min_lrs (one per parameter group), got ", o_.min_lrs.size());
  if (o_.min_lrs.size() == 1) o_.min_lrs.assign(n, o_.min_lrs.front());
  for (double m : o_.min_lrs) {
    SL_CHECK(m >= 0, "ReduceLROnPlateau: min_lrs must be >= 0, got ", m);
  }
  best_ = o_.maximize ? -INFINITY : INFINITY;
  for (size_t g = 0; g < n; ++g) last_lr_.push_back(opt.lr(g));
}

bool ReduceLROnPlateau::is_better(double a) const {
  if (o_.maximize) {
    return o_.relative_threshold ? a > best_ * (o_.threshold + 1) : a > best_ + o_.threshold;
  }
  return o_.relative_threshold ? a < best_ * (1 - o_.threshold) : a < best_ - o_.threshold;
}

bool ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {  // bad epochs in the cooldown do not count
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  bool reduced = false;
  if (num_bad_epochs_ > o_.patience) {
    for (size_t g = 0; g < opt_.num_param_groups(); ++g) {
      const double old_lr = opt_.lr(g);
      const double new_lr = std::max(old_lr * o_.factor, o_.min_lrs[g]);
      if (old_lr - new_lr > o_.eps) {
        opt_.set_lr(g, new_lr);
        reduced = true;
      }
    }
    cooldown_counter_ = o_.cooldown;
    num_bad_epochs_ = 0;
  }
  for (size_t g = 0; g < opt_.num_param_groups(); ++g) last_lr_[g] = opt_.lr(g);
  return reduced;
}

Json ReduceLROnPlateau::options_json() const {
  return Json::object({{"mode", o_.maximize ? "max" : "min"},
                       {"factor", o_.factor},
                       {"patience", o_.patience},
                       {"threshold", o_.threshold},
                       {"threshold_mode", o_.relative_threshold ? "rel" : "abs"},
                       {"cooldown", o_.cooldown},
                       {"min_lrs", doubles_to_json(o_.min_lrs)},
                       {"eps", o_.eps}});
}

Section ReduceLROnPlateau::state_dict() const {
  Section s;
  s.meta = Json::object({{"scheduler", name()},
                         {"last_epoch", last_epoch_},
                         {"best", std::isfinite(best_) ? Json(best_) : Json()},
                         {"num_bad_epochs", num_bad_epochs_},
                         {"cooldown_counter", cooldown_counter_},
                         {"last_lr", doubles_to_json(last_lr_)},
                         {"options", options_json()}});
  return s;
}

void ReduceLROnPlateau::load_state_dict(const Section& s) {
  const Json& m = s.meta;
  SL_CHECK(m.is_object() && m.contains("scheduler"),
           "ReduceLROnPlateau.load_state_dict: the section holds no scheduler state");
  SL_CHECK(m.at("scheduler").as_string() == name(),
           "ReduceLROnPlateau.load_state_dict: saved state is for ", m.at("scheduler").as_string(),
           ", not ReduceLROnPlateau");
  auto last = doubles_from_json(m.at("last_lr"), opt_.num_param_groups(), "last_lr");
  const Json mine = options_json();
  const Json& saved = m.at("options");
  for (const auto& [key, value] : mine.members()) {
    const Json* v = saved.find(key);
    SL_CHECK(v && same_value(*v, value), "ReduceLROnPlateau.load_state_dict: saved with ", key,
             " = ", v ? v->dump() : std::string("(none)"), ", this scheduler has ", value.dump());
  }
  const Json& best = m.at("best");
  const int64_t last_epoch = m.at("last_epoch").as_int();
  const int64_t bad = m.at("num_bad_epochs").as_int();
  const int64_t cooldown = m.at("cooldown_counter").as_int();
  SL_CHECK(last_epoch >= 0 && bad >= 0 && cooldown >= 0,
           "ReduceLROnPlateau.load_state_dict: negative counters (last_epoch ", last_epoch,
           ", num_bad_epochs ", bad, ", cooldown_counter ", cooldown, ")");
  best_ = best.is_null() ? (o_.maximize ? -INFINITY : INFINITY) : best.as_double();
  last_lr_ = std::move(last);
  last_epoch_ = last_epoch;
  num_bad_epochs_ = bad;
  cooldown_counter_ = cooldown;
}

}  // namespace sl::optim
