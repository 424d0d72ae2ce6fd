#include "models/resnet.h"

#include <string>

#include "models/registry.h"
#include "nn/init.h"

namespace sl::models {

namespace {

std::shared_ptr<nn::Conv2d> conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  return std::make_shared<nn::Conv2d>(
      in, out, 3, nn::Conv2dOptions{.stride = stride, .padding = 1, .bias = false});
}

std::shared_ptr<nn::Conv2d> conv1x1(int64_t in, int64_t out, int64_t stride = 1) {
  return std::make_shared<nn::Conv2d>(in, out, 1,
                                      nn::Conv2dOptions{.stride = stride, .bias = false});
}

void check_block_sizes(const char* name, int64_t inplanes, int64_t planes, int64_t stride) {
  SL_CHECK(inplanes > 0 && planes > 0 && stride > 0, name,
           ": inplanes, planes and stride must be positive, got ", inplanes, ", ", planes, ", ",
           stride);
}

// torchvision's _make_layer rule: a projection shortcut exactly when the shape changes.
std::shared_ptr<nn::Sequential> make_downsample(int64_t inplanes, int64_t out, int64_t stride) {
  if (stride == 1 && inplanes == out) return nullptr;
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      conv1x1(inplanes, out, stride), std::make_shared<nn::BatchNorm2d>(out)});
}

std::string blocks_str(const ResNetOptions& o) {
  std::string s = "[";
  for (size_t i = 0; i < o.blocks.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(o.blocks[i]);
  }
  return s + "]";
}

}  // namespace

BasicBlock::BasicBlock(int64_t inplanes, int64_t planes, int64_t stride) : Module("BasicBlock") {
  check_block_sizes("BasicBlock", inplanes, planes, stride);
  conv1 = register_module("conv1", conv3x3(inplanes, planes, stride));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
  downsample = make_downsample(inplanes, planes * kExpansion, stride);
  if (downsample) register_module("downsample", downsample);
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor out = bn1->forward(conv1->forward(x)).relu();
  out = bn2->forward(conv2->forward(out));
  return (out + (downsample ? downsample->forward(x) : x)).relu();
}

Bottleneck::Bottleneck(int64_t inplanes, int64_t planes, int64_t stride) : Module("Bottleneck") {
  check_block_sizes("Bottleneck", inplanes, planes, stride);
  conv1 = register_module("conv1", conv1x1(inplanes, planes));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes, stride));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
  conv3 = register_module("conv3", conv1x1(planes, planes * kExpansion));
  bn3 = register_module("bn3", std::make_shared<nn::BatchNorm2d>(planes * kExpansion));
  downsample = make_downsample(inplanes, planes * kExpansion, stride);
  if (downsample) register_module("downsample", downsample);
}

Tensor Bottleneck::forward(const Tensor& x) {
  Tensor out = bn1->forward(conv1->forward(x)).relu();
  out = bn2->forward(conv2->forward(out)).relu();
  out = bn3->forward(conv3->forward(out));
  return (out + (downsample ? downsample->forward(x) : x)).relu();
}

ResNet::ResNet(ResNetOptions o) : Module("ResNet"), options(std::move(o)) {
  const ResNetOptions& op = options;
  SL_CHECK(!op.blocks.empty(), "ResNet: blocks (blocks per stage) must not be empty");
  // Stage widths double: width << (stages - 1) must stay a sane channel count.
  SL_CHECK(op.blocks.size() <= 16, "ResNet: at most 16 stages, got blocks ", blocks_str(op));
  for (int64_t b : op.blocks) {
    SL_CHECK(b > 0, "ResNet: every stage needs at least one block, got blocks ", blocks_str(op));
  }
  SL_CHECK(op.width > 0 && op.in_channels > 0 && op.num_classes > 0,
           "ResNet: width, in_channels and num_classes must be positive, got ", op.width, ", ",
           op.in_channels, ", ", op.num_classes);
  const bool basic = op.block == ResNetBlock::basic;
  const int64_t expansion = basic ? BasicBlock::kExpansion : Bottleneck::kExpansion;

  if (op.small_stem) {
    conv1 = register_module("conv1", conv3x3(op.in_channels, op.width));
  } else {
    conv1 = register_module(
        "conv1",
        std::make_shared<nn::Conv2d>(op.in_channels, op.width, 7,
                                     nn::Conv2dOptions{.stride = 2, .padding = 3, .bias = false}));
  }
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(op.width));
  if (!op.small_stem)
    maxpool = register_module("maxpool", std::make_shared<nn::MaxPool2d>(3, 2, 1));

  int64_t inplanes = op.width;
  for (size_t i = 0; i < op.blocks.size(); ++i) {
    const int64_t planes = op.width << i;
    auto stage = std::make_shared<nn::Sequential>();
    for (int64_t b = 0; b < op.blocks[i]; ++b) {
      const int64_t stride = (i > 0 && b == 0) ? 2 : 1;
      if (basic) {
        stage->push_back(std::make_shared<BasicBlock>(inplanes, planes, stride));
      } else {
        stage->push_back(std::make_shared<Bottleneck>(inplanes, planes, stride));
      }
      inplanes = planes * expansion;
    }
    layers.push_back(register_module("layer" + std::to_string(i + 1), stage));
  }
  fc = register_module("fc", std::make_shared<nn::Linear>(inplanes, op.num_classes));

  // torchvision's initialisation (fc keeps Linear's default).
  for (const auto& [name, m] : named_modules()) {
    if (auto* conv = dynamic_cast<nn::Conv2d*>(m)) {
      nn::init::kaiming_normal_(conv->weight, 0.0, "fan_out", "relu");
    }
    // BatchNorm2d is constructed with weight 1 and bias 0 already.
  }
  if (op.zero_init_residual) {
    for (const auto& stage : layers) {
      for (const auto& block : stage->children()) {
        if (auto* bb = dynamic_cast<BasicBlock*>(block.get())) nn::init::zeros_(bb->bn2->weight);
        if (auto* bn = dynamic_cast<Bottleneck*>(block.get())) nn::init::zeros_(bn->bn3->weight);
      }
    }
  }
}

int64_t ResNet::min_input_size() const {
  return options.small_stem ? 3 : 7;
}

int64_t ResNet::feature_channels() const {
  return fc->in_features;
}

Tensor ResNet::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "ResNet: the input is undefined");
  const int64_t c = options.in_channels, k = min_input_size();
  SL_CHECK_SHAPE(x.dim() == 4 && x.size(1) == c && x.size(2) >= k && x.size(3) >= k,
                 "ResNet: expected input [N, ", c, ", H, W] with H, W >= ", k, ", got ",
                 shape_str(x.sizes()));
  Tensor h = bn1->forward(conv1->forward(x)).relu();
  if (maxpool) h = maxpool->forward(h);
  for (const auto& stage : layers) h = stage->forward(h);
  // torchvision: avgpool = AdaptiveAvgPool2d((1, 1)) then flatten(1): the mean over H and W.
  return fc->forward(h.mean({2, 3}));
}

std::shared_ptr<ResNet> resnet18(int64_t num_classes) {
  return std::make_shared<ResNet>(ResNetOptions{
      .block = ResNetBlock::basic, .blocks = {2, 2, 2, 2}, .num_classes = num_classes});
}

std::shared_ptr<ResNet> resnet34(int64_t num_classes) {
  return std::make_shared<ResNet>(ResNetOptions{
      .block = ResNetBlock::basic, .blocks = {3, 4, 6, 3}, .num_classes = num_classes});
}

std::shared_ptr<ResNet> resnet50(int64_t num_classes) {
  return std::make_shared<ResNet>(ResNetOptions{
      .block = ResNetBlock::bottleneck, .blocks = {3, 4, 6, 3}, .num_classes = num_classes});
}

// Note [resnet_fashion size]
// One epoch of Fashion-MNIST (60,000 pictures, batch 128) should take a few minutes at most on 2
// CPU cores, evaluation included. Three stages of one BasicBlock at width 16 on the small stem
// cost 9.3 M multiply-adds per 28x28 picture forward (stem 0.1 M, stages 3.6, 2.8, 2.8 M;
// ResNet-20 for CIFAR: 41 M), about 1 minute an epoch (the measurement is in resnet.h). Two
// blocks per stage (16.5 M) doubled the measured time; the margin is kept for a shared machine.
ResNetOptions resnet_fashion_options() {
  return ResNetOptions{.block = ResNetBlock::basic,
                       .blocks = {1, 1, 1},
                       .num_classes = 10,
                       .in_channels = 1,
                       .width = 16,
                       .small_stem = true};
}

SL_REGISTER_MODEL("resnet18", [] { return resnet18(); });
SL_REGISTER_MODEL("resnet34", [] { return resnet34(); });
SL_REGISTER_MODEL("resnet50", [] { return resnet50(); });
SL_REGISTER_MODEL("resnet_fashion",
                  [] { return std::make_shared<ResNet>(resnet_fashion_options()); });

}  // namespace sl::models
