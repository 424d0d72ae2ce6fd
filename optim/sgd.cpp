#include "optim/sgd.h"

#include "autograd/grad_mode.h"

namespace sl::optim {

using serialize::Json;

SGD::SGD(const TensorList& params, SGDOptions options) {
  add_initial_groups(params, options);
}

SGD::SGD(const std::vector<ParamGroup<SGDOptions>>& groups) {
  add_initial_groups(groups);
}

void SGD::check_options(const SGDOptions& o, const char* op) const {
  ops::check_sgd_hyper(o.hyper(), op);
}

void SGD::step() {
  NoGradGuard no_grad;
  check_all_options();
  for_each_with_grad("SGD.step",
                     [&](size_t g, size_t, const Tensor& p, const Tensor& grad, ParamState& st) {
                       sgd_update(p, grad, st, options_[g].hyper(), options_[g].master_weights);
                     });
}

Json SGD::group_to_json(size_t group) const {
  const SGDOptions& o = options(group);
  return Json::object({{"lr", o.lr},
                       {"momentum", o.momentum},
                       {"dampening", o.dampening},
                       {"weight_decay", o.weight_decay},
                       {"nesterov", o.nesterov},
                       {"maximize", o.maximize},
                       {"master_weights", o.master_weights}});
}

void SGD::load_groups_from_json(const Json& groups) {
  std::vector<SGDOptions> parsed;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Json& j = groups[g];
    SGDOptions o;
    o.lr = j.at("lr").as_double();
    o.momentum = j.at("momentum").as_double();
    o.dampening = j.at("dampening").as_double();
    o.weight_decay = j.at("weight_decay").as_double();
    o.nesterov = j.at("nesterov").as_bool();
    o.maximize = j.at("maximize").as_bool();
    if (const Json* mw = j.find("master_weights")) o.master_weights = mw->as_bool();
    ops::check_sgd_hyper(o.hyper(), "SGD.load_state_dict");
    parsed.push_back(o);
  }
  options_ = std::move(parsed);
}

}  // namespace sl::optim
