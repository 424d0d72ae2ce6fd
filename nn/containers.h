// Containers: Sequential, ModuleList, ModuleDict, with PyTorch's child names ("0", "1", ... or
// the given keys), so their parameters' dotted names match PyTorch's.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace sl::nn {

/// Chains one-tensor modules: forward(x) = m_n(...m_1(x)). Children are named "0", "1", ...
/// unless pushed with a name.
class Sequential : public Module {
 public:
  Sequential();
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  /// Named children, as nn.Sequential(OrderedDict(...)).
  Sequential(std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> modules);
  /// Appends a child named after its position.
  void push_back(std::shared_ptr<Module> m);
  void push_back(const std::string& name, std::shared_ptr<Module> m);
  size_t size() const { return children().size(); }
  /// Child i; throws IndexError out of range.
  std::shared_ptr<Module> operator[](size_t i) const;
  /// Child i cast to M; throws ValueError when it is not an M.
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[i]);
    SL_CHECK(p != nullptr, "Sequential::at: child ", i, " is a ", (*this)[i]->type_name());
    return p;
  }
  /// Runs the children in order (an empty Sequential returns x).
  Tensor forward(const Tensor& x) override;
};

/// A list of children named "0", "1", ...; no forward of its own. Iterate with children().
class ModuleList : public Module {
 public:
  ModuleList();
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> m);
  size_t size() const { return children().size(); }
  /// Child i; throws IndexError out of range.
  std::shared_ptr<Module> operator[](size_t i) const;
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[i]);
    SL_CHECK(p != nullptr, "ModuleList::at: child ", i, " is a ", (*this)[i]->type_name());
    return p;
  }
};

/// Children under string keys, in insertion order; no forward of its own.
class ModuleDict : public Module {
 public:
  ModuleDict();
  ModuleDict(std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> modules);
  /// Adds a child; throws ValueError when the key exists or is not a valid name.
  void insert(const std::string& key, std::shared_ptr<Module> m);
  bool contains(const std::string& key) const;
  /// The child under key; throws IndexError when absent.
  std::shared_ptr<Module> operator[](const std::string& key) const;
  std::vector<std::string> keys() const;
  size_t size() const { return keys_.size(); }

 private:
  std::vector<std::string> keys_;
};

}  // namespace sl::nn
