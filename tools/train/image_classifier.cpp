// Fashion-MNIST classification through the supervised loop (see image_classifier.h).
#include "image_classifier.h"

#include <cstdio>
#include <utility>

#include "fashion_mnist.h"
#include "models/classifier.h"
#include "nn/loss.h"
#include "supervised.h"

namespace sl::train {

int run_image_classifier(const Options& opt, const std::string& name,
                         const std::string& description, const serialize::Json& config,
                         std::function<std::shared_ptr<nn::Module>()> make_model) {
  SupervisedJob job{.name = name, .description = description, .config = config};
  job.load_data = [&opt] {
    FashionMnist data = load_fashion_mnist(opt.data_dir.empty() ? kFashionMnistDir : opt.data_dir);
    auto as_dataset = [](const ImageSplit& s) {
      return std::make_shared<nn::TensorDataset>(
          TensorList{s.images.view({s.images.size(0), 1, 28, 28}), s.labels});
    };
    JobData d{as_dataset(data.train), as_dataset(data.test), ""};
    char line[128];
    std::snprintf(line, sizeof line, "fashion-mnist: %lld train / %lld test images",
                  static_cast<long long>(d.train->size()), static_cast<long long>(d.test->size()));
    d.summary = line;
    return d;
  };
  job.make_model = std::move(make_model);
  job.loss = [](dist::Strategy& strategy, const TensorList& b, const Device& device, int64_t) {
    return nn::functional::cross_entropy(strategy.forward(b[0].to(device)), b[1].to(device));
  };
  job.evaluate = [](nn::Module& model, const nn::Dataset& test, int64_t begin, int64_t end) {
    return std::pair<int64_t, int64_t>(models::count_correct(model, test, begin, end), end - begin);
  };
  return run_supervised(opt, job);
}

}  // namespace sl::train
