#include "optim/adam.h"

namespace sl::optim {

Adam::Adam(const TensorList& params, AdamOptions options) {
  add_initial_groups(params, options);
}
Adam::Adam(const std::vector<ParamGroup<AdamOptions>>& groups) {
  add_initial_groups(groups);
}
AdamW::AdamW(const TensorList& params, AdamWOptions options) {
  add_initial_groups(params, options);
}
AdamW::AdamW(const std::vector<ParamGroup<AdamWOptions>>& groups) {
  add_initial_groups(groups);
}

}  // namespace sl::optim
