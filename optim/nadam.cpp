#include "optim/nadam.h"

namespace sl::optim {

NAdam::NAdam(const TensorList& params, NAdamOptions options) {
  add_initial_groups(params, options);
}

NAdam::NAdam(const std::vector<ParamGroup<NAdamOptions>>& groups) {
  add_initial_groups(groups);
}

}  // namespace sl::optim
