// The model registry: models register a factory under a name, and tools (tools/train*) create
// them by that name, so adding a model never touches the tools.
//
//   SL_REGISTER_MODEL("fashion_cnn", [] { return std::make_shared<FashionCNN>(); });
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace sl::models {

using ModelFactory = std::function<std::shared_ptr<nn::Module>()>;

/// Adds a factory; throws ValueError when the name is empty or already registered.
void register_model(const std::string& name, ModelFactory factory);
/// A new model; throws ValueError naming the known models when `name` is unknown.
std::shared_ptr<nn::Module> create_model(const std::string& name);
/// Registered names, sorted.
std::vector<std::string> model_names();

namespace registration {
struct Registrar {
  Registrar(const std::string& name, ModelFactory f) { register_model(name, std::move(f)); }
};
}  // namespace registration

}  // namespace sl::models

#define SL_MODEL_CAT2(a, b) a##b
#define SL_MODEL_CAT(a, b) SL_MODEL_CAT2(a, b)
/// Registers a model factory at load time (in the model's .cpp).
#define SL_REGISTER_MODEL(name, factory)                                                    \
  static ::sl::models::registration::Registrar SL_MODEL_CAT(sl_model_registrar_, __LINE__)( \
      name, factory)
