#include "optim/nadam.h"

namespace sl::optim {

NAdam::NAdam(const TensorList& params, NAdamOptions options) {
  add_param_group({params, options});
}

NAdam::NAdam(const std::vector<ParamGroup<NAdamOptions>>& groups) {
  for (const auto& g : groups) add_param_group(g);
}

}  // namespace sl::optim
