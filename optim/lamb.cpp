#include "optim/lamb.h"

#include "autograd/grad_mode.h"

namespace sl::optim {

using serialize::Json;

Lamb::Lamb(const TensorList& params, LambOptions options) {
  add_param_group({params, options});
}

Lamb::Lamb(const std::vector<ParamGroup<LambOptions>>& groups) {
  for (const auto& g : groups) add_param_group(g);
}

void Lamb::check_options(const LambOptions& o, const char* op) const {
  ops::check_lamb_hyper(o.hyper(), op);
}

void Lamb::step() {
  NoGradGuard no_grad;
  check_all_options();
  for_each_with_grad("Lamb.step",
                     [&](size_t g, size_t, const Tensor& p, const Tensor& grad, ParamState& st) {
                       lamb_update(p, grad, st, options_[g].hyper(), options_[g].master_weights);
                     });
}

Json Lamb::group_to_json(size_t group) const {
  const LambOptions& o = options(group);
  return Json::object({{"lr", o.lr},
                       {"betas", Json::array({o.beta1, o.beta2})},
                       {"eps", o.eps},
                       {"weight_decay", o.weight_decay},
                       {"bias_correction", o.bias_correction},
                       {"master_weights", o.master_weights}});
}

void Lamb::load_groups_from_json(const Json& groups) {
  std::vector<LambOptions> parsed;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Json& j = groups[g];
    LambOptions o;
    o.lr = j.at("lr").as_double();
    const Json& betas = j.at("betas");
    SL_CHECK(betas.size() == 2, name(), ".load_state_dict: betas must have 2 entries, got ",
             betas.size());
    o.beta1 = betas[0].as_double();
    o.beta2 = betas[1].as_double();
    o.eps = j.at("eps").as_double();
    o.weight_decay = j.at("weight_decay").as_double();
    o.bias_correction = j.at("bias_correction").as_bool();
    if (const Json* mw = j.find("master_weights")) o.master_weights = mw->as_bool();
    ops::check_lamb_hyper(o.hyper(), name());
    parsed.push_back(o);
  }
  options_ = std::move(parsed);
}

}  // namespace sl::optim
