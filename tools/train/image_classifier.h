// Fashion-MNIST classification through the supervised loop (supervised.h): the jobs cnn and
// resnet differ only in their model. The data are the 28x28 grey images as [N, 1, 28, 28]
// (normalised, fashion_mnist.h) from --data-dir (default: the Debian package's folder); the loss
// is cross entropy on the logits; the metric is the test split's top-1 accuracy.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "nn/module.h"
#include "nn/serialize/json.h"
#include "registry.h"

namespace sl::train {

/// Trains `make_model()` (a model taking [N, 1, 28, 28] to [N, 10] logits) as the job `name`,
/// printed as `description`, with `config` (its settings) in every checkpoint; returns the exit
/// code. Throws as run_supervised.
int run_image_classifier(const Options& opt, const std::string& name,
                         const std::string& description, const serialize::Json& config,
                         std::function<std::shared_ptr<nn::Module>()> make_model);

}  // namespace sl::train
