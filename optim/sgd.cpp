#include "optim/sgd.h"

namespace sl::optim {

SgdHyper SGDOptions::hyper() const {
  SL_CHECK(lr.has_value(),
           "SGD: lr must be given (torch.optim.SGD's lr is required; there is no default)");
  return {*lr, momentum, dampening, weight_decay, nesterov, maximize};
}

SGD::SGD(const TensorList& params, SGDOptions options) {
  add_initial_groups(params, options);
}

SGD::SGD(const std::vector<ParamGroup<SGDOptions>>& groups) {
  add_initial_groups(groups);
}

}  // namespace sl::optim
