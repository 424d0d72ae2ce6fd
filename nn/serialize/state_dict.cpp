#include "nn/serialize/state_dict.h"

#include <charconv>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/copy.h"

namespace sl::serialize {

StateDict::StateDict(std::initializer_list<Item> items) {
  for (const auto& [k, v] : items) insert(k, v);
}

void StateDict::insert(std::string name, Tensor t) {
  SL_CHECK(t.defined(), "state_dict: tensor '", name, "' is undefined");
  SL_CHECK(!index_.count(name), "state_dict: duplicate key '", name, "'");
  index_.emplace(name, items_.size());
  items_.emplace_back(std::move(name), std::move(t));
}

void StateDict::set(std::string name, Tensor t) {
  SL_CHECK(t.defined(), "state_dict: tensor '", name, "' is undefined");
  auto it = index_.find(name);
  if (it != index_.end()) {
    items_[it->second].second = std::move(t);
    return;
  }
  insert(std::move(name), std::move(t));
}

bool StateDict::contains(std::string_view name) const {
  return find(name) != nullptr;
}

const Tensor* StateDict::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

const Tensor& StateDict::at(std::string_view name) const {
  const Tensor* t = find(name);
  SL_CHECK(t != nullptr, "state_dict: no tensor named '", name, "'");
  return *t;
}

bool StateDict::erase(std::string_view name) {
  auto it = index_.find(std::string(name));
  if (it == index_.end()) return false;
  size_t pos = it->second;
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(pos));
  index_.erase(it);
  for (auto& [k, i] : index_) {
    if (i > pos) --i;
  }
  return true;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& [k, v] : items_) out.push_back(k);
  return out;
}

std::string LoadReport::str() const {
  std::string out;
  auto add = [&](const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    if (!out.empty()) out += "; ";
    out += what;
    out += ": ";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      out += v[i];
    }
  };
  add("missing keys", missing);
  add("unexpected keys", unexpected);
  add("shape mismatches", mismatched);
  return out.empty() ? "ok" : out;
}

LoadReport load_into(const std::vector<std::pair<std::string, Tensor>>& dst, const StateDict& src,
                     bool strict) {
  LoadReport r;
  std::unordered_map<std::string, size_t> wanted;
  for (size_t i = 0; i < dst.size(); ++i) wanted.emplace(dst[i].first, i);
  std::vector<std::pair<const Tensor*, const Tensor*>> copies;
  for (const auto& [name, t] : dst) {
    const Tensor* s = src.find(name);
    if (!s) {
      r.missing.push_back(name);
      continue;
    }
    if (s->sizes() != t.sizes()) {
      r.mismatched.push_back(name + ": expected " + shape_str(t.sizes()) + ", got " +
                             shape_str(s->sizes()));
      continue;
    }
    copies.emplace_back(&t, s);
  }
  for (const auto& [name, t] : src) {
    if (!wanted.count(name)) r.unexpected.push_back(name);
  }
  SL_CHECK(!strict || r.ok(), "load_state_dict: ", r.str());
  NoGradGuard no_grad;
  for (const auto& [d, s] : copies) {
    ops::copy_(*d, *s);
    d->bump_version();
  }
  return r;
}

Json rng_state_to_json(const GeneratorState& s) {
  return Json::object({{"seed", std::to_string(s.seed)}, {"offset", std::to_string(s.offset)}});
}

GeneratorState rng_state_from_json(const Json& j) {
  auto parse_u64 = [](const Json& v, const char* key) {
    const std::string& s = v.at(key).as_string();
    uint64_t out = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    SL_CHECK(r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty(), "rng state: '", key,
             "' must be a decimal u64, got '", s, "'");
    return out;
  };
  return GeneratorState{parse_u64(j, "seed"), parse_u64(j, "offset")};
}

}  // namespace sl::serialize
