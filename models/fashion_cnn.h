// A small CNN for 28x28 grey images (Fashion-MNIST): two Conv-BatchNorm-ReLU-MaxPool stages and
// a two-layer classifier. Registered as "fashion_cnn".
//
//   features:   Conv2d(1, c1, 3, padding=1, bias=False) BatchNorm2d(c1) ReLU MaxPool2d(2)
//               Conv2d(c1, c2, 3, padding=1, bias=False) BatchNorm2d(c2) ReLU MaxPool2d(2)
//   classifier: Flatten Linear(c2 * 7 * 7, hidden) ReLU Linear(hidden, num_classes)
//
// The same model in PyTorch is nn.Sequential-compatible by name (features.0.weight, ...).
#pragma once

#include "nn/containers.h"
#include "nn/module.h"

namespace sl::models {

struct FashionCNNOptions {
  int64_t channels1 = 32;
  int64_t channels2 = 64;
  int64_t hidden = 128;
  int64_t num_classes = 10;
};

/// forward(x [N, 1, 28, 28], normalised pixels) -> logits [N, num_classes]. Throws ShapeError
/// for other input shapes.
class FashionCNN : public nn::Module {
 public:
  explicit FashionCNN(FashionCNNOptions opts = {});
  Tensor forward(const Tensor& x) override;
  const FashionCNNOptions options;
  std::shared_ptr<nn::Sequential> features, classifier;
};

}  // namespace sl::models
