#include "optim/adamax.h"

namespace sl::optim {

Adamax::Adamax(const TensorList& params, AdamaxOptions options) {
  add_initial_groups(params, options);
}

Adamax::Adamax(const std::vector<ParamGroup<AdamaxOptions>>& groups) {
  add_initial_groups(groups);
}

}  // namespace sl::optim
