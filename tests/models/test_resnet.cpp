// ResNet (models/resnet.h) against torchvision: state-dict names and shapes of the registered
// models, forward/backward parity of small ResNets built from torchvision's blocks (fixtures by
// tools/gen_resnet_fixtures.py), an f64 gradcheck, initialisation and errors.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "autograd/grad_mode.h"
#include "models/registry.h"
#include "models/resnet.h"
#include "nn/fixture.h"
#include "nn/init.h"

using namespace sl;
using sl::models::ResNet;
using sl::models::ResNetBlock;
using sl::models::ResNetOptions;
using sl::testing::Fixture;

namespace {

struct TorchvisionModel {
  int64_t num_parameters = 0;
  std::vector<std::pair<std::string, Shape>> entries;  // state-dict order
};

// Reads tests/fixtures/models/resnet_torchvision_names.txt (format in the script's docstring).
std::map<std::string, TorchvisionModel> read_torchvision_names() {
  std::string path = std::string(SL_MODEL_FIXTURES) + "/resnet_torchvision_names.txt";
  std::ifstream f(path);
  REQUIRE_MESSAGE(f.good(), "cannot open ", path,
                  " (regenerate with /usr/bin/python3 tools/gen_resnet_fixtures.py)");
  std::map<std::string, TorchvisionModel> out;
  TorchvisionModel* cur = nullptr;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream ss(line);
    std::string key;
    ss >> key;
    if (key == "model") {
      std::string name;
      ss >> name;
      cur = &out[name];
      ss >> cur->num_parameters;
      continue;
    }
    REQUIRE(cur != nullptr);
    Shape shape;
    int64_t d;
    while (ss >> d) shape.push_back(d);
    cur->entries.emplace_back(key, shape);
  }
  return out;
}

std::shared_ptr<ResNet> as_resnet(const std::shared_ptr<nn::Module>& m) {
  auto r = std::dynamic_pointer_cast<ResNet>(m);
  REQUIRE(r != nullptr);
  return r;
}

}  // namespace

TEST_CASE("resnet: registered models have torchvision's state-dict names, shapes and sizes") {
  auto expected = read_torchvision_names();
  REQUIRE(expected.size() == 4);
  auto names = models::model_names();
  for (const auto& [name, tv] : expected) {
    CAPTURE(name);
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
    auto m = as_resnet(models::create_model(name));
    nn::StateDict sd = m->state_dict();
    REQUIRE(sd.size() == tv.entries.size());
    size_t i = 0;
    for (const auto& [key, t] : sd) {
      CHECK(key == tv.entries[i].first);
      CHECK_MESSAGE(t.sizes() == tv.entries[i].second, key);
      ++i;
    }
    CHECK(m->num_parameters() == tv.num_parameters);
  }
}

TEST_CASE("resnet: torchvision initialisation, zero_init_residual") {
  manual_seed(11);
  // resnet18's layer4.0.conv2 weight [512, 512, 3, 3]: kaiming_normal_(fan_out, relu) draws
  // N(0, 2 / fan_out), fan_out = 512 * 9, so std = sqrt(2 / 4608) = 0.020833. With 2.36 M
  // samples the sample std is within 0.1 % of it (its standard error is std / sqrt(2 n));
  // 1 % is a loose bound. The mean's standard error is std / 1536 = 1.4e-5.
  auto r18 = models::resnet18();
  CHECK(r18->options.block == ResNetBlock::basic);
  Tensor w = r18->get_parameter("layer4.0.conv2.weight");
  double std_expected = std::sqrt(2.0 / (512 * 9));
  CHECK(std::abs(w.std().item<double>() / std_expected - 1.0) < 0.01);
  CHECK(std::abs(w.mean().item<double>()) < 1e-4);
  // fc keeps Linear's default: U(-1/sqrt(512), 1/sqrt(512)) for weight and bias.
  double bound = 1.0 / std::sqrt(512.0);
  CHECK(r18->fc->weight.abs().max().item<double>() <= bound);
  CHECK(r18->fc->weight.abs().max().item<double>() > 0.99 * bound);  // 512 k draws reach the edge
  CHECK(r18->fc->bias.abs().max().item<double>() <= bound);
  // BatchNorm weight 1, bias 0.
  CHECK(r18->get_parameter("layer3.1.bn2.weight").eq(1.0).all().item<bool>());
  CHECK(r18->get_parameter("layer3.1.bn2.bias").eq(0.0).all().item<bool>());
  CHECK(r18->get_buffer("layer3.1.bn2.running_var").eq(1.0).all().item<bool>());

  for (ResNetBlock kind : {ResNetBlock::basic, ResNetBlock::bottleneck}) {
    CAPTURE(static_cast<int>(kind));
    ResNet m({.block = kind, .blocks = {2, 1}, .width = 4, .zero_init_residual = true});
    const std::string last = kind == ResNetBlock::basic ? ".bn2.weight" : ".bn3.weight";
    int zeroed = 0;
    for (const auto& [name, p] : m.named_parameters()) {
      bool is_bn_weight = (name.starts_with("bn") || name.find(".bn") != std::string::npos ||
                           name.ends_with("downsample.1.weight")) &&
                          name.ends_with(".weight");
      if (name.ends_with(last)) {
        CHECK_MESSAGE(p.eq(0.0).all().item<bool>(), name);
        ++zeroed;
      } else if (is_bn_weight) {  // every other BatchNorm keeps weight 1
        CHECK_MESSAGE(p.eq(1.0).all().item<bool>(), name);
      }
    }
    CHECK(zeroed == 3);  // one per block
    // With every residual branch at zero, a block without downsample is relu(x): layer1.1 maps
    // its (non-negative, post-relu) input to itself.
    m.eval();
    NoGradGuard ng;
    Tensor x = randn({2, 3, 16, 16});
    Tensor h = m.maxpool->forward(m.bn1->forward(m.conv1->forward(x)).relu());
    Tensor h1 = m.layers[0]->operator[](0)->forward(h);
    SL_CHECK_CLOSE(m.layers[0]->operator[](1)->forward(h1), h1, 0, 0);
  }
}

// f32 tolerances for the PyTorch parity cases. Each output is the end of 10-16 layers of
// convolutions summing up to 288 products, accumulated in float32 in another order than
// PyTorch's (relative rounding ~1e-7 per layer, compounding over the depth and back through the
// backward). Logits are O(1); weight gradients reach ~12 (sums over every position).
//  - eval mode: rtol 1e-5, atol 1e-6. BatchNorm is a fixed affine map; every deviation seen is
//    below 3e-7 absolute.
//  - train mode: rtol 1e-4, atol 1e-5. BatchNorm divides by batch standard deviations from as
//    few as 8 values per channel, and its backward subtracts batch means of products
//    (cancellation), which amplifies the rounding differences: deviations seen reach 2e-5 on
//    gradients of ~6 (3e-6 relative) and 9e-6 on entries of ~0.15, where the cancellation is
//    largest; rtol 3e-5 / atol 3e-6 fails a few entries.
constexpr double kEvalRtol = 1e-5, kEvalAtol = 1e-6;
constexpr double kTrainRtol = 1e-4, kTrainAtol = 1e-5;

TEST_CASE("resnet: small ResNets match torchvision's blocks, forward and backward") {
  Fixture fx("resnet", SL_MODEL_FIXTURES);
  struct Case {
    const char* name;
    ResNetOptions opts;
    bool train;
  };
  // The configurations of CASES in tools/gen_resnet_fixtures.py.
  std::vector<Case> cases = {
      {"basic_imagenet_train",
       {.block = ResNetBlock::basic,
        .blocks = {1, 1, 1, 1},
        .num_classes = 5,
        .in_channels = 3,
        .width = 2},
       true},
      {"basic_small_eval",
       {.block = ResNetBlock::basic,
        .blocks = {2, 1, 1},
        .num_classes = 10,
        .in_channels = 1,
        .width = 4,
        .small_stem = true},
       false},
      {"bottleneck_small_train",
       {.block = ResNetBlock::bottleneck,
        .blocks = {1, 2, 1},
        .num_classes = 6,
        .in_channels = 3,
        .width = 2,
        .small_stem = true},
       true},
      {"bottleneck_imagenet_eval",
       {.block = ResNetBlock::bottleneck,
        .blocks = {1, 1, 1, 1},
        .num_classes = 4,
        .in_channels = 3,
        .width = 2},
       false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    ResNet m(c.opts);
    fx.load_params(m, c.name);  // every name and shape equals torchvision's
    m.train(c.train);
    Tensor x = fx.input(c.name, 0);
    const double rtol = c.train ? kTrainRtol : kEvalRtol, atol = c.train ? kTrainAtol : kEvalAtol;
    fx.check_backward(c.name, {m.forward(x)}, {x}, &m, rtol, atol);
    if (!c.train) continue;
    // Running statistics after one train-mode step (unbiased batch variance, momentum 0.1) and
    // num_batches_tracked = 1: one reduction each, no backward, so the eval-mode tolerance.
    for (const auto& [name, b] : m.named_buffers()) {
      INFO(c.name, " buffer ", name);
      SL_CHECK_CLOSE(b, fx.get(std::string(c.name) + ".after." + name), kEvalRtol, kEvalAtol);
    }
  }
}

TEST_CASE("resnet: float64 gradcheck of tiny ResNets in train mode") {
  // Train mode, so that the BatchNorm backward includes the batch statistics (every sample's
  // gradient depends on the others), the path training takes; eval-mode BatchNorm is an affine
  // map, covered by the eval parity cases above. The running statistics that every call updates
  // do not enter a train-mode output, so the function gradcheck differentiates is pure.
  manual_seed(21);
  auto check = [](const ResNetOptions& opts, const Shape& input) {
    ResNet m(opts);
    m.to(DType::f64);
    {  // BatchNorm affine parameters away from 1 / 0, so their gradients are not special
      NoGradGuard ng;
      for (const auto& [name, p] : m.named_parameters()) {
        if (name.find("bn") != std::string::npos || name.find("downsample.1") != std::string::npos)
          nn::init::uniform_(p, 0.5, 1.5);
      }
    }
    Tensor x = randn(input, {.dtype = DType::f64}).requires_grad_();
    return sl::testing::module_gradcheck(m, [&](const TensorList& in) { return m.forward(in[0]); },
                                         {x});
  };
  // small stem at 8x8: layer1 8x8, layer2 4x4 (32 values per channel for its BatchNorm)
  CHECK(check({.block = ResNetBlock::basic,
               .blocks = {1, 1},
               .num_classes = 3,
               .in_channels = 1,
               .width = 2,
               .small_stem = true},
              {2, 1, 8, 8}));
  // torchvision's stem (7x7 stride-2 conv, max pool) at 16x16: layer1 4x4, layer2 2x2
  CHECK(check({.block = ResNetBlock::bottleneck,
               .blocks = {1, 1},
               .num_classes = 2,
               .in_channels = 2,
               .width = 1},
              {2, 2, 16, 16}));
}

TEST_CASE("resnet: shape and option errors name ResNet and the shapes") {
  ResNet m({.blocks = {1, 1}, .num_classes = 3, .in_channels = 3, .width = 2});
  SL_CHECK_THROWS(m.forward(randn({3, 32, 32})), ShapeError,
                  "ResNet: expected input [N, 3, H, W] with H, W >= 7, got [3, 32, 32]");
  SL_CHECK_THROWS(m.forward(randn({2, 1, 32, 32})), ShapeError,
                  "ResNet: expected input [N, 3, H, W] with H, W >= 7, got [2, 1, 32, 32]");
  SL_CHECK_THROWS(m.forward(randn({2, 32, 32, 3})), ShapeError,
                  "ResNet: expected input [N, 3, H, W] with H, W >= 7, got [2, 32, 32, 3]");
  SL_CHECK_THROWS(m.forward(randn({2, 3, 6, 32})), ShapeError,
                  "ResNet: expected input [N, 3, H, W] with H, W >= 7, got [2, 3, 6, 32]");
  CHECK(m.forward(randn({2, 3, 7, 7})).sizes() == Shape{2, 3});  // the smallest accepted
  ResNet small({.blocks = {1}, .num_classes = 2, .in_channels = 1, .width = 2, .small_stem = true});
  SL_CHECK_THROWS(small.forward(randn({1, 1, 28, 2})), ShapeError,
                  "ResNet: expected input [N, 1, H, W] with H, W >= 3, got [1, 1, 28, 2]");
  SL_CHECK_THROWS(m.forward(Tensor()), ValueError, "ResNet: the input is undefined");

  SL_CHECK_THROWS(ResNet({.blocks = {}}), ValueError,
                  "ResNet: blocks (blocks per stage) must not be empty");
  SL_CHECK_THROWS(ResNet({.blocks = std::vector<int64_t>(17, 1)}), ValueError,
                  "ResNet: at most 16 stages, got blocks [1, 1, 1");
  SL_CHECK_THROWS(ResNet({.blocks = {2, 0, 1}}), ValueError,
                  "ResNet: every stage needs at least one block, got blocks [2, 0, 1]");
  SL_CHECK_THROWS(ResNet({.blocks = {1}, .num_classes = 0}), ValueError,
                  "ResNet: width, in_channels and num_classes must be positive, got 64, 3, 0");
  SL_CHECK_THROWS(models::BasicBlock(4, 0), ValueError,
                  "BasicBlock: inplanes, planes and stride must be positive, got 4, 0, 1");
  SL_CHECK_THROWS(models::Bottleneck(4, 2, -1), ValueError,
                  "Bottleneck: inplanes, planes and stride must be positive, got 4, 2, -1");
  // A block called on the wrong channel count fails in its first layer.
  models::BasicBlock block(4, 4);
  CHECK(block.downsample == nullptr);
  CHECK_THROWS_AS(block.forward(randn({1, 3, 5, 5})), ShapeError);
}

TEST_CASE("resnet: resnet_fashion classifies 1x28x28 pictures into 10 classes") {
  auto m = as_resnet(models::create_model("resnet_fashion"));
  CHECK(m->options.small_stem);
  CHECK(m->maxpool == nullptr);
  CHECK(m->layers.size() == 3);
  CHECK(m->feature_channels() == 64);
  Tensor y = m->forward(randn({2, 1, 28, 28}));
  CHECK(y.sizes() == Shape{2, 10});
  SL_CHECK_THROWS(m->forward(randn({2, 3, 28, 28})), ShapeError,
                  "ResNet: expected input [N, 1, H, W] with H, W >= 3, got [2, 3, 28, 28]");
}
