// The model registry and the Fashion-MNIST CNN.
#include <algorithm>

#include "models/fashion_cnn.h"
#include "models/registry.h"
#include "support/testing.h"

using namespace sl;

TEST_CASE("the model registry creates the Fashion-MNIST CNN by name") {
  auto names = models::model_names();
  CHECK(std::find(names.begin(), names.end(), "fashion_cnn") != names.end());
  auto m = models::create_model("fashion_cnn");
  CHECK(m->forward(randn({2, 1, 28, 28})).sizes() == Shape{2, 10});
  // Names as the same nn.Sequential-based model in PyTorch.
  CHECK(m->get_parameter("features.0.weight").sizes() == Shape{32, 1, 3, 3});
  CHECK(m->get_buffer("features.5.running_mean").sizes() == Shape{64});
  CHECK(m->get_parameter("classifier.1.weight").sizes() == Shape{128, 64 * 7 * 7});
  SL_CHECK_THROWS(models::create_model("resnet9000"), ValueError,
                  "unknown model 'resnet9000' (known: ");
  SL_CHECK_THROWS(m->forward(randn({2, 1, 32, 32})), ShapeError,
                  "FashionCNN: expected input [N, 1, 28, 28], got [2, 1, 32, 32]");
  SL_CHECK_THROWS(
      models::register_model("fashion_cnn", [] { return models::create_model("fashion_cnn"); }),
      ValueError, "'fashion_cnn' is already registered");
}
