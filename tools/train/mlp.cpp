// The demo job: a two-layer MLP on Fashion-MNIST, trained with autograd and plain SGD, written
// against the public API only (<shardlight/shardlight.h>). Prints the loss per epoch and the
// test accuracy.
//
//   sl_train --model mlp [--epochs 2] [--batch-size 64] [--lr 0.1] [--hidden 256] [--seed 0]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include <shardlight/shardlight.h>

#include "fashion_mnist.h"
#include "registry.h"

namespace sl::train {
namespace {

/// x [B, in] -> relu(x W1^T + b1) W2^T + b2 : [B, classes].
struct Mlp {
  Tensor w1, b1, w2, b2;

  Mlp(int64_t in, int64_t hidden, int64_t classes, Generator& gen) {
    // PyTorch's nn.Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
    auto uniform = [&gen](const Shape& shape, int64_t fan_in) {
      double k = 1.0 / std::sqrt(static_cast<double>(fan_in));
      Tensor t = empty(shape);
      t.uniform_(-k, k, &gen);
      t.requires_grad_();
      return t;
    };
    w1 = uniform({hidden, in}, in);
    b1 = uniform({hidden}, in);
    w2 = uniform({classes, hidden}, hidden);
    b2 = uniform({classes}, hidden);
  }

  Tensor forward(const Tensor& x) const { return linear(relu(linear(x, w1, b1)), w2, b2); }
  std::vector<Tensor*> parameters() { return {&w1, &b1, &w2, &b2}; }
};

/// Mean cross-entropy of logits [B, C] against one-hot targets [B, C]. log_softmax is written
/// as logits - logsumexp(logits) until the softmax family provides it fused.
Tensor cross_entropy(const Tensor& logits, const Tensor& one_hot) {
  Tensor log_probs = logits - logsumexp(logits, {1}, /*keepdim=*/true);
  return -(log_probs * one_hot).sum() / static_cast<double>(logits.size(0));
}

/// Rows `order[begin..end)` of the split, copied into a contiguous batch, plus one-hot targets.
struct Batch {
  Tensor x, one_hot;
};
Batch gather_batch(const ImageSplit& split, const std::vector<int64_t>& order, int64_t begin,
                   int64_t end, int64_t classes) {
  const int64_t b = end - begin, features = split.images.size(1);
  Batch out{empty({b, features}), zeros({b, classes})};
  const float* src = split.images.data_ptr<float>();
  const int64_t* labels = split.labels.data_ptr<int64_t>();
  float* x = out.x.data_ptr<float>();
  float* t = out.one_hot.data_ptr<float>();
  for (int64_t i = 0; i < b; ++i) {
    int64_t row = order[static_cast<size_t>(begin + i)];
    std::memcpy(x + i * features, src + row * features, sizeof(float) * features);
    t[i * classes + labels[row]] = 1.0f;
  }
  return out;
}

/// Fraction of the split classified correctly.
double accuracy(const Mlp& model, const ImageSplit& split) {
  NoGradGuard no_grad;
  const int64_t n = split.images.size(0), chunk = 2000;
  int64_t correct = 0;
  for (int64_t s = 0; s < n; s += chunk) {
    int64_t len = std::min(chunk, n - s);
    Tensor pred = argmax(model.forward(split.images.narrow(0, s, len)), 1);
    correct += eq(pred, split.labels.narrow(0, s, len)).sum().item<int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

FlagDocs mlp_flags() {
  return {{"hidden", "256", "hidden units"}};
}

int run_mlp(const Options& opt) {
  SL_CHECK(opt.strategy == "single", "mlp: strategy '", opt.strategy,
           "' is not available for this job (only 'single')");
  SL_CHECK(opt.device == "cpu", "mlp: only --device cpu is supported, got '", opt.device, "'");
  const int64_t batch = opt.batch_size > 0 ? opt.batch_size : 64;
  const double lr = opt.lr > 0 ? opt.lr : 0.1;
  const int64_t hidden = opt.get_int("hidden", 256);
  opt.check_all_read("mlp");
  const int64_t classes = 10;
  SL_CHECK(opt.epochs >= 1 && hidden >= 1, "mlp: need --epochs >= 1 and --hidden >= 1");

  auto t_start = std::chrono::steady_clock::now();
  FashionMnist data = load_fashion_mnist(opt.data_dir.empty() ? kFashionMnistDir : opt.data_dir);
  const int64_t n_train = data.train.images.size(0), features = data.train.images.size(1);
  std::printf("fashion-mnist: %lld train / %lld test images of %lld pixels (%.2f s)\n",
              static_cast<long long>(n_train), static_cast<long long>(data.test.images.size(0)),
              static_cast<long long>(features), seconds_since(t_start));
  std::printf("model: mlp %lld-%lld-%lld, relu, SGD lr %g, batch %lld, %d threads\n",
              static_cast<long long>(features), static_cast<long long>(hidden),
              static_cast<long long>(classes), lr, static_cast<long long>(batch),
              get_num_threads());

  Generator gen(opt.seed);
  Mlp model(features, hidden, classes, gen);
  double test_acc = 0;
  for (int epoch = 1; epoch <= opt.epochs; ++epoch) {
    auto t_epoch = std::chrono::steady_clock::now();
    std::vector<int64_t> order =
        randperm(n_train, {.dtype = DType::i64}, &gen).to_vector<int64_t>();
    double loss_sum = 0;
    int64_t steps = 0;
    for (int64_t s = 0; s < n_train; s += batch) {
      Batch b = gather_batch(data.train, order, s, std::min(s + batch, n_train), classes);
      Tensor loss = cross_entropy(model.forward(b.x), b.one_hot);
      loss.backward();
      {
        NoGradGuard no_grad;
        for (Tensor* p : model.parameters()) {
          p->sub_(p->grad(), lr);
          p->set_grad(Tensor());
        }
      }
      loss_sum += loss.item<double>();
      ++steps;
    }
    test_acc = accuracy(model, data.test);
    std::printf("epoch %d  loss %.4f  test accuracy %.2f%%  (%.1f s)\n", epoch,
                loss_sum / static_cast<double>(steps), 100.0 * test_acc, seconds_since(t_epoch));
    std::fflush(stdout);
  }
  std::printf("final test accuracy %.2f%% after %d epochs, %.1f s in all\n", 100.0 * test_acc,
              opt.epochs, seconds_since(t_start));
  return 0;
}

}  // namespace

SL_REGISTER_TRAIN_JOB("mlp", "two-layer MLP on Fashion-MNIST (autograd + plain SGD)", &run_mlp,
                      &mlp_flags);

}  // namespace sl::train
