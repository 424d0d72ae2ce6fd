#include "optim/lamb.h"

namespace sl::optim {

Lamb::Lamb(const TensorList& params, LambOptions options) {
  add_param_group({params, options});
}

Lamb::Lamb(const std::vector<ParamGroup<LambOptions>>& groups) {
  for (const auto& g : groups) add_param_group(g);
}

}  // namespace sl::optim
