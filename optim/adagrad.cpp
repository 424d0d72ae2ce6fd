#include "optim/adagrad.h"

namespace sl::optim {

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

}  // namespace sl::optim
