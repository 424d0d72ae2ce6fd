// Strategy-agnostic pieces of classifier training, shared by the training jobs (tools/train) and
// tests: counting correct predictions over a range of a dataset, and a parameter digest that
// shows whether two runs ended in bit-identical states.
#pragma once

#include <cstdint>
#include <string>

#include "nn/data.h"
#include "nn/module.h"

namespace sl::models {

/// Number of examples in [begin, end) of `data` (batches {inputs, int64 labels}) whose argmax
/// of model.forward(inputs) equals the label. Runs in eval mode under no-grad, in batches of
/// `batch_size` moved to the model's device, and restores the module's training mode. Throws
/// ValueError for a range outside [0, data.size()] or batch_size < 1.
int64_t count_correct(nn::Module& model, const nn::Dataset& data, int64_t begin, int64_t end,
                      int64_t batch_size = 1000);

/// 64-bit FNV-1a over the bytes of every parameter and buffer of `model` in state_dict order
/// (names included), as 16 hex digits: equal digests mean bit-identical states.
std::string state_digest(const nn::Module& model);

}  // namespace sl::models
