#include "optim/adam.h"

#include "autograd/grad_mode.h"

namespace sl::optim {

using serialize::Json;

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::check_options(const Options& o, const char* op) const {
  ops::check_adam_hyper(hyper_of(o), op);
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::step() {
  NoGradGuard no_grad;
  this->check_all_options();
  std::string op = std::string(this->name()) + ".step";
  this->for_each_with_grad(
      op.c_str(), [&](size_t g, size_t, const Tensor& p, const Tensor& grad, ParamState& st) {
        adam_update(p, grad, st, hyper(g), this->options_[g].master_weights);
      });
}

template <class Options, bool kDecoupled>
Json AdamBase<Options, kDecoupled>::group_to_json(size_t group) const {
  const Options& o = this->options(group);
  return Json::object({{"lr", o.lr},
                       {"betas", Json::array({o.beta1, o.beta2})},
                       {"eps", o.eps},
                       {"weight_decay", o.weight_decay},
                       {"amsgrad", o.amsgrad},
                       {"maximize", o.maximize},
                       {"master_weights", o.master_weights}});
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::load_groups_from_json(const Json& groups) {
  std::vector<Options> parsed;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Json& j = groups[g];
    Options o;
    o.lr = j.at("lr").as_double();
    const Json& betas = j.at("betas");
    SL_CHECK(betas.size() == 2, this->name(), ".load_state_dict: betas must have 2 entries");
    o.beta1 = betas[0].as_double();
    o.beta2 = betas[1].as_double();
    o.eps = j.at("eps").as_double();
    o.weight_decay = j.at("weight_decay").as_double();
    o.amsgrad = j.at("amsgrad").as_bool();
    o.maximize = j.at("maximize").as_bool();
    if (const Json* mw = j.find("master_weights")) o.master_weights = mw->as_bool();
    check_options(o, this->name());
    parsed.push_back(o);
  }
  this->options_ = std::move(parsed);
}

template class AdamBase<AdamOptions, false>;
template class AdamBase<AdamWOptions, true>;

Adam::Adam(const TensorList& params, AdamOptions options) {
  add_param_group({params, options});
}
Adam::Adam(const std::vector<ParamGroup<AdamOptions>>& groups) {
  for (const auto& g : groups) add_param_group(g);
}
AdamW::AdamW(const TensorList& params, AdamWOptions options) {
  add_param_group({params, options});
}
AdamW::AdamW(const std::vector<ParamGroup<AdamWOptions>>& groups) {
  for (const auto& g : groups) add_param_group(g);
}

}  // namespace sl::optim
