// The trainer's optimizer flags (supervised.h): --optimizer adamw | lamb | sgd | rmsprop | adagrad
// | adamax | nadam | radam, --momentum (sgd, rmsprop), --rmsprop-alpha and --rmsprop-centered
// (rmsprop), --adagrad-lr-decay (adagrad): read, checked, turned into the loop's optimizer with its
// two weight-decay groups, and recorded in the run's configuration (Note [Resume configuration] in
// resume_check.h) so that a checkpoint resumes only under the same ones.
#pragma once

#include <memory>
#include <string>

#include "core/tensor.h"
#include "nn/serialize/json.h"
#include "optim/optimizer.h"
#include "registry.h"

namespace sl::train {

/// The optimizer flags' values (PyTorch 1.13's defaults where not given).
struct OptimizerFlags {
  std::string name = "adamw";  ///< --optimizer, as given
  /// Whether the optimizer takes --momentum (sgd, rmsprop).
  bool has_momentum = false;
  /// --momentum: 0.9 for sgd (torchvision's recipe), 0 for rmsprop (torch.optim.RMSprop's).
  double momentum = 0.9;
  double rmsprop_alpha = 0.99;    ///< --rmsprop-alpha (torch.optim.RMSprop's alpha)
  bool rmsprop_centered = false;  ///< --rmsprop-centered (torch.optim.RMSprop's centered)
  double adagrad_lr_decay = 0.0;  ///< --adagrad-lr-decay (torch.optim.Adagrad's lr_decay)
};

/// Reads the flags of optimizer_flags() from `opt` (so they count as read for check_all_read).
/// Throws ValueError naming the flag for a malformed or negative number, or a --rmsprop-centered
/// other than 0 or 1.
OptimizerFlags read_optimizer_flags(const Options& opt);

/// Throws ValueError "<job>: ..." for an unknown --optimizer, a --momentum outside [0, 1), and a
/// flag given for another optimizer than its own (--momentum but with sgd and rmsprop,
/// --rmsprop-alpha and --rmsprop-centered but with rmsprop, --adagrad-lr-decay but with adagrad),
/// naming the flag, its value and the optimizer.
void check_optimizer_flags(const std::string& job, const Options& opt, const OptimizerFlags& f);

/// The optimizer `f` names over two groups: `decay` with `weight_decay`, `no_decay` without
/// (optim::split_no_decay's), each at `lr`, with float32 master weights when `master` (16-bit
/// parameters). AdamW and Lamb decay decoupled from the gradient; SGD, RMSprop, Adagrad, Adamax,
/// NAdam and RAdam add it to the gradient (L2), as PyTorch 1.13's do. The rest are PyTorch's
/// defaults. Throws ValueError from the optimizer's constructor for values its checks refuse.
std::unique_ptr<optim::Optimizer> make_optimizer(const OptimizerFlags& f, double lr,
                                                 double weight_decay, const TensorList& decay,
                                                 const TensorList& no_decay, bool master);

/// Adds to a run's configuration what a checkpoint's optimizer state depends on: "optimizer" (its
/// name, e.g. "RMSprop"; none for AdamW, the default, so older checkpoints still resume),
/// "momentum" (sgd, rmsprop), and "rmsprop_alpha", "rmsprop_centered" and "adagrad_lr_decay" when
/// not their defaults (so checkpoints written before those flags existed still resume).
void record_optimizer_config(const OptimizerFlags& f, const optim::Optimizer& optimizer,
                             serialize::Json& config);

/// What the run's "model:" line prints after the lr: " momentum 0.9" for sgd and rmsprop, then
/// " alpha A", " centered" and " lr_decay D" where not their defaults; "" otherwise.
std::string optimizer_settings_text(const OptimizerFlags& f);

/// The flags read_optimizer_flags reads, for --help (registry.h FlagDoc).
const FlagDocs& optimizer_flags();

}  // namespace sl::train
