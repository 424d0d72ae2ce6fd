#include "optim/radam.h"

#include "autograd/grad_mode.h"

namespace sl::optim {

using serialize::Json;

RAdam::RAdam(const TensorList& params, RAdamOptions options) {
  add_param_group({params, options});
}

RAdam::RAdam(const std::vector<ParamGroup<RAdamOptions>>& groups) {
  for (const auto& g : groups) add_param_group(g);
}

void RAdam::check_options(const RAdamOptions& o, const char* op) const {
  ops::check_radam_hyper(o.hyper(), op);
}

void RAdam::step() {
  NoGradGuard no_grad;
  check_all_options();
  for_each_with_grad("RAdam.step",
                     [&](size_t g, size_t, const Tensor& p, const Tensor& grad, ParamState& st) {
                       radam_update(p, grad, st, options_[g].hyper(), options_[g].master_weights);
                     });
}

Json RAdam::group_to_json(size_t group) const {
  const RAdamOptions& o = options(group);
  return Json::object({{"lr", o.lr},
                       {"betas", Json::array({o.beta1, o.beta2})},
                       {"eps", o.eps},
                       {"weight_decay", o.weight_decay},
                       {"master_weights", o.master_weights}});
}

void RAdam::load_groups_from_json(const Json& groups) {
  std::vector<RAdamOptions> parsed;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Json& j = groups[g];
    RAdamOptions o;
    o.lr = j.at("lr").as_double();
    const Json& betas = j.at("betas");
    SL_CHECK(betas.size() == 2, name(), ".load_state_dict: betas must have 2 entries");
    o.beta1 = betas[0].as_double();
    o.beta2 = betas[1].as_double();
    o.eps = j.at("eps").as_double();
    o.weight_decay = j.at("weight_decay").as_double();
    if (const Json* mw = j.find("master_weights")) o.master_weights = mw->as_bool();
    ops::check_radam_hyper(o.hyper(), "RAdam.load_state_dict");
    parsed.push_back(o);
  }
  options_ = std::move(parsed);
}

}  // namespace sl::optim
