#include "optim/adagrad.h"

#include "autograd/grad_mode.h"

namespace sl::optim {

using serialize::Json;

Adagrad::Adagrad(const TensorList& params, AdagradOptions options) {
  add_initial_groups(params, options);
}

Adagrad::Adagrad(const std::vector<ParamGroup<AdagradOptions>>& groups) {
  add_initial_groups(groups);
}

void Adagrad::set_momentum(size_t group, double m) {
  options(group);  // range check
  detail::throw_error<ValueError>(name(), ": has no momentum to set (got ", m,
                                  "); turn off the scheduler's cycle_momentum");
}

void Adagrad::check_options(const AdagradOptions& o, const char* op) const {
  ops::check_adagrad_hyper(o.hyper(), op);
}

void Adagrad::step() {
  NoGradGuard no_grad;
  check_all_options();
  for_each_with_grad("Adagrad.step",
                     [&](size_t g, size_t, const Tensor& p, const Tensor& grad, ParamState& st) {
                       adagrad_update(p, grad, st, options_[g].hyper(), options_[g].master_weights);
                     });
}

Json Adagrad::group_to_json(size_t group) const {
  const AdagradOptions& o = options(group);
  return Json::object({{"lr", o.lr},
                       {"lr_decay", o.lr_decay},
                       {"weight_decay", o.weight_decay},
                       {"initial_accumulator_value", o.initial_accumulator_value},
                       {"eps", o.eps},
                       {"maximize", o.maximize},
                       {"master_weights", o.master_weights}});
}

void Adagrad::load_groups_from_json(const Json& groups) {
  std::vector<AdagradOptions> parsed;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Json& j = groups[g];
    AdagradOptions o;
    o.lr = j.at("lr").as_double();
    o.lr_decay = j.at("lr_decay").as_double();
    o.weight_decay = j.at("weight_decay").as_double();
    o.initial_accumulator_value = j.at("initial_accumulator_value").as_double();
    o.eps = j.at("eps").as_double();
    o.maximize = j.at("maximize").as_bool();
    if (const Json* mw = j.find("master_weights")) o.master_weights = mw->as_bool();
    ops::check_adagrad_hyper(o.hyper(), "Adagrad.load_state_dict");
    parsed.push_back(o);
  }
  options_ = std::move(parsed);
}

}  // namespace sl::optim
