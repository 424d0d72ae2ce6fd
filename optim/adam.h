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
class AdamBase : public GroupedOptimizer<Options> {
 public:
  void step() override;
  /// The kernel hyperparameters of a group.
  AdamHyper hyper(size_t group) const { return hyper_of(this->options(group)); }
  double momentum(size_t group) const override { return this->options(group).beta1; }
  void set_momentum(size_t group, double m) override { this->options(group).beta1 = m; }
  StateKeys state_keys(size_t group) const override {
    return this->options(group).amsgrad ? state_keys_of({"exp_avg", "exp_avg_sq", "max_exp_avg_sq"})
                                        : state_keys_of({"exp_avg", "exp_avg_sq"});
  }

 protected:
  AdamBase() = default;
  void check_options(const Options& o, const char* op) const override;
  serialize::Json group_to_json(size_t group) const override;
  void load_groups_from_json(const serialize::Json& groups) override;

 private:
  static AdamHyper hyper_of(const Options& o) {
    return AdamHyper{o.lr,           o.beta1,   o.beta2,    o.eps,
                     o.weight_decay, o.amsgrad, o.maximize, kDecoupled};
  }
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
