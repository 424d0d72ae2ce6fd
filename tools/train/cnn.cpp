// The main job: the Fashion-MNIST CNN (models/fashion_cnn.h: Conv, BatchNorm, ReLU, MaxPool,
// Linear) through the image-classification loop of image_classifier.h and supervised.h (AdamW +
// cosine, any strategy, a sharded checkpoint each epoch, --resume 1).
//
//   mpirun -np 2 --oversubscribe sl_train --model cnn --strategy zero2   (the README's command)
//   sl_train --model cnn [the loop's flags] [--channels1 32] [--channels2 64] [--hidden 128]
#include <memory>
#include <string>

#include "image_classifier.h"
#include "models/fashion_cnn.h"
#include "registry.h"
#include "supervised.h"

namespace sl::train {
namespace {

FlagDocs cnn_flags() {
  return join_flags({{"channels1", "32", "channels of the first conv"},
                     {"channels2", "64", "channels of the second conv"},
                     {"hidden", "128", "units of the hidden linear layer"}},
                    loop_flags());
}

int run_cnn(const Options& opt) {
  const models::FashionCNNOptions mo{.channels1 = opt.get_int("channels1", 32),
                                     .channels2 = opt.get_int("channels2", 64),
                                     .hidden = opt.get_int("hidden", 128)};
  return run_image_classifier(
      opt, "cnn",
      "FashionCNN(" + std::to_string(mo.channels1) + ", " + std::to_string(mo.channels2) + ", " +
          std::to_string(mo.hidden) + ")",
      serialize::Json::object({{"channels1", static_cast<long long>(mo.channels1)},
                               {"channels2", static_cast<long long>(mo.channels2)},
                               {"hidden", static_cast<long long>(mo.hidden)}}),
      [mo] { return std::make_shared<models::FashionCNN>(mo); });
}

}  // namespace

SL_REGISTER_TRAIN_JOB("cnn",
                      "Fashion-MNIST CNN, AdamW + cosine, --strategy single|dp|ddp|zero1|zero2, "
                      "checkpoint each epoch, --resume 1",
                      &run_cnn, &cnn_flags);

}  // namespace sl::train
