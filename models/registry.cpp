#include "models/registry.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace sl::models {

namespace {
struct Registry {
  std::mutex mu;
  std::map<std::string, ModelFactory> factories;
};
Registry& registry() {
  static Registry r;  // constructed on first use, so registration order across files is safe
  return r;
}
}  // namespace

void register_model(const std::string& name, ModelFactory factory) {
  SL_CHECK(!name.empty(), "register_model: the name must not be empty");
  SL_CHECK(factory != nullptr, "register_model: the factory for '", name, "' is empty");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  SL_CHECK(r.factories.count(name) == 0, "register_model: '", name, "' is already registered");
  r.factories.emplace(name, std::move(factory));
}

std::vector<std::string> model_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [n, f] : r.factories) names.push_back(n);
  return names;
}

std::shared_ptr<nn::Module> create_model(const std::string& name) {
  ModelFactory f;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(name);
    if (it != r.factories.end()) f = it->second;
  }
  if (!f) {
    std::string known;
    for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
    sl::detail::throw_error<ValueError>("create_model: unknown model '", name, "' (known: ", known,
                                        ")");
  }
  return f();
}

}  // namespace sl::models
