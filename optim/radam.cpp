#include "optim/radam.h"

namespace sl::optim {

RAdam::RAdam(const TensorList& params, RAdamOptions options) {
  add_param_group({params, options});
}

RAdam::RAdam(const std::vector<ParamGroup<RAdamOptions>>& groups) {
  for (const auto& g : groups) add_param_group(g);
}

}  // namespace sl::optim
