// Training-step timings of the model zoo (models/registry.h) on the CPU, printed as
// "case<TAB>ms" lines; tools/bench_zoo.sh runs each case next to the same model in PyTorch
// (tools/bench_zoo.py: torchvision's ResNets, Hugging Face's BertForMaskedLM,
// deepspeech.pytorch's DeepSpeech2) and prints the ratios.
//
//   build/tools/bench_zoo [--threads N] [--filter SUBSTR | --case NAME] [--reps R] [--list]
//                         [--blas-core]
//
// One iteration is one training step as a training loop runs it: gradients set to none
// (zero_grad), forward in training mode (BatchNorm batch statistics, BERT's dropout 0.1), the
// loss, backward, and one AdamW step (lr 1e-3, weight decay 0.01) over every parameter. Timed as
// tools/bench_cases.h says: one warm-up step (it also allocates AdamW's state), then the median
// of R steps (R = 1 for bert_base, whose step takes seconds). The inputs are random, drawn once
// in the set-up. The sizes, each realistic and a few seconds a step or less on 2 cores (bert_base:
// 7-13 s here):
//   resnet18 b8 3x224x224       ImageNet's training resolution, at a per-core batch a CPU holds
//   resnet50 b8 3x112x112       the bottleneck blocks at a quarter of ImageNet's pixels, so that
//                               a step stays near ResNet-18's
//   bert_mini_mlm b8 L128       BERT's pre-training phase-1 sequence length, the MLM loss over
//                               every position as HF computes it (the decoder to 30522 tokens
//                               is most of the work at this width)
//   bert_base b8 L128           the same with bert-base's 12 layers of 768 (110M parameters)
//   deepspeech2_small b16 T500  5 s utterances (10 ms frames, 81 bins), a batch of 16 sorted by
//                               length (500 down to 375 frames), CTC loss
//   fashion_cnn b128 1x28x28    the trainer's default job (sl_train --model cnn, batch 128):
//                               small ops, where per-op overhead shows
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <shardlight/shardlight.h>

#include "bench_cases.h"
#include "models/bert.h"
#include "models/deepspeech2.h"
#include "models/fashion_cnn.h"
#include "models/resnet.h"
#include "nn/loss.h"

using namespace sl;
using bench::Case;

namespace {

/// One training step of `model` (set to training mode here) on the loss `loss(model)`, with an
/// AdamW over model.parameters().
template <class M>
std::function<void()> train_step(std::shared_ptr<M> model, std::function<Tensor(M&)> loss) {
  model->train();
  auto opt = std::make_shared<optim::AdamW>(model->parameters(),
                                            optim::AdamWOptions{.lr = 1e-3, .weight_decay = 0.01});
  return [model, opt, loss] {
    opt->zero_grad();
    loss(*model).backward();
    opt->step();
  };
}

/// Cross entropy of an image classifier on a batch [b, c, hw, hw] of N(0, 1) pixels and
/// uniform class targets.
template <class M>
std::function<void()> classifier_step(std::shared_ptr<M> model, int64_t b, int64_t c, int64_t hw,
                                      int64_t classes) {
  Tensor x = randn({b, c, hw, hw});
  Tensor y = randint(0, classes, {b}, {.dtype = DType::i64});
  return train_step<M>(model,
                       [x, y](M& m) { return nn::functional::cross_entropy(m.forward(x), y); });
}

/// BertForMaskedLM's loss as Hugging Face computes it from `labels`: logits at every position,
/// cross entropy over the positions whose label is not -100. Uniform token ids; each position
/// is predicted (labelled with its id) with probability 0.15, as BERT's masking.
std::function<void()> bert_mlm_step(const models::BertConfig& config, int64_t b, int64_t len) {
  auto model = std::make_shared<models::BertForMaskedLM>(config);
  Tensor ids = randint(0, config.vocab_size, {b, len}, {.dtype = DType::i64});
  Tensor chosen = rand({b, len}).lt(0.15);
  Tensor labels = where(chosen, ids, full({b, len}, int64_t{-100}, {.dtype = DType::i64}));
  const int64_t vocab = config.vocab_size;
  return train_step<models::BertForMaskedLM>(
      model, [ids, labels, b, len, vocab](models::BertForMaskedLM& m) {
        return nn::functional::cross_entropy(m.forward(ids).reshape({b * len, vocab}),
                                             labels.reshape({b * len}));
      });
}

/// DeepSpeech2 with the speech job's loss (ctc_loss of log_softmax(logits), blank 0, "mean",
/// zero_infinity) on N(0, 1) spectrograms [b, 1, F, frames]. The utterances' lengths fall
/// evenly from `frames` to 3/4 of it, longest first (a batch of a length-sorted loader); each
/// transcript has one label in [1, 28] per 4 output steps (about 12 characters a second).
std::function<void()> deepspeech2_step(const models::DeepSpeech2Options& opts, int64_t b,
                                       int64_t frames) {
  auto model = std::make_shared<models::DeepSpeech2>(opts);
  Tensor spect = randn({b, 1, opts.num_features, frames});
  std::vector<int64_t> lengths(b), target_lengths(b);
  for (int64_t i = 0; i < b; ++i) {
    lengths[i] = frames - (frames / 4) * i / std::max<int64_t>(b - 1, 1);
    target_lengths[i] = models::DeepSpeech2::output_length(lengths[i]) / 4;
  }
  const int64_t s = target_lengths[0];
  Tensor len_t = from_vector(lengths, {b});
  Tensor tlen_t = from_vector(target_lengths, {b});
  Tensor targets = randint(1, opts.num_classes, {b, s}, {.dtype = DType::i64});
  return train_step<models::DeepSpeech2>(
      model, [spect, len_t, tlen_t, targets](models::DeepSpeech2& m) {
        auto [logits, out_lengths] = m.forward(spect, len_t);
        return nn::functional::ctc_loss(log_softmax(logits, -1), targets, out_lengths, tlen_t, 0,
                                        nn::Reduction::mean, true);
      });
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  cs.push_back({"resnet18 b8 3x224x224", 3,
                [] { return classifier_step(models::resnet18(), 8, 3, 224, 1000); }});
  cs.push_back({"resnet50 b8 3x112x112", 3,
                [] { return classifier_step(models::resnet50(), 8, 3, 112, 1000); }});
  cs.push_back({"bert_mini_mlm b8 L128", 3,
                [] { return bert_mlm_step(models::bert_mini_config(), 8, 128); }});
  cs.push_back(
      {"bert_base b8 L128", 1, [] { return bert_mlm_step(models::bert_base_config(), 8, 128); }});
  cs.push_back({"deepspeech2_small b16 T500", 3,
                [] { return deepspeech2_step(models::deepspeech2_small_options(), 16, 500); }});
  cs.push_back({"fashion_cnn b128 1x28x28", 10, [] {
                  return classifier_step(std::make_shared<models::FashionCNN>(), 128, 1, 28, 10);
                }});
  return cs;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::bench_main(argc, argv, cases());
}
