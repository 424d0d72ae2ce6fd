#include "optim/rmsprop.h"

namespace sl::optim {

RMSprop::RMSprop(const TensorList& params, RMSpropOptions options) {
  add_initial_groups(params, options);
}

RMSprop::RMSprop(const std::vector<ParamGroup<RMSpropOptions>>& groups) {
  add_initial_groups(groups);
}

}  // namespace sl::optim
