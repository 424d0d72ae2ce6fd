// The training loop of the image-classification jobs (cnn, resnet): a model from the job trained
// on Fashion-MNIST with AdamW and a cosine learning-rate schedule through dist::Strategy, so one
// flag picks the parallel mode and nothing else changes. A sharded checkpoint (dist/checkpoint.h)
// is written after every epoch; `--resume 1` continues from it, with any world size and mode.
//
//   sl_train --model JOB [--strategy single|dp|ddp|zero1|zero2] [--epochs 2] [--batch-size 128]
//            [--lr 0.002] [--seed 0] [--data-dir DIR] [--checkpoint-dir checkpoints/JOB]
//            [--resume 0|1] [--weight-decay 0.01] [--stop-after-epochs K] [--dp-replicas 2]
//            [--log-every 100] [--device cpu|cuda|cuda:N] [--max-grad-norm 0]
//            (plus the job's own model flags)
//
// --device cuda trains on a GPU: cuda:N, or with plain "cuda" GPU (rank mod the visible GPUs)
// for each rank; ddp/zero1/zero2 ranks then exchange gradients over NCCL (one GPU per rank), dp
// spreads its replicas over cuda:N, cuda:N+1, ... Batches are copied to the device each step;
// checkpoints hold CPU tensors, so a run may resume on another device.
// --batch-size is the global batch: each of N ranks takes its 1/N share of every global batch
// (dist::DistributedLoader), so the examples seen per step do not depend on N. Weight decay
// applies to conv and linear weights, not to biases and BatchNorm parameters (optim::
// split_no_decay: names containing "bias", and parameters of fewer than 2 dims). The schedule
// anneals from --lr to 0 over all steps of all epochs, stepped once per batch.
// On resume, the run continues exactly where the checkpoint's epoch ended: bit for bit on CPU
// with the same world size and mode (the final "state digest" lines then agree), and with the
// same data order at any other world size or mode.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "nn/module.h"
#include "nn/serialize/json.h"
#include "registry.h"

namespace sl::train {

/// What an image-classification job brings to the shared loop.
struct ImageClassifierJob {
  /// The job's name: the prefix of its messages and its default checkpoint folder's name.
  std::string name;
  /// The model as printed in the run's "model:" line, e.g. "FashionCNN(32, 64, 128)".
  std::string description;
  /// The model's settings; a checkpoint resumes only into a run with equal settings.
  serialize::Json config;
  /// A new model taking [N, 1, 28, 28] images to [N, 10] logits; called once per replica, after
  /// the job's seed is set (the same initial model on every rank).
  std::function<std::shared_ptr<nn::Module>()> make_model;
};

/// Runs the loop for `opt` (see the file comment); returns the exit code. Throws ValueError /
/// DeviceError / IOError for bad flags, devices or data, with messages that start with the job's
/// name.
int run_image_classifier(const Options& opt, const ImageClassifierJob& job);

}  // namespace sl::train
