#include "optim/adamax.h"

#include "autograd/grad_mode.h"

namespace sl::optim {

using serialize::Json;

Adamax::Adamax(const TensorList& params, AdamaxOptions options) {
  add_param_group({params, options});
}

Adamax::Adamax(const std::vector<ParamGroup<AdamaxOptions>>& groups) {
  for (const auto& g : groups) add_param_group(g);
}

void Adamax::check_options(const AdamaxOptions& o, const char* op) const {
  ops::check_adamax_hyper(o.hyper(), op);
}

void Adamax::step() {
  NoGradGuard no_grad;
  check_all_options();
  for_each_with_grad("Adamax.step",
                     [&](size_t g, size_t, const Tensor& p, const Tensor& grad, ParamState& st) {
                       adamax_update(p, grad, st, options_[g].hyper(), options_[g].master_weights);
                     });
}

Json Adamax::group_to_json(size_t group) const {
  const AdamaxOptions& o = options(group);
  return Json::object({{"lr", o.lr},
                       {"betas", Json::array({o.beta1, o.beta2})},
                       {"eps", o.eps},
                       {"weight_decay", o.weight_decay},
                       {"maximize", o.maximize},
                       {"master_weights", o.master_weights}});
}

void Adamax::load_groups_from_json(const Json& groups) {
  std::vector<AdamaxOptions> parsed;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Json& j = groups[g];
    AdamaxOptions o;
    o.lr = j.at("lr").as_double();
    const Json& betas = j.at("betas");
    SL_CHECK(betas.size() == 2, name(), ".load_state_dict: betas must have 2 entries");
    o.beta1 = betas[0].as_double();
    o.beta2 = betas[1].as_double();
    o.eps = j.at("eps").as_double();
    o.weight_decay = j.at("weight_decay").as_double();
    o.maximize = j.at("maximize").as_bool();
    if (const Json* mw = j.find("master_weights")) o.master_weights = mw->as_bool();
    ops::check_adamax_hyper(o.hyper(), "Adamax.load_state_dict");
    parsed.push_back(o);
  }
  options_ = std::move(parsed);
}

}  // namespace sl::optim
