#include "models/fashion_cnn.h"

#include "models/registry.h"
#include "nn/activation.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/normalization.h"
#include "nn/pooling.h"

namespace sl::models {

FashionCNN::FashionCNN(FashionCNNOptions o) : Module("FashionCNN"), options(o) {
  using namespace sl::nn;
  features = register_module(
      "features",
      std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
          std::make_shared<Conv2d>(1, o.channels1, 3, Conv2dOptions{.padding = 1, .bias = false}),
          std::make_shared<BatchNorm2d>(o.channels1), std::make_shared<ReLU>(),
          std::make_shared<MaxPool2d>(2),
          std::make_shared<Conv2d>(o.channels1, o.channels2, 3,
                                   Conv2dOptions{.padding = 1, .bias = false}),
          std::make_shared<BatchNorm2d>(o.channels2), std::make_shared<ReLU>(),
          std::make_shared<MaxPool2d>(2)}));
  classifier = register_module(
      "classifier",
      std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
          std::make_shared<Flatten>(), std::make_shared<Linear>(o.channels2 * 7 * 7, o.hidden),
          std::make_shared<ReLU>(), std::make_shared<Linear>(o.hidden, o.num_classes)}));
}

Tensor FashionCNN::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "FashionCNN: the input is undefined");
  SL_CHECK_SHAPE(x.dim() == 4 && x.size(1) == 1 && x.size(2) == 28 && x.size(3) == 28,
                 "FashionCNN: expected input [N, 1, 28, 28], got ", shape_str(x.sizes()));
  return classifier->forward(features->forward(x));
}

SL_REGISTER_MODEL("fashion_cnn", [] { return std::make_shared<FashionCNN>(); });

}  // namespace sl::models
