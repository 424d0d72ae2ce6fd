// DeepSpeech2 (Amodei et al. 2015, "Deep Speech 2: End-to-End Speech Recognition in English and
// Mandarin"), structured and named as the widely used PyTorch implementation deepspeech.pytorch
// (SeanNaren, deepspeech_pytorch/model.py), so that its checkpoints' tensors load by name:
//
//   conv.seq_module    MaskConv(Conv2d(1, c, (41, 11), stride (2, 2), padding (20, 5)),
//                      BatchNorm2d(c), Hardtanh(0, 20),
//                      Conv2d(c, c, (21, 11), stride (2, 1), padding (10, 5)),
//                      BatchNorm2d(c), Hardtanh(0, 20))       padded frames zeroed after each
//   rnns.0 .. rnns.L-1 BatchRNN: SequenceWise(BatchNorm1d) (batch_norm.module; absent on rnns.0),
//                      then LSTM or GRU (rnn), bidirectional with the two directions summed
//   lookahead          unidirectional only: Sequential(Lookahead(hidden, context) (lookahead.0,
//                      a depthwise Conv1d over the next `context` steps), Hardtanh(0, 20))
//   fc.0.module        SequenceWise(Sequential(BatchNorm1d(hidden), Linear(hidden, C, bias=False)))
//
// Input: a spectrogram [B, 1, F, T] (F frequency bins, T frames) and each sequence's frame count.
// The time axis shrinks by 2 (conv 1's time stride); the frequency axis by 4, so the first RNN
// takes c * F2 features, F2 = ((F - 1) / 2) / 2 + 1 (161 bins: 41 * 32 = 1312).
//
// Note [DeepSpeech2 padding]
// Padded frames are treated as deepspeech.pytorch treats them, so that batch statistics (train
// mode) and every output agree with it:
//  * the spectrogram itself is not masked: conv 1 at a sequence's last valid frames reads its
//    padded frames, as in the reference (its data loader pads with zeros, which makes a
//    sequence's outputs independent of its batch; pad with zeros too);
//  * after each of the six conv-stack modules, frames t >= output_length are set to 0 (MaskConv),
//    so BatchNorm2d's batch statistics count those zeros;
//  * the RNNs run with lengths (Note [RNN lengths] in nn/rnn.h) where the reference packs the
//    sequences; their outputs at padded steps are 0, as pad_packed_sequence's padding, so the
//    next layer's SequenceWise BatchNorm1d counts T'' * B rows, padded zeros included;
//  * pad_packed_sequence returns max(output_lengths) steps, so the time axis after the conv is
//    cut to T'' = max(output_lengths): that is T' = output_length(T) whenever some sequence fills
//    the batch (what a padding collate does), and shorter when none does.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "nn/containers.h"
#include "nn/conv.h"
#include "nn/module.h"
#include "nn/rnn.h"

namespace sl::models {

enum class DeepSpeech2RNN { lstm, gru };

struct DeepSpeech2Options {
  /// Spectrogram frequency bins F (deepspeech.pytorch: 16 kHz * 20 ms window / 2 + 1 = 161).
  int64_t num_features = 161;
  int64_t hidden_size = 1024;
  /// Recurrent layers (deepspeech.pytorch's hidden_layers).
  int64_t num_layers = 5;
  DeepSpeech2RNN rnn = DeepSpeech2RNN::lstm;
  /// Bidirectional RNNs (directions summed); unidirectional ones are followed by the lookahead.
  bool bidirectional = true;
  /// Output classes: the labels, CTC blank included (deepspeech.pytorch: "_'A..Z " = 29, blank 0).
  int64_t num_classes = 29;
  /// Channels of both convolutions (32 in deepspeech.pytorch).
  int64_t conv_channels = 32;
  /// Future steps the lookahead convolution sees (unidirectional only).
  int64_t lookahead_context = 20;
};

namespace deepspeech2 {

/// Applies `module` to x [T, N, H] as to [T * N, H]; returns [T, N, H'] (deepspeech.pytorch's
/// SequenceWise). Throws ShapeError unless x is 3-d.
class SequenceWise : public nn::Module {
 public:
  explicit SequenceWise(std::shared_ptr<nn::Module> module);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<nn::Module> module;
};

/// The conv stack with masking (deepspeech.pytorch's MaskConv): runs the children of seq_module
/// in order on x [B, C, F, T] and after each sets frames t >= lengths[b] of sample b to 0.
/// lengths has B entries (not checked: DeepSpeech2::forward checks them).
class MaskConv : public nn::Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using nn::Module::forward;
  explicit MaskConv(std::shared_ptr<nn::Sequential> seq_module);
  Tensor forward(const Tensor& x, const std::vector<int64_t>& lengths);
  std::shared_ptr<nn::Sequential> seq_module;
};

/// [SequenceWise(BatchNorm1d(input_size))], then one LSTM/GRU layer over x [T, B, input_size]
/// with lengths (int64 [B], each in [1, T]); returns [T, B, hidden] (the two directions summed
/// when bidirectional), zero at padded steps. Errors as nn::LSTM / nn::GRU.
class BatchRNN : public nn::Module {
 public:
  /// The one-tensor form stays visible (it throws ValueError: this module takes more inputs).
  using nn::Module::forward;
  BatchRNN(int64_t input_size, int64_t hidden_size, DeepSpeech2RNN kind, bool bidirectional,
           bool batch_norm);
  Tensor forward(const Tensor& x, const Tensor& lengths);
  std::shared_ptr<SequenceWise> batch_norm;  ///< null on the first layer
  std::shared_ptr<nn::LSTM> lstm;            ///< registered as "rnn" (one of the two is null)
  std::shared_ptr<nn::GRU> gru;
  const bool bidirectional;
};

/// Lookahead convolution (Wang et al. 2016): out[t, b, h] = sum_{k < context} w[h, 0, k] *
/// x[t + k, b, h], steps past the end read as 0. x [T, B, H] -> [T, B, H]. Parameter
/// conv.weight [H, 1, context] (a depthwise Conv1d without bias). Throws ValueError for
/// context < 1.
class Lookahead : public nn::Module {
 public:
  Lookahead(int64_t num_features, int64_t context);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<nn::Conv1d> conv;
  const int64_t context;
};

}  // namespace deepspeech2

/// The acoustic model. Throws ValueError at construction for a non-positive size, or a
/// lookahead_context < 1 when unidirectional.
class DeepSpeech2 : public nn::Module {
 public:
  explicit DeepSpeech2(DeepSpeech2Options opts = {});

  /// spect [B, 1, F, T] floating, lengths int64 [B] with each in [1, T] (frames per sequence,
  /// any order) -> (logits [T'', B, num_classes], output_lengths int64 [B] on the CPU), where
  /// T'' = max(output_lengths) (Note [DeepSpeech2 padding]). The logits are unnormalised: pass
  /// log_softmax(logits, -1) with output_lengths to nn::functional::ctc_loss (blank 0). Logits
  /// at steps >= output_lengths[b] are not meaningful. Throws ShapeError (spect not
  /// [B, 1, num_features, T] with B, T >= 1; lengths not [B]), DTypeError (lengths not int64),
  /// ValueError (a length outside [1, T]).
  std::pair<Tensor, Tensor> forward(const Tensor& spect, const Tensor& lengths);
  /// forward(spect, every length T).first.
  Tensor forward(const Tensor& spect) override;
  /// Frames after the conv stack for each input length (int64 [B] -> int64 [B], CPU), by the
  /// convolution arithmetic on the time axis: (L + 2 pad - kernel) / stride + 1 per conv,
  /// i.e. (L - 1) / 2 + 1. Throws DTypeError / ShapeError for lengths not int64 [B] (any B),
  /// ValueError for a length < 1.
  Tensor output_lengths(const Tensor& lengths) const;
  /// The same for one length (ValueError when frames < 1).
  static int64_t output_length(int64_t frames);
  /// Features the first RNN takes with these options: conv_channels * F2.
  static int64_t rnn_input_size(const DeepSpeech2Options& opts);

  const DeepSpeech2Options options;
  std::shared_ptr<deepspeech2::MaskConv> conv;
  std::shared_ptr<nn::ModuleList> rnns;       ///< of BatchRNN
  std::shared_ptr<nn::Sequential> lookahead;  ///< null when bidirectional
  std::shared_ptr<nn::Sequential> fc;

 private:
  std::vector<int64_t> checked_lengths(const Tensor& lengths, int64_t frames) const;
};

/// The registered models:
///  "deepspeech2"        deepspeech.pytorch's default: 161 bins, 5 bidirectional LSTM layers of
///                       1024, 29 classes, 32 conv channels (86.6M parameters).
///  "deepspeech2_small"  small enough to train on a CPU: 81 bins (8 kHz audio, 20 ms windows),
///                       16 conv channels, 2 bidirectional GRU layers of 128, 29 classes (about
///                       0.63M parameters).
DeepSpeech2Options deepspeech2_small_options();

}  // namespace sl::models
