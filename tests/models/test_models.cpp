// The model registry, the Fashion-MNIST CNN and the classifier helpers.
#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "models/classifier.h"
#include "models/fashion_cnn.h"
#include "models/registry.h"
#include "nn/data.h"
#include "nn/linear.h"
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

TEST_CASE("count_correct counts argmax hits over a range; state_digest tracks every bit") {
  // A linear "classifier" that copies its 3 inputs to 3 logits: the argmax of x is the class.
  nn::Linear id(3, 3);
  {
    NoGradGuard ng;
    id.weight.copy_(eye(3));
    id.bias.zero_();
  }
  Tensor x = tensor({1.f, 0.f, 0.f, 0.f, 2.f, 0.f, 0.f, 0.f, 3.f, 5.f, 0.f, 0.f}).view({4, 3});
  Tensor y = from_vector(std::vector<int64_t>{0, 1, 0, 1});  // rows 0 and 1 right, 2 and 3 wrong
  nn::TensorDataset data({x, y});
  CHECK(models::count_correct(id, data, 0, 4, 3) == 2);  // two batches: 3 + 1
  CHECK(models::count_correct(id, data, 1, 3) == 1);
  CHECK(id.is_training());  // mode restored
  SL_CHECK_THROWS(models::count_correct(id, data, 2, 5), ValueError,
                  "count_correct: range [2, 5) is outside the dataset's [0, 4)");

  std::string d0 = models::state_digest(id);
  CHECK(d0.size() == 16);
  CHECK(models::state_digest(id) == d0);
  {
    NoGradGuard ng;
    float* b = id.bias.data_ptr<float>();
    b[2] = std::nextafter(0.0f, 1.0f);  // the smallest change of one value
  }
  CHECK(models::state_digest(id) != d0);
}
