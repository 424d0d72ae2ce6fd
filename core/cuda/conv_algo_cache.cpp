#include "core/cuda/conv_algo_cache.h"

#include <sstream>

namespace sl::cuda {

size_t ConvAlgoKeyHash::operator()(const ConvAlgoKey& k) const noexcept {
  size_t h = 0;
  auto mix = [&h](uint64_t v) {
    h ^= std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  mix(static_cast<uint64_t>(k.device));
  mix(static_cast<uint64_t>(k.pass));
  mix(static_cast<uint64_t>(k.dtype));
  for (const auto* a : {&k.x, &k.w, &k.y}) {
    for (int64_t v : *a) mix(static_cast<uint64_t>(v));
  }
  for (const auto* a : {&k.pad, &k.stride, &k.dilation}) {
    for (int64_t v : *a) mix(static_cast<uint64_t>(v));
  }
  mix(static_cast<uint64_t>(k.groups));
  mix((k.tf32 ? 1u : 0u) | (k.deterministic ? 2u : 0u) | (k.benchmark ? 4u : 0u));
  return h;
}

ConvAlgoChoice ConvAlgoCache::get(const ConvAlgoKey& key,
                                  const std::function<ConvAlgoChoice()>& choose) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) return it->second;
    ++misses_;
  }
  ConvAlgoChoice c = choose();  // may run cuDNN's benchmark: not under the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = map_.emplace(key, std::move(c));
  if (inserted) order_.push_back(it->second.description);
  return it->second;
}

size_t ConvAlgoCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

size_t ConvAlgoCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

std::vector<std::string> ConvAlgoCache::descriptions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return order_;
}

void ConvAlgoCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  map_.clear();
  order_.clear();
  misses_ = 0;
}

ConvAlgoCache& conv_algo_cache() {
  static ConvAlgoCache cache;
  return cache;
}

std::string sizes4_str(const std::array<int64_t, 4>& s) {
  std::ostringstream os;
  os << '[' << s[0] << ", " << s[1] << ", " << s[2] << ", " << s[3] << ']';
  return os.str();
}

}  // namespace sl::cuda
