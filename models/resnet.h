// ResNet (He et al. 2015) as torchvision.models.resnet builds it (v1.5: a Bottleneck strides on its
// 3x3 conv), with torchvision's parameter and buffer names, so a torchvision state dict loads
// strictly:
//
//   conv1 bn1 relu maxpool                      the stem (7x7 stride 2 conv, 3x3 stride 2 max pool)
//   layer1 ... layerS                           stages of residual blocks; stage i has width
//                                               width * 2^(i-1) (times the block's expansion at
//                                               its output) and strides 2 in its first block (i>1)
//   mean over H, W, fc                          torchvision's avgpool (AdaptiveAvgPool2d(1)) + fc
//
// Names: conv1.weight, bn1.running_mean, layer1.0.conv1.weight, layer2.0.downsample.0.weight,
// layer2.0.downsample.1.num_batches_tracked, fc.weight, ...
//
// Beyond torchvision's four stages of 64, 128, 256, 512 channels, ResNetOptions chooses the base
// width, the number of stages (the length of `blocks`), the input channels and a small-image stem
// (3x3 stride-1 conv1 and no max pool, as the CIFAR ResNets, for 28x28 / 32x32 pictures).
//
// Registered models (SL_REGISTER_MODEL):
//   resnet18, resnet34, resnet50   torchvision's (1000 classes, 3 channels, 224x224 ImageNet)
//   resnet_fashion                 Fashion-MNIST (1x28x28, 10 classes): BasicBlock, width 16,
//                                  small-image stem, three stages of one block each (16, 32, 64
//                                  channels at 28x28, 14x14, 7x7; 77,754 parameters). Measured
//                                  in the release build with 2 threads (on a loaded 2-core
//                                  machine): forward + backward + AdamW step of a batch of 128
//                                  takes 0.11-0.16 s, so one epoch (469 batches) is 1-1.3
//                                  minutes. Two blocks per stage measured 0.27-0.34 s a batch
//                                  (2.1-2.6 minutes an epoch); see Note [resnet_fashion size].
#pragma once

#include <memory>
#include <vector>

#include "nn/containers.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/normalization.h"
#include "nn/pooling.h"

namespace sl::models {

/// The residual block of a ResNet.
enum class ResNetBlock {
  basic,       ///< two 3x3 convs (ResNet-18/34), expansion 1
  bottleneck,  ///< 1x1, 3x3 (strided), 1x1 convs (ResNet-50/101/152), expansion 4
};

struct ResNetOptions {
  ResNetBlock block = ResNetBlock::basic;
  /// Blocks per stage; its length is the number of stages (torchvision: 4).
  std::vector<int64_t> blocks = {2, 2, 2, 2};
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  /// Channels of the stem and of the first stage; stage i has width * 2^(i-1).
  int64_t width = 64;
  /// conv1 3x3 stride 1 padding 1 and no max pool, for small pictures (28x28, 32x32); otherwise
  /// torchvision's conv1 7x7 stride 2 padding 3 and MaxPool2d(3, 2, 1).
  bool small_stem = false;
  /// Zero the weight of the last BatchNorm of every block (bn2 of a BasicBlock, bn3 of a
  /// Bottleneck), so that each residual branch starts at zero, as torchvision's flag.
  bool zero_init_residual = false;
};

/// conv1 3x3 (stride) bn1 relu conv2 3x3 bn2, plus the shortcut, then relu. The shortcut is
/// `downsample` = Sequential(Conv2d 1x1 (stride, no bias), BatchNorm2d) when stride != 1 or
/// inplanes != planes (null otherwise: identity). Throws ValueError for non-positive sizes.
/// forward(x [N, inplanes, H, W]) -> [N, planes, ceil(H / stride), ceil(W / stride)]; errors as
/// the layers (ShapeError for a wrong channel count).
class BasicBlock : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t inplanes, int64_t planes, int64_t stride = 1);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Sequential> downsample;  ///< null when the shortcut is the identity
};

/// conv1 1x1 bn1 relu conv2 3x3 (stride) bn2 relu conv3 1x1 (planes -> 4 planes) bn3, plus the
/// shortcut (as BasicBlock's, with 4 planes output channels), then relu: torchvision's v1.5.
/// forward(x [N, inplanes, H, W]) -> [N, 4 planes, ceil(H / stride), ceil(W / stride)].
class Bottleneck : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t inplanes, int64_t planes, int64_t stride = 1);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<nn::Conv2d> conv1, conv2, conv3;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2, bn3;
  std::shared_ptr<nn::Sequential> downsample;  ///< null when the shortcut is the identity
};

/// A ResNet classifier. Initialised as torchvision: every conv weight kaiming_normal_(fan_out,
/// relu), BatchNorm weight 1 and bias 0, fc PyTorch's Linear default; then zero_init_residual.
/// The constructor throws ValueError for empty `blocks` or more than 16 stages, a non-positive
/// block count, width, in_channels or num_classes.
class ResNet : public nn::Module {
 public:
  explicit ResNet(ResNetOptions opts = {});
  /// x [N, in_channels, H, W] -> logits [N, num_classes]. Throws ShapeError naming ResNet, the
  /// expected and the actual shape when x is not 4-d, has another channel count, or is smaller
  /// than the stem's kernel (H or W < 7, or < 3 with the small stem; PyTorch would pad such a
  /// picture into the stem anyway, but it is almost all padding and usually a layout mistake).
  Tensor forward(const Tensor& x) override;
  /// The smallest H and W forward accepts (the stem's kernel size).
  int64_t min_input_size() const;
  /// Output channels of the last stage (fc's in_features).
  int64_t feature_channels() const;

  const ResNetOptions options;
  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::MaxPool2d> maxpool;               ///< null with the small stem
  std::vector<std::shared_ptr<nn::Sequential>> layers;  ///< "layer1", "layer2", ...
  std::shared_ptr<nn::Linear> fc;
};

/// Factories of the registered models (also reachable through models::create_model).
std::shared_ptr<ResNet> resnet18(int64_t num_classes = 1000);
std::shared_ptr<ResNet> resnet34(int64_t num_classes = 1000);
std::shared_ptr<ResNet> resnet50(int64_t num_classes = 1000);
/// The options of "resnet_fashion" (see the header comment).
ResNetOptions resnet_fashion_options();

}  // namespace sl::models
