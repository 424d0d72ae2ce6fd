#include "nn/serialize/module_safetensors.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "nn/serialize/safetensors.h"

namespace sl::nn {

namespace {

// What makes two state-dict entries one tensor (Note [Tied weights in safetensors]).
using AliasKey = std::tuple<const Storage*, int64_t, Shape, Shape, DType>;

AliasKey alias_key(const Tensor& t) {
  const TensorImpl* i = t.impl();
  return {i->storage.get(), i->offset, i->sizes, i->strides, i->dtype};
}

// Bitwise equality of two host tensors of one shape (values compared after conversion to `dt`).
bool same_bits(const Tensor& a, const Tensor& b, DType dt) {
  Tensor x = a.to(dt).contiguous(), y = b.to(dt).contiguous();
  return x.nbytes() == y.nbytes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

}  // namespace

std::vector<std::vector<std::string>> tied_names(const StateDict& dict) {
  std::map<AliasKey, size_t> group_of;
  std::vector<std::vector<std::string>> groups;
  for (const auto& [name, t] : dict) {
    if (!t.defined() || t.numel() == 0 || !t.impl()->storage) continue;
    auto [it, fresh] = group_of.emplace(alias_key(t), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(name);
  }
  std::vector<std::vector<std::string>> out;
  for (auto& g : groups) {
    if (g.size() > 1) out.push_back(std::move(g));
  }
  return out;
}

void save_safetensors(const Module& module, const std::string& path,
                      const serialize::Metadata& metadata) {
  const StateDict dict = module.state_dict();
  serialize::Metadata meta = metadata;
  std::unordered_set<std::string> dropped;
  for (const auto& group : tied_names(dict)) {
    const std::string& kept = *std::min_element(group.begin(), group.end());
    for (const auto& name : group) {
      if (name == kept) continue;
      dropped.insert(name);
      const bool user_key =
          std::any_of(meta.begin(), meta.end(), [&](const auto& kv) { return kv.first == name; });
      if (!user_key) meta.emplace_back(name, kept);
    }
  }
  serialize::StateDict out;
  for (const auto& [name, t] : dict) {
    if (!dropped.count(name)) out.insert(name, t);
  }
  serialize::save_safetensors(path, out, meta);
}

LoadResult load_safetensors(Module& module, const std::string& path, bool strict,
                            LoadDType dtypes) {
  const serialize::SafetensorsFile file(path);  // IOError: missing, unreadable, malformed
  const serialize::SafetensorsHeader& header = file.header();
  std::unordered_map<std::string, const serialize::TensorEntry*> in_file;
  for (const auto& e : header.tensors) in_file.emplace(e.name, &e);

  // The module's entries share memory with it (state_dict() returns detached aliases), so
  // copying into them loads in place, as load_state_dict does.
  const StateDict dict = module.state_dict();
  std::unordered_map<std::string, size_t> group_of;
  const auto groups = tied_names(dict);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto& name : groups[g]) group_of.emplace(name, g);
  }
  auto alias_in_file = [&](const std::string& name) {
    auto it = group_of.find(name);
    if (it == group_of.end()) return false;
    const auto& g = groups[it->second];
    return std::any_of(g.begin(), g.end(), [&](const auto& n) { return in_file.count(n) != 0; });
  };

  LoadResult r;
  std::string shape_errors, dtype_errors;
  std::vector<std::pair<Tensor, const serialize::TensorEntry*>> plan;
  for (const auto& [name, t] : dict) {
    auto it = in_file.find(name);
    if (it == in_file.end()) {
      if (!alias_in_file(name)) r.missing_keys.push_back(name);
      continue;
    }
    const serialize::TensorEntry& e = *it->second;
    if (e.shape != t.sizes()) {
      shape_errors += "\n  '" + name + "': the file has " + shape_str(e.shape) + ", the model " +
                      shape_str(t.sizes());
    } else if (e.dtype != t.dtype() && dtypes == LoadDType::exact) {
      dtype_errors += "\n  '" + name + "': the file has " + dtype_name(e.dtype) + ", the model " +
                      dtype_name(t.dtype());
    } else {
      plan.emplace_back(t, &e);
    }
  }
  for (const auto& e : header.tensors) {
    if (!dict.contains(e.name)) r.unexpected_keys.push_back(e.name);
  }
  SL_CHECK_SHAPE(shape_errors.empty(), "load_safetensors: ", path, " does not fit ",
                 module.type_name(), ", shapes differ:", shape_errors);
  SL_CHECK_DTYPE(dtype_errors.empty(), "load_safetensors: ", path, " does not fit ",
                 module.type_name(),
                 ", dtypes differ (LoadDType::convert converts):", dtype_errors);
  if (strict && !r.ok()) {
    detail::throw_error<ValueError>("load_safetensors: error(s) loading ", path, " into ",
                                    module.type_name(), ":\n", r.str());
  }

  // Everything is read before anything is written: a read error leaves the module as it was.
  std::vector<Tensor> staged;
  staged.reserve(plan.size());
  for (const auto& [t, e] : plan) staged.push_back(file.read(e->name));
  // Several names of one tied tensor in the file: their values must agree.
  std::unordered_map<size_t, size_t> first_of_group;  // group -> index in plan
  std::vector<bool> skip(plan.size(), false);
  for (size_t i = 0; i < plan.size(); ++i) {
    auto g = group_of.find(plan[i].second->name);
    if (g == group_of.end()) continue;
    auto [it, fresh] = first_of_group.emplace(g->second, i);
    if (fresh) continue;
    const size_t j = it->second;
    SL_CHECK(same_bits(staged[j], staged[i], plan[i].first.dtype()), "load_safetensors: ", path,
             " holds '", plan[j].second->name, "' and '", plan[i].second->name,
             "', one tied tensor in ", module.type_name(), ", with different values");
    skip[i] = true;
  }
  NoGradGuard no_grad;
  for (size_t i = 0; i < plan.size(); ++i) {
    if (skip[i]) continue;
    Tensor dst = plan[i].first;
    dst.copy_(staged[i]);
  }
  return r;
}

}  // namespace sl::nn
