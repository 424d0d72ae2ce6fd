// The ResNet job: a small ResNet (models/resnet.h, "resnet_fashion": BasicBlocks, the small-image
// stem) on Fashion-MNIST through the image-classification loop of image_classifier.h and
// supervised.h (AdamW + cosine, any strategy, a sharded checkpoint each epoch, --resume 1).
//
//   sl_train --model resnet [the loop's flags] [--width 16] [--blocks 1,1,1]
//            [--block basic|bottleneck]
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "image_classifier.h"
#include "models/resnet.h"
#include "registry.h"
#include "supervised.h"

namespace sl::train {
namespace {

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(v[i]);
  }
  return s;
}

FlagDocs resnet_flags() {
  return join_flags({{"width", "16", "channels of the first stage (doubling per stage)"},
                     {"blocks", "1,1,1", "blocks per stage"},
                     {"block", "basic", "basic or bottleneck"}},
                    loop_flags());
}

int run_resnet(const Options& opt) {
  models::ResNetOptions mo = models::resnet_fashion_options();
  mo.width = opt.get_int("width", mo.width);
  const std::string blocks = opt.get_string("blocks", join(mo.blocks));
  SL_CHECK(!blocks.empty(), "resnet: --blocks '", blocks, "' names no stage");
  const auto counts = parse_positive_ints(blocks, /*increasing=*/false);
  SL_CHECK(counts.has_value(), "resnet: --blocks '", blocks,
           "' must be positive block counts separated by commas, e.g. 1,1,1");
  mo.blocks = *counts;
  const std::string block =
      opt.get_string("block", mo.block == models::ResNetBlock::basic ? "basic" : "bottleneck");
  SL_CHECK(block == "basic" || block == "bottleneck", "resnet: --block must be basic or ",
           "bottleneck, got '", block, "'");
  mo.block = block == "basic" ? models::ResNetBlock::basic : models::ResNetBlock::bottleneck;
  SL_CHECK(mo.width >= 1, "resnet: --width must be >= 1, got ", mo.width);
  return run_image_classifier(opt, "resnet",
                              "ResNet(" + block + ", width " + std::to_string(mo.width) +
                                  ", blocks " + join(mo.blocks) + ", small stem)",
                              serialize::Json::object({{"block", block},
                                                       {"width", static_cast<long long>(mo.width)},
                                                       {"blocks", join(mo.blocks)}}),
                              [mo] { return std::make_shared<models::ResNet>(mo); });
}

}  // namespace

SL_REGISTER_TRAIN_JOB("resnet",
                      "Fashion-MNIST ResNet (BasicBlocks, small stem), AdamW + cosine, --strategy "
                      "single|dp|ddp|zero1|zero2, checkpoint each epoch, --resume 1",
                      &run_resnet, &resnet_flags);

}  // namespace sl::train
