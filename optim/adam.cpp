#include "optim/adam.h"

#include "autograd/grad_mode.h"

namespace sl::optim {

using serialize::Json;

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::add_param_group(const ParamGroup<Options>& group) {
  options_.push_back(group.options);
  try {
    ops::check_adam_hyper(hyper(options_.size() - 1), name());
    add_params(group.params);
  } catch (...) {
    options_.pop_back();
    throw;
  }
}

template <class Options, bool kDecoupled>
Options& AdamBase<Options, kDecoupled>::options(size_t group) {
  SL_CHECK_INDEX(group < options_.size(), name(), ": group ", group, " out of range (",
                 options_.size(), " groups)");
  return options_[group];
}

template <class Options, bool kDecoupled>
const Options& AdamBase<Options, kDecoupled>::options(size_t group) const {
  SL_CHECK_INDEX(group < options_.size(), name(), ": group ", group, " out of range (",
                 options_.size(), " groups)");
  return options_[group];
}

template <class Options, bool kDecoupled>
AdamHyper AdamBase<Options, kDecoupled>::hyper(size_t group) const {
  const Options& o = options(group);
  return AdamHyper{o.lr,           o.beta1,   o.beta2,    o.eps,
                   o.weight_decay, o.amsgrad, o.maximize, kDecoupled};
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::step() {
  NoGradGuard no_grad;
  for (size_t g = 0; g < options_.size(); ++g) ops::check_adam_hyper(hyper(g), name());
  std::string op = std::string(name()) + ".step";
  for_each_with_grad(op.c_str(),
                     [&](size_t g, size_t, const Tensor& p, const Tensor& grad, ParamState& st) {
                       adam_update(p, grad, st, hyper(g), options_[g].master_weights);
                     });
}

template <class Options, bool kDecoupled>
Json AdamBase<Options, kDecoupled>::group_to_json(size_t group) const {
  const Options& o = options(group);
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
    SL_CHECK(betas.size() == 2, name(), ".load_state_dict: betas must have 2 entries");
    o.beta1 = betas[0].as_double();
    o.beta2 = betas[1].as_double();
    o.eps = j.at("eps").as_double();
    o.weight_decay = j.at("weight_decay").as_double();
    o.amsgrad = j.at("amsgrad").as_bool();
    o.maximize = j.at("maximize").as_bool();
    if (const Json* mw = j.find("master_weights")) o.master_weights = mw->as_bool();
    AdamHyper h{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, o.maximize, kDecoupled};
    ops::check_adam_hyper(h, name());
    parsed.push_back(o);
  }
  options_ = std::move(parsed);
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
