#include "optim/adamax.h"

namespace sl::optim {

Adamax::Adamax(const TensorList& params, AdamaxOptions options) {
  add_param_group({params, options});
}

Adamax::Adamax(const std::vector<ParamGroup<AdamaxOptions>>& groups) {
  for (const auto& g : groups) add_param_group(g);
}

}  // namespace sl::optim
