#include "optim/nadam.h"

#include "autograd/grad_mode.h"

namespace sl::optim {

using serialize::Json;

NAdam::NAdam(const TensorList& params, NAdamOptions options) {
  add_param_group({params, options});
}

NAdam::NAdam(const std::vector<ParamGroup<NAdamOptions>>& groups) {
  for (const auto& g : groups) add_param_group(g);
}

void NAdam::check_options(const NAdamOptions& o, const char* op) const {
  ops::check_nadam_hyper(o.hyper(), op);
}

void NAdam::step() {
  NoGradGuard no_grad;
  check_all_options();
  for_each_with_grad("NAdam.step",
                     [&](size_t g, size_t, const Tensor& p, const Tensor& grad, ParamState& st) {
                       nadam_update(p, grad, st, options_[g].hyper(), options_[g].master_weights);
                     });
}

Json NAdam::group_to_json(size_t group) const {
  const NAdamOptions& o = options(group);
  return Json::object({{"lr", o.lr},
                       {"betas", Json::array({o.beta1, o.beta2})},
                       {"eps", o.eps},
                       {"weight_decay", o.weight_decay},
                       {"momentum_decay", o.momentum_decay},
                       {"master_weights", o.master_weights}});
}

void NAdam::load_groups_from_json(const Json& groups) {
  std::vector<NAdamOptions> parsed;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Json& j = groups[g];
    NAdamOptions o;
    o.lr = j.at("lr").as_double();
    const Json& betas = j.at("betas");
    SL_CHECK(betas.size() == 2, name(), ".load_state_dict: betas must have 2 entries");
    o.beta1 = betas[0].as_double();
    o.beta2 = betas[1].as_double();
    o.eps = j.at("eps").as_double();
    o.weight_decay = j.at("weight_decay").as_double();
    o.momentum_decay = j.at("momentum_decay").as_double();
    if (const Json* mw = j.find("master_weights")) o.master_weights = mw->as_bool();
    ops::check_nadam_hyper(o.hyper(), "NAdam.load_state_dict");
    parsed.push_back(o);
  }
  options_ = std::move(parsed);
}

}  // namespace sl::optim
