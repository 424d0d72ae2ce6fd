// Adam and AdamW (betas, eps, weight_decay, amsgrad), matching torch.optim.Adam / AdamW
// (PyTorch 1.13, foreach=False) to f32 rounding. Adam adds weight_decay * param to the gradient
// (L2 penalty); AdamW multiplies the parameter by 1 - lr * weight_decay first (decoupled decay).
#pragma once

#include "optim/optimizer.h"

namespace sl::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
  /// Keep an fp32 master copy of f16/bf16 parameters (and fp32 moments) and update that.
  bool master_weights = false;
};

/// AdamOptions with AdamW's default weight decay (0.01).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
  bool master_weights = false;
};

/// The shared implementation; use Adam or AdamW.
template <class Options, bool kDecoupled>
class AdamBase : public Optimizer {
 public:
  void add_param_group(const ParamGroup<Options>& group);
  void step() override;
  Options& options(size_t group);
  const Options& options(size_t group) const;
  /// The kernel hyperparameters of a group.
  AdamHyper hyper(size_t group) const;
  double lr(size_t group) const override { return options(group).lr; }
  void set_lr(size_t group, double lr) override { options(group).lr = lr; }
  double momentum(size_t group) const override { return options(group).beta1; }
  void set_momentum(size_t group, double m) override { options(group).beta1 = m; }
  bool master_weights(size_t group) const override { return options(group).master_weights; }
  int state_tensors(size_t group) const override { return options(group).amsgrad ? 3 : 2; }

 protected:
  AdamBase() = default;
  serialize::Json group_to_json(size_t group) const override;
  void load_groups_from_json(const serialize::Json& groups) override;

 private:
  std::vector<Options> options_;
};

class Adam : public AdamBase<AdamOptions, false> {
 public:
  /// Throws ValueError for invalid hyperparameters (betas outside [0, 1), negative lr, ...).
  explicit Adam(const TensorList& params, AdamOptions options = {});
  explicit Adam(const std::vector<ParamGroup<AdamOptions>>& groups);
  const char* name() const override { return "Adam"; }
};

class AdamW : public AdamBase<AdamWOptions, true> {
 public:
  explicit AdamW(const TensorList& params, AdamWOptions options = {});
  explicit AdamW(const std::vector<ParamGroup<AdamWOptions>>& groups);
  const char* name() const override { return "AdamW"; }
};

extern template class AdamBase<AdamOptions, false>;
extern template class AdamBase<AdamWOptions, true>;

}  // namespace sl::optim
