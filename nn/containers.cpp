#include "nn/containers.h"

#include <algorithm>

namespace sl::nn {

// ---- Sequential -------------------------------------------------------------------------------

Sequential::Sequential() : Module("Sequential") {}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) : Sequential() {
  for (const auto& m : modules) push_back(m);
}

Sequential::Sequential(
    std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> modules)
    : Sequential() {
  for (const auto& [name, m] : modules) push_back(name, m);
}

void Sequential::push_back(std::shared_ptr<Module> m) {
  push_back(std::to_string(size()), std::move(m));
}

void Sequential::push_back(const std::string& name, std::shared_ptr<Module> m) {
  register_module(name, std::move(m));
}

std::shared_ptr<Module> Sequential::operator[](size_t i) const {
  auto c = children();
  SL_CHECK_INDEX(i < c.size(), "Sequential: index ", i, " out of range for ", c.size(), " modules");
  return c[i];
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& m : children()) y = m->forward(y);
  return y;
}

// ---- ModuleList --------------------------------------------------------------------------------

ModuleList::ModuleList() : Module("ModuleList") {}

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) : ModuleList() {
  for (const auto& m : modules) push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(size()), std::move(m));
}

std::shared_ptr<Module> ModuleList::operator[](size_t i) const {
  auto c = children();
  SL_CHECK_INDEX(i < c.size(), "ModuleList: index ", i, " out of range for ", c.size(), " modules");
  return c[i];
}

// ---- ModuleDict --------------------------------------------------------------------------------

ModuleDict::ModuleDict() : Module("ModuleDict") {}

ModuleDict::ModuleDict(
    std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> modules)
    : ModuleDict() {
  for (const auto& [k, m] : modules) insert(k, m);
}

void ModuleDict::insert(const std::string& key, std::shared_ptr<Module> m) {
  register_module(key, std::move(m));
  keys_.push_back(key);
}

bool ModuleDict::contains(const std::string& key) const {
  return std::find(keys_.begin(), keys_.end(), key) != keys_.end();
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& key) const {
  for (const auto& [name, m] : named_children()) {
    if (name == key) return m;
  }
  detail::throw_error<IndexError>("ModuleDict: no key '", key, "'");
}

std::vector<std::string> ModuleDict::keys() const {
  return keys_;
}

}  // namespace sl::nn
