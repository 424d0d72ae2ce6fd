// The trainer's optimizer flags (see optimizer_flags.h).
#include "optimizer_flags.h"

#include <cstdio>
#include <vector>

#include "core/error.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/adamax.h"
#include "optim/lamb.h"
#include "optim/nadam.h"
#include "optim/radam.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"

namespace sl::train {
namespace {

constexpr double kRmspropAlpha = 0.99;  // torch.optim.RMSprop's default

/// `Opt` over {decay, `o` with weight_decay}, {no_decay, `o` without}.
template <class Opt, class O>
std::unique_ptr<optim::Optimizer> two_groups(const TensorList& decay, const TensorList& no_decay,
                                             O o, double weight_decay) {
  O with = o, without = o;
  with.weight_decay = weight_decay;
  without.weight_decay = 0.0;
  return std::make_unique<Opt>(
      std::vector<optim::ParamGroup<O>>{{decay, with}, {no_decay, without}});
}

}  // namespace

OptimizerFlags read_optimizer_flags(const Options& opt) {
  OptimizerFlags f;
  f.name = opt.get_string("optimizer", "adamw");
  f.has_momentum = f.name == "sgd" || f.name == "rmsprop";
  // torch.optim.RMSprop's default is no momentum; torchvision's SGD recipe's is 0.9
  f.momentum = opt.get_double("momentum", f.name == "rmsprop" ? 0.0 : 0.9, 0.0);
  // PyTorch's constructors' ranges: alpha >= 0, lr_decay >= 0 (each also finite)
  f.rmsprop_alpha = opt.get_double("rmsprop-alpha", kRmspropAlpha, 0.0);
  f.rmsprop_centered = opt.get_bool("rmsprop-centered", false);
  f.adagrad_lr_decay = opt.get_double("adagrad-lr-decay", 0.0, 0.0);
  return f;
}

void check_optimizer_flags(const std::string& job, const Options& opt, const OptimizerFlags& f) {
  const std::string& o = f.name;
  SL_CHECK(o == "adamw" || o == "lamb" || o == "sgd" || o == "rmsprop" || o == "adagrad" ||
               o == "adamax" || o == "nadam" || o == "radam",
           job,
           ": --optimizer must be adamw, lamb, sgd, rmsprop, adagrad, adamax, nadam or radam, got "
           "'",
           o, "'");
  if (opt.extra.count("momentum") > 0) {
    SL_CHECK(f.has_momentum, job, ": --momentum ", opt.extra.at("momentum"),
             " applies to --optimizer sgd and rmsprop only, got --optimizer ", o,
             o == "adagrad" ? " (which has no momentum)"
                            : " (whose moments have their own fixed betas)");
  }
  // A hyperparameter of another optimizer would be ignored, silently: refused.
  for (const auto& [flag, owner] : {std::pair<const char*, const char*>{"rmsprop-alpha", "rmsprop"},
                                    {"rmsprop-centered", "rmsprop"},
                                    {"adagrad-lr-decay", "adagrad"}}) {
    SL_CHECK(opt.extra.count(flag) == 0 || o == owner, job, ": --", flag, " ",
             opt.extra.count(flag) > 0 ? opt.extra.at(flag) : "", " applies to --optimizer ", owner,
             " only, got --optimizer ", o, " (which has no such hyperparameter)");
  }
  // 1 would sum every gradient ever seen into the step, never forgetting one
  SL_CHECK(f.momentum < 1, job, ": --momentum must lie in [0, 1), got ", f.momentum);
}

std::unique_ptr<optim::Optimizer> make_optimizer(const OptimizerFlags& f, double lr,
                                                 double weight_decay, const TensorList& decay,
                                                 const TensorList& no_decay, bool master) {
  if (f.name == "sgd") {
    // torch.optim.SGD's: the decay is L2, added to the gradient before the momentum
    return two_groups<optim::SGD>(
        decay, no_decay,
        optim::SGDOptions{.lr = lr, .momentum = f.momentum, .master_weights = master},
        weight_decay);
  }
  if (f.name == "rmsprop") {
    // torch.optim.RMSprop's (eps 1e-8): L2 decay, as SGD's
    return two_groups<optim::RMSprop>(decay, no_decay,
                                      optim::RMSpropOptions{.lr = lr,
                                                            .alpha = f.rmsprop_alpha,
                                                            .momentum = f.momentum,
                                                            .centered = f.rmsprop_centered,
                                                            .master_weights = master},
                                      weight_decay);
  }
  if (f.name == "adagrad") {
    // torch.optim.Adagrad's (eps 1e-10, initial accumulator 0): L2 decay; its lr_decay divides
    // the scheduled lr by 1 + (step - 1) lr_decay
    return two_groups<optim::Adagrad>(
        decay, no_decay,
        optim::AdagradOptions{.lr = lr, .lr_decay = f.adagrad_lr_decay, .master_weights = master},
        weight_decay);
  }
  // torch.optim.Adamax, NAdam and RAdam's (betas 0.9, 0.999, eps 1e-8; NAdam's momentum_decay
  // 4e-3): in PyTorch 1.13 their decay is L2, added to the gradient
  if (f.name == "adamax") {
    return two_groups<optim::Adamax>(
        decay, no_decay, optim::AdamaxOptions{.lr = lr, .master_weights = master}, weight_decay);
  }
  if (f.name == "nadam") {
    return two_groups<optim::NAdam>(
        decay, no_decay, optim::NAdamOptions{.lr = lr, .master_weights = master}, weight_decay);
  }
  if (f.name == "radam") {
    return two_groups<optim::RAdam>(
        decay, no_decay, optim::RAdamOptions{.lr = lr, .master_weights = master}, weight_decay);
  }
  if (f.name == "lamb") {
    return two_groups<optim::Lamb>(
        decay, no_decay, optim::LambOptions{.lr = lr, .master_weights = master}, weight_decay);
  }
  return two_groups<optim::AdamW>(
      decay, no_decay, optim::AdamWOptions{.lr = lr, .master_weights = master}, weight_decay);
}

void record_optimizer_config(const OptimizerFlags& f, const optim::Optimizer& optimizer,
                             serialize::Json& config) {
  // Its state does not load into another optimizer's. AdamW, the default, adds no key, so that
  // checkpoints written before --optimizer existed still resume.
  if (f.name != "adamw") config.set("optimizer", optimizer.name());
  // a momentum buffer means another thing under another momentum
  if (f.has_momentum) config.set("momentum", f.momentum);
  // square_avg (and grad_avg) are averages under alpha; Adagrad's steps count in its lr
  if (f.rmsprop_alpha != kRmspropAlpha) config.set("rmsprop_alpha", f.rmsprop_alpha);
  if (f.rmsprop_centered) config.set("rmsprop_centered", 1LL);
  if (f.adagrad_lr_decay != 0.0) config.set("adagrad_lr_decay", f.adagrad_lr_decay);
}

std::string optimizer_settings_text(const OptimizerFlags& f) {
  char text[160] = "";
  if (f.has_momentum) {
    std::snprintf(text, sizeof text, " momentum %g", f.momentum);
  }
  std::string out = text;
  if (f.rmsprop_alpha != kRmspropAlpha) {
    std::snprintf(text, sizeof text, " alpha %g", f.rmsprop_alpha);
    out += text;
  }
  if (f.rmsprop_centered) out += " centered";
  if (f.adagrad_lr_decay != 0.0) {
    std::snprintf(text, sizeof text, " lr_decay %g", f.adagrad_lr_decay);
    out += text;
  }
  return out;
}

const FlagDocs& optimizer_flags() {
  static const FlagDocs flags = {
      {"optimizer", "adamw",
       "adamw, lamb (LAMB: per-tensor trust ratios), sgd (with --momentum), rmsprop (with "
       "--momentum), adagrad, adamax, nadam or radam; same --lr, groups"},
      {"momentum", "(0.9 for sgd, 0 for rmsprop)",
       "--optimizer sgd and rmsprop: momentum in [0, 1) (0: no momentum buffer)"},
      {"rmsprop-alpha", "0.99",
       "--optimizer rmsprop: smoothing constant of the squared-gradient average, >= 0"},
      {"rmsprop-centered", "0",
       "--optimizer rmsprop: 1 divides by the gradient's variance estimate (centered RMSprop)"},
      {"adagrad-lr-decay", "0",
       "--optimizer adagrad: lr / (1 + (step - 1) D), on top of --lr-schedule; >= 0"},
  };
  return flags;
}

}  // namespace sl::train
