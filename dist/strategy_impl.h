// Internal: the concrete strategies behind make_strategy (dist/strategy.h).
#pragma once

#include <memory>

#include "dist/strategy.h"

namespace sl::dist {

std::unique_ptr<Strategy> make_single_strategy(std::shared_ptr<nn::Module> model,
                                               optim::Optimizer& opt, StrategyOptions opts);
std::unique_ptr<Strategy> make_dp_strategy(std::shared_ptr<nn::Module> model, optim::Optimizer& opt,
                                           StrategyOptions opts);
/// ddp, zero1 or zero2.
std::unique_ptr<Strategy> make_flat_strategy(StrategyKind kind, std::shared_ptr<nn::Module> model,
                                             optim::Optimizer& opt, StrategyOptions opts);

/// The model's trainable parameters with their names, in registration order. Throws ValueError
/// unless the optimizer holds exactly those (the message starts with `op`).
std::vector<std::pair<std::string, Tensor>> trainable_parameters(const nn::Module& model,
                                                                 const optim::Optimizer& opt,
                                                                 const char* op);

/// Position of every parameter of `named` in the optimizer: (group, index). Throws ValueError
/// for one the optimizer does not hold.
std::vector<std::pair<size_t, size_t>> optimizer_index(
    const optim::Optimizer& opt, const std::vector<std::pair<std::string, Tensor>>& named);

}  // namespace sl::dist
