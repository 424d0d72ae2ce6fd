#include "models/classifier.h"

#include <algorithm>
#include <cstdio>

#include "autograd/grad_mode.h"
#include "autograd/ops/reduce.h"

namespace sl::models {

int64_t count_correct(nn::Module& model, const nn::Dataset& data, int64_t begin, int64_t end,
                      int64_t batch_size) {
  SL_CHECK(0 <= begin && begin <= end && end <= data.size(), "count_correct: range [", begin, ", ",
           end, ") is outside the dataset's [0, ", data.size(), ")");
  SL_CHECK(batch_size >= 1, "count_correct: batch_size must be >= 1, got ", batch_size);
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard ng;
  // the batches go where the model is (its first parameter or buffer; the CPU without either)
  Device device = kCPU;
  for (const auto& [name, t] : model.state_dict()) {
    device = t.device();
    break;
  }
  int64_t correct = 0;
  for (int64_t s = begin; s < end; s += batch_size) {
    std::vector<int64_t> idx;
    for (int64_t i = s; i < std::min(end, s + batch_size); ++i) idx.push_back(i);
    nn::Batch b = data.get_batch(idx);
    correct += argmax(model.forward(b[0].to(device)), 1).eq(b[1].to(device)).sum().item<int64_t>();
  }
  model.train(was_training);
  return correct;
}

std::string state_digest(const nn::Module& model) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (const auto& [name, t] : model.state_dict()) {
    mix(name.data(), name.size());
    Tensor c = t.detach().to(kCPU).contiguous();
    mix(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace sl::models
