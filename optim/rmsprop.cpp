#include "optim/rmsprop.h"

#include "autograd/grad_mode.h"

namespace sl::optim {

using serialize::Json;

RMSprop::RMSprop(const TensorList& params, RMSpropOptions options) {
  add_initial_groups(params, options);
}

RMSprop::RMSprop(const std::vector<ParamGroup<RMSpropOptions>>& groups) {
  add_initial_groups(groups);
}

void RMSprop::check_options(const RMSpropOptions& o, const char* op) const {
  ops::check_rmsprop_hyper(o.hyper(), op);
}

void RMSprop::step() {
  NoGradGuard no_grad;
  check_all_options();
  for_each_with_grad("RMSprop.step",
                     [&](size_t g, size_t, const Tensor& p, const Tensor& grad, ParamState& st) {
                       rmsprop_update(p, grad, st, options_[g].hyper(), options_[g].master_weights);
                     });
}

Json RMSprop::group_to_json(size_t group) const {
  const RMSpropOptions& o = options(group);
  return Json::object({{"lr", o.lr},
                       {"alpha", o.alpha},
                       {"eps", o.eps},
                       {"weight_decay", o.weight_decay},
                       {"momentum", o.momentum},
                       {"centered", o.centered},
                       {"maximize", o.maximize},
                       {"master_weights", o.master_weights}});
}

void RMSprop::load_groups_from_json(const Json& groups) {
  std::vector<RMSpropOptions> parsed;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Json& j = groups[g];
    RMSpropOptions o;
    o.lr = j.at("lr").as_double();
    o.alpha = j.at("alpha").as_double();
    o.eps = j.at("eps").as_double();
    o.weight_decay = j.at("weight_decay").as_double();
    o.momentum = j.at("momentum").as_double();
    o.centered = j.at("centered").as_bool();
    o.maximize = j.at("maximize").as_bool();
    if (const Json* mw = j.find("master_weights")) o.master_weights = mw->as_bool();
    ops::check_rmsprop_hyper(o.hyper(), "RMSprop.load_state_dict");
    parsed.push_back(o);
  }
  options_ = std::move(parsed);
}

}  // namespace sl::optim
