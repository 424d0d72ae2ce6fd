#include "optim/lamb.h"

namespace sl::optim {

Lamb::Lamb(const TensorList& params, LambOptions options) {
  add_initial_groups(params, options);
}

Lamb::Lamb(const std::vector<ParamGroup<LambOptions>>& groups) {
  add_initial_groups(groups);
}

}  // namespace sl::optim
