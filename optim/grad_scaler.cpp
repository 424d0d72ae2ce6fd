#include "optim/grad_scaler.h"

#include <cmath>
#include <map>

#include "autograd/grad_mode.h"
#include "core/ops/copy.h"
#include "core/ops/optim.h"

namespace sl::optim {

using serialize::Json;

namespace {
void check_options(const GradScalerOptions& o) {
  SL_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0,
           "GradScaler: init_scale must be a "
           "positive finite number, got ",
           o.init_scale);
  SL_CHECK(o.growth_factor > 1.0 && std::isfinite(o.growth_factor),
           "GradScaler: growth_factor should be > 1, got ", o.growth_factor);
  SL_CHECK(o.backoff_factor > 0.0 && o.backoff_factor < 1.0,
           "GradScaler: backoff_factor should be in (0, 1), got ", o.backoff_factor);
  SL_CHECK(o.growth_interval > 0, "GradScaler: growth_interval should be > 0, got ",
           o.growth_interval);
}
}  // namespace

GradScaler::GradScaler(GradScalerOptions o) : o_(o), scale_(o.init_scale) {
  check_options(o);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!o_.enabled) return loss;
  return loss * scale_;
}

void GradScaler::unscale_(Optimizer& opt) {
  if (!o_.enabled) return;
  PerOptimizer& st = per_opt_[&opt];
  SL_CHECK(!st.unscaled,
           "GradScaler.unscale_: unscale_() has already been called on this "
           "optimizer since the last update()");
  NoGradGuard no_grad;
  // PyTorch: inv_scale = scale.double().reciprocal().float()
  const double inv_scale = static_cast<double>(static_cast<float>(1.0 / scale_));
  // one flag per device: kernels set it without a host sync
  std::map<std::pair<int, int>, Tensor> flags;
  for (size_t g = 0; g < opt.num_param_groups(); ++g) {
    for (const auto& p : opt.params(g)) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      Device d = grad.device();
      auto key = std::make_pair(static_cast<int>(d.kind), static_cast<int>(d.index));
      auto it = flags.find(key);
      if (it == flags.end()) {
        Tensor f = ops::empty({1}, DType::f32, d);
        ops::fill_(f, 0);
        it = flags.emplace(key, f).first;
      }
      if (grad.is_contiguous()) {
        ops::unscale_check_(grad, it->second, inv_scale);
      } else {
        Tensor tmp = ops::contiguous(grad, true);
        ops::unscale_check_(tmp, it->second, inv_scale);
        ops::copy_(grad, tmp);
      }
    }
  }
  Tensor found = ops::empty({1}, DType::f32, kCPU);
  ops::fill_(found, 0);
  float any = 0.0f;
  for (const auto& [k, f] : flags) any = std::max(any, ops::to_device(f, kCPU).item<float>());
  found.data_ptr<float>()[0] = any;
  if (sync_) sync_(found);
  st.found_inf = found.item<float>() != 0.0f;
  st.unscaled = true;
}

bool GradScaler::step(Optimizer& opt) {
  if (!o_.enabled) {
    opt.step();
    return true;
  }
  if (!per_opt_[&opt].unscaled) unscale_(opt);
  if (per_opt_[&opt].found_inf) return false;
  opt.step();
  return true;
}

bool GradScaler::found_inf() const {
  for (const auto& [k, v] : per_opt_) {
    if (v.found_inf) return true;
  }
  return false;
}

void GradScaler::update() {
  if (!o_.enabled) return;
  if (found_inf()) {
    scale_ *= o_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == o_.growth_interval) {
    // As PyTorch's _amp_update_scale_: a grown scale past float32's range is not taken (an inf
    // scale would make every later step overflow and be skipped for good); the count restarts.
    const float grown = static_cast<float>(scale_ * o_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
  // PyTorch keeps the scale as a float32 tensor
  scale_ = static_cast<double>(static_cast<float>(scale_));
  per_opt_.clear();
}

serialize::Section GradScaler::state_dict() const {
  serialize::Section s;
  s.meta = Json::object({{"scale", scale_},
                         {"growth_tracker", growth_tracker_},
                         {"growth_factor", o_.growth_factor},
                         {"backoff_factor", o_.backoff_factor},
                         {"growth_interval", o_.growth_interval}});
  return s;
}

void GradScaler::load_state_dict(const serialize::Section& s) {
  GradScalerOptions o = o_;
  o.init_scale = s.meta.at("scale").as_double();
  o.growth_factor = s.meta.at("growth_factor").as_double();
  o.backoff_factor = s.meta.at("backoff_factor").as_double();
  o.growth_interval = s.meta.at("growth_interval").as_int();
  int64_t tracker = s.meta.at("growth_tracker").as_int();
  check_options(o);
  SL_CHECK(tracker >= 0, "GradScaler.load_state_dict: negative growth_tracker ", tracker);
  o_ = o;
  scale_ = o.init_scale;
  growth_tracker_ = tracker;
  per_opt_.clear();
}

}  // namespace sl::optim
