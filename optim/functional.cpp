#include "optim/functional.h"

#include "autograd/grad_mode.h"
#include "core/ops/copy.h"

namespace sl::optim {
namespace {

/// Runs update(target, grad) on the tensor that holds the parameter's value in full precision:
/// the param itself, its fp32 master copy, or a contiguous copy written back afterwards.
template <class Update>
void with_target(const Tensor& param, const Tensor& grad_in, ParamState& st, bool master_weights,
                 const char* op, const Update& update) {
  ops::check_defined(op, param, "param");
  ops::check_defined(op, grad_in, "grad");
  SL_CHECK_SHAPE(grad_in.numel() == param.numel(), op, ": grad of shape ",
                 shape_str(grad_in.sizes()), " does not match param of shape ",
                 shape_str(param.sizes()));
  NoGradGuard no_grad;
  Tensor grad = ops::contiguous(grad_in);
  if (master_weights && is_low_precision(param.dtype())) {
    if (!st.master.defined()) st.master = ops::cast(ops::contiguous(param), DType::f32, true);
    SL_CHECK_SHAPE(st.master.numel() == param.numel(), op, ": master copy has ", st.master.numel(),
                   " elements but param has ", param.numel());
    update(st.master, grad);
    ops::copy_(param, st.master.view_as(param));
    param.bump_version();
    return;
  }
  if (param.is_contiguous()) {
    update(param, grad);
    return;
  }
  Tensor tmp = ops::contiguous(param, true);
  update(tmp, grad);
  ops::copy_(param, tmp);
  param.bump_version();
}

Tensor zeros_for(const Tensor& target) {
  Tensor z = ops::empty(target.sizes(), target.dtype(), target.device());
  ops::fill_(z, 0);
  return z;
}

}  // namespace

StateKeys state_keys_of(std::initializer_list<std::string_view> names) {
  StateKeys keys;
  for (std::string_view name : names) {
    size_t k = 0;
    while (k < ParamState::kNumTensors && ParamState::kKeys[k] != name) ++k;
    SL_CHECK(k < ParamState::kNumTensors, "state_keys_of: no optimizer state is named '", name,
             "'");
    keys.set(k);
  }
  return keys;
}

void sgd_update(const Tensor& param, const Tensor& grad, ParamState& st, const SgdHyper& h,
                bool master_weights) {
  with_target(param, grad, st, master_weights, "sgd_step", [&](const Tensor& p, const Tensor& g) {
    bool init = false;
    if (h.momentum != 0.0 && !st.momentum_buffer.defined()) {
      st.momentum_buffer = zeros_for(p);
      init = true;
    }
    try {
      ops::sgd_step(p, g, st.momentum_buffer, h, init);
    } catch (...) {
      if (init) st.momentum_buffer = Tensor();  // the next step must initialise it again
      throw;
    }
    ++st.step;
  });
}

void adam_update(const Tensor& param, const Tensor& grad, ParamState& st, const AdamHyper& h,
                 bool master_weights) {
  with_target(param, grad, st, master_weights, "adam_step", [&](const Tensor& p, const Tensor& g) {
    if (!st.exp_avg.defined()) st.exp_avg = zeros_for(p);
    if (!st.exp_avg_sq.defined()) st.exp_avg_sq = zeros_for(p);
    if (h.amsgrad && !st.max_exp_avg_sq.defined()) st.max_exp_avg_sq = zeros_for(p);
    ops::adam_step(p, g, st.exp_avg, st.exp_avg_sq, st.max_exp_avg_sq, st.step + 1, h);
    ++st.step;
  });
}

void rmsprop_update(const Tensor& param, const Tensor& grad, ParamState& st, const RmspropHyper& h,
                    bool master_weights) {
  with_target(param, grad, st, master_weights, "rmsprop_step",
              [&](const Tensor& p, const Tensor& g) {
                if (!st.square_avg.defined()) st.square_avg = zeros_for(p);
                if (h.centered && !st.grad_avg.defined()) st.grad_avg = zeros_for(p);
                if (h.momentum > 0.0 && !st.momentum_buffer.defined()) {
                  st.momentum_buffer = zeros_for(p);
                }
                ops::rmsprop_step(p, g, st.square_avg, st.grad_avg, st.momentum_buffer, h);
                ++st.step;
              });
}

void adagrad_update(const Tensor& param, const Tensor& grad, ParamState& st, const AdagradHyper& h,
                    bool master_weights) {
  with_target(param, grad, st, master_weights, "adagrad_step",
              [&](const Tensor& p, const Tensor& g) {
                if (!st.sum.defined()) {
                  st.sum = ops::empty(p.sizes(), p.dtype(), p.device());
                  ops::fill_(st.sum, h.initial_accumulator_value);
                }
                ops::adagrad_step(p, g, st.sum, st.step + 1, h);
                ++st.step;
              });
}

void adamax_update(const Tensor& param, const Tensor& grad, ParamState& st, const AdamaxHyper& h,
                   bool master_weights) {
  with_target(param, grad, st, master_weights, "adamax_step",
              [&](const Tensor& p, const Tensor& g) {
                if (!st.exp_avg.defined()) st.exp_avg = zeros_for(p);
                if (!st.exp_inf.defined()) st.exp_inf = zeros_for(p);
                ops::adamax_step(p, g, st.exp_avg, st.exp_inf, st.step + 1, h);
                ++st.step;
              });
}

void nadam_update(const Tensor& param, const Tensor& grad, ParamState& st, const NadamHyper& h,
                  bool master_weights) {
  with_target(param, grad, st, master_weights, "nadam_step", [&](const Tensor& p, const Tensor& g) {
    SL_CHECK(st.mu_product || st.step == 0, "nadam_step: the state has taken ", st.step,
             " steps but holds no mu_product");
    if (!st.exp_avg.defined()) st.exp_avg = zeros_for(p);
    if (!st.exp_avg_sq.defined()) st.exp_avg_sq = zeros_for(p);
    const double mu_product = nadam_mu_product(h, st.step + 1, st.mu_product.value_or(1.0));
    ops::nadam_step(p, g, st.exp_avg, st.exp_avg_sq, st.step + 1, mu_product, h);
    st.mu_product = mu_product;
    ++st.step;
  });
}

void radam_update(const Tensor& param, const Tensor& grad, ParamState& st, const RadamHyper& h,
                  bool master_weights) {
  with_target(param, grad, st, master_weights, "radam_step", [&](const Tensor& p, const Tensor& g) {
    if (!st.exp_avg.defined()) st.exp_avg = zeros_for(p);
    if (!st.exp_avg_sq.defined()) st.exp_avg_sq = zeros_for(p);
    ops::radam_step(p, g, st.exp_avg, st.exp_avg_sq, st.step + 1, h);
    ++st.step;
  });
}

void lamb_update(const Tensor& param, const Tensor& grad, ParamState& st, const LambHyper& h,
                 bool master_weights) {
  with_target(param, grad, st, master_weights, "lamb_step", [&](const Tensor& p, const Tensor& g) {
    if (!st.exp_avg.defined()) st.exp_avg = zeros_for(p);
    if (!st.exp_avg_sq.defined()) st.exp_avg_sq = zeros_for(p);
    // one segment: the whole parameter (Note [LAMB over flat spans])
    const std::vector<int64_t> bounds{0, p.numel()}, rows{0};
    Tensor update = ops::empty(p.sizes(), p.dtype(), p.device());
    Tensor sums = ops::empty({2}, DType::f64, p.device());
    ops::lamb_moments(p, g, st.exp_avg, st.exp_avg_sq, update, bounds, rows, sums, st.step + 1, h);
    ops::lamb_apply(p, update, bounds, rows, sums, h.lr);
    ++st.step;
  });
}

}  // namespace sl::optim
