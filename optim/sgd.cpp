#include "optim/sgd.h"

namespace sl::optim {

SGD::SGD(const TensorList& params, SGDOptions options) {
  add_initial_groups(params, options);
}

SGD::SGD(const std::vector<ParamGroup<SGDOptions>>& groups) {
  add_initial_groups(groups);
}

}  // namespace sl::optim
