#include "optim/radam.h"

namespace sl::optim {

RAdam::RAdam(const TensorList& params, RAdamOptions options) {
  add_initial_groups(params, options);
}

RAdam::RAdam(const std::vector<ParamGroup<RAdamOptions>>& groups) {
  add_initial_groups(groups);
}

}  // namespace sl::optim
