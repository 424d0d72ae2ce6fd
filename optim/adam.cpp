#include "optim/adam.h"

namespace sl::optim {

Adam::Adam(const TensorList& params, AdamOptions options) {
  add_param_group({params, options});
}
Adam::Adam(const std::vector<ParamGroup<AdamOptions>>& groups) {
  for (const auto& g : groups) add_param_group(g);
}
AdamW::AdamW(const TensorList& params, AdamWOptions options) {
  add_param_group({params, options});
}
AdamW::AdamW(const std::vector<ParamGroup<AdamWOptions>>& groups) {
  for (const auto& g : groups) add_param_group(g);
}

}  // namespace sl::optim
