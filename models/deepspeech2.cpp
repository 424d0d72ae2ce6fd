#include "models/deepspeech2.h"

#include <algorithm>

#include "autograd/ops/shape.h"
#include "core/creation.h"
#include "models/registry.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/normalization.h"

namespace sl::models {

namespace {

// The two convolutions' geometry (frequency, time), shared by the layers and by the length
// arithmetic so the two cannot disagree.
struct ConvGeometry {
  int64_t kernel_f, kernel_t, stride_f, stride_t, pad_f, pad_t;
};
constexpr ConvGeometry kConvs[2] = {{41, 11, 2, 2, 20, 5}, {21, 11, 2, 1, 10, 5}};

// PyTorch's conv output size (dilation 1): floor((n + 2 pad - kernel) / stride) + 1; the numerator
// is >= 0 for every n >= 1 with these geometries.
int64_t conv_out(int64_t n, int64_t kernel, int64_t stride, int64_t pad) {
  return (n + 2 * pad - kernel) / stride + 1;
}

}  // namespace

namespace deepspeech2 {

SequenceWise::SequenceWise(std::shared_ptr<nn::Module> m) : Module("SequenceWise") {
  module = register_module("module", std::move(m));
}

Tensor SequenceWise::forward(const Tensor& x) {
  SL_CHECK_SHAPE(x.dim() == 3, "SequenceWise: expected [T, N, H], got ", shape_str(x.sizes()));
  int64_t t = x.size(0), n = x.size(1);
  Tensor y = module->forward(x.reshape({t * n, x.size(2)}));
  return y.reshape({t, n, y.numel() / std::max<int64_t>(t * n, 1)});
}

MaskConv::MaskConv(std::shared_ptr<nn::Sequential> seq) : Module("MaskConv") {
  seq_module = register_module("seq_module", std::move(seq));
}

Tensor MaskConv::forward(const Tensor& input, const std::vector<int64_t>& lengths) {
  // mask [B, 1, 1, T]: true at padded frames; rebuilt only if a module changes T.
  Tensor mask;
  Tensor x = input;
  for (const auto& m : seq_module->children()) {
    x = m->forward(x);
    int64_t frames = x.size(3);
    if (!mask.defined() || mask.size(3) != frames) {
      Tensor len = from_vector(lengths, {static_cast<int64_t>(lengths.size()), 1, 1, 1});
      mask = arange(frames).view({1, 1, 1, frames}).ge(len).to(x.device());
    }
    x = x.masked_fill(mask, 0);
  }
  return x;
}

BatchRNN::BatchRNN(int64_t input_size, int64_t hidden_size, DeepSpeech2RNN kind, bool bidir,
                   bool with_batch_norm)
    : Module("BatchRNN"), bidirectional(bidir) {
  if (with_batch_norm) {
    batch_norm = register_module("batch_norm", std::make_shared<SequenceWise>(
                                                   std::make_shared<nn::BatchNorm1d>(input_size)));
  }
  nn::RNNOptions ro{.bidirectional = bidir};
  if (kind == DeepSpeech2RNN::lstm) {
    lstm = register_module("rnn", std::make_shared<nn::LSTM>(input_size, hidden_size, ro));
  } else {
    gru = register_module("rnn", std::make_shared<nn::GRU>(input_size, hidden_size, ro));
  }
}

Tensor BatchRNN::forward(const Tensor& input, const Tensor& lengths) {
  Tensor x = batch_norm ? batch_norm->forward(input) : input;
  Tensor y = lstm ? std::get<0>(lstm->forward(x, Tensor(), Tensor(), lengths))
                  : gru->forward(x, Tensor(), lengths).first;
  if (bidirectional) {  // [T, B, 2H] -> [T, B, 2, H] -> sum of the directions
    y = y.reshape({y.size(0), y.size(1), 2, y.size(2) / 2}).sum({2});
  }
  return y;
}

Lookahead::Lookahead(int64_t num_features, int64_t ctx) : Module("Lookahead"), context(ctx) {
  SL_CHECK(ctx >= 1, "Lookahead: context must be >= 1, got ", ctx);
  conv = register_module("conv", std::make_shared<nn::Conv1d>(
                                     num_features, num_features, ctx,
                                     nn::Conv1dOptions{.groups = num_features, .bias = false}));
}

Tensor Lookahead::forward(const Tensor& x) {
  SL_CHECK_SHAPE(x.dim() == 3, "Lookahead: expected [T, B, H], got ", shape_str(x.sizes()));
  // [T, B, H] -> [B, H, T], zeros after the last step, depthwise conv, back to [T, B, H].
  Tensor y = sl::pad(x.permute({1, 2, 0}), {0, context - 1});
  return conv->forward(y).permute({2, 0, 1}).contiguous();
}

}  // namespace deepspeech2

DeepSpeech2::DeepSpeech2(DeepSpeech2Options o) : Module("DeepSpeech2"), options(o) {
  using namespace sl::nn;
  SL_CHECK(o.num_features >= 1 && o.hidden_size >= 1 && o.num_layers >= 1 && o.num_classes >= 1 &&
               o.conv_channels >= 1,
           "DeepSpeech2: num_features, hidden_size, num_layers, num_classes and conv_channels "
           "must be positive, got ",
           o.num_features, ", ", o.hidden_size, ", ", o.num_layers, ", ", o.num_classes, ", ",
           o.conv_channels);
  SL_CHECK(o.bidirectional || o.lookahead_context >= 1,
           "DeepSpeech2: lookahead_context must be >= 1 for a unidirectional model, got ",
           o.lookahead_context);
  int64_t c = o.conv_channels;
  auto conv2d = [](int64_t in, int64_t out, const ConvGeometry& g) {
    return std::make_shared<Conv2d>(
        in, out, ExpandingArray<2>{g.kernel_f, g.kernel_t},
        Conv2dOptions{.stride = {g.stride_f, g.stride_t}, .padding = {g.pad_f, g.pad_t}});
  };
  conv = register_module(
      "conv", std::make_shared<deepspeech2::MaskConv>(
                  std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
                      conv2d(1, c, kConvs[0]), std::make_shared<BatchNorm2d>(c),
                      std::make_shared<Hardtanh>(0.0, 20.0), conv2d(c, c, kConvs[1]),
                      std::make_shared<BatchNorm2d>(c), std::make_shared<Hardtanh>(0.0, 20.0)})));
  rnns = register_module("rnns", std::make_shared<ModuleList>());
  for (int64_t l = 0; l < o.num_layers; ++l) {
    rnns->push_back(std::make_shared<deepspeech2::BatchRNN>(
        l == 0 ? rnn_input_size(o) : o.hidden_size, o.hidden_size, o.rnn, o.bidirectional,
        /*batch_norm=*/l > 0));
  }
  if (!o.bidirectional) {
    lookahead = register_module(
        "lookahead",
        std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
            std::make_shared<deepspeech2::Lookahead>(o.hidden_size, o.lookahead_context),
            std::make_shared<Hardtanh>(0.0, 20.0)}));
  }
  fc = register_module(
      "fc",
      std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
          std::make_shared<deepspeech2::SequenceWise>(
              std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
                  std::make_shared<BatchNorm1d>(o.hidden_size),
                  std::make_shared<Linear>(o.hidden_size, o.num_classes, /*bias=*/false)}))}));
}

int64_t DeepSpeech2::output_length(int64_t frames) {
  SL_CHECK(frames >= 1, "DeepSpeech2: a sequence needs at least 1 frame, got ", frames);
  for (const auto& g : kConvs) frames = conv_out(frames, g.kernel_t, g.stride_t, g.pad_t);
  return frames;
}

int64_t DeepSpeech2::rnn_input_size(const DeepSpeech2Options& o) {
  int64_t f = o.num_features;
  for (const auto& g : kConvs) f = conv_out(f, g.kernel_f, g.stride_f, g.pad_f);
  return o.conv_channels * f;
}

Tensor DeepSpeech2::output_lengths(const Tensor& lengths) const {
  SL_CHECK(lengths.defined(), "DeepSpeech2: lengths are undefined");
  SL_CHECK_DTYPE(lengths.dtype() == DType::i64, "DeepSpeech2: lengths must be int64, got ",
                 dtype_name(lengths.dtype()));
  SL_CHECK_SHAPE(lengths.dim() == 1, "DeepSpeech2: lengths must be 1-d [B], got ",
                 shape_str(lengths.sizes()));
  std::vector<int64_t> out = lengths.to_vector<int64_t>();
  for (int64_t& v : out) v = output_length(v);
  return from_vector(out, {static_cast<int64_t>(out.size())});
}

std::vector<int64_t> DeepSpeech2::checked_lengths(const Tensor& lengths, int64_t frames) const {
  SL_CHECK(lengths.defined(), "DeepSpeech2: lengths are undefined");
  SL_CHECK_DTYPE(lengths.dtype() == DType::i64, "DeepSpeech2: lengths must be int64, got ",
                 dtype_name(lengths.dtype()));
  std::vector<int64_t> v = lengths.to_vector<int64_t>();
  for (size_t b = 0; b < v.size(); ++b) {
    SL_CHECK(v[b] >= 1 && v[b] <= frames, "DeepSpeech2: length ", v[b], " of sequence ", b,
             " is outside [1, ", frames, "] (the spectrogram has ", frames, " frames)");
  }
  return v;
}

std::pair<Tensor, Tensor> DeepSpeech2::forward(const Tensor& spect, const Tensor& lengths) {
  SL_CHECK(spect.defined(), "DeepSpeech2: the spectrogram is undefined");
  SL_CHECK_SHAPE(spect.dim() == 4 && spect.size(1) == 1 && spect.size(2) == options.num_features,
                 "DeepSpeech2: expected a spectrogram [B, 1, ", options.num_features, ", T], got ",
                 shape_str(spect.sizes()));
  int64_t B = spect.size(0), T = spect.size(3);
  SL_CHECK_SHAPE(B >= 1 && T >= 1, "DeepSpeech2: too few frames or sequences: spectrogram ",
                 shape_str(spect.sizes()), " (need B >= 1 and T >= 1)");
  SL_CHECK_SHAPE(lengths.defined() && lengths.dim() == 1 && lengths.size(0) == B,
                 "DeepSpeech2: expected lengths [", B, "], got ",
                 lengths.defined() ? shape_str(lengths.sizes()) : std::string("undefined"));
  std::vector<int64_t> out_lens = checked_lengths(lengths, T);
  for (int64_t& v : out_lens) v = output_length(v);
  Tensor out_lengths = from_vector(out_lens, {B});

  Tensor x = conv->forward(spect, out_lens);  // [B, C, F2, T']
  // pad_packed_sequence's time axis: the longest output (Note [DeepSpeech2 padding]).
  int64_t steps = *std::max_element(out_lens.begin(), out_lens.end());
  if (steps < x.size(3)) x = x.narrow(3, 0, steps);
  // [B, C, F2, T''] -> [B, C * F2, T''] -> [T'', B, C * F2] (feature index c * F2 + f).
  x = x.reshape({B, x.size(1) * x.size(2), steps}).permute({2, 0, 1}).contiguous();
  for (const auto& layer : rnns->children()) {
    x = std::static_pointer_cast<deepspeech2::BatchRNN>(layer)->forward(x, out_lengths);
  }
  if (lookahead) x = lookahead->forward(x);
  return {fc->forward(x), out_lengths};
}

Tensor DeepSpeech2::forward(const Tensor& spect) {
  SL_CHECK(spect.defined(), "DeepSpeech2: the spectrogram is undefined");
  SL_CHECK_SHAPE(spect.dim() == 4, "DeepSpeech2: expected a spectrogram [B, 1, ",
                 options.num_features, ", T], got ", shape_str(spect.sizes()));
  return forward(spect, full({spect.size(0)}, spect.size(3), {.dtype = DType::i64})).first;
}

DeepSpeech2Options deepspeech2_small_options() {
  return {.num_features = 81,
          .hidden_size = 128,
          .num_layers = 2,
          .rnn = DeepSpeech2RNN::gru,
          .bidirectional = true,
          .num_classes = 29,
          .conv_channels = 16};
}

SL_REGISTER_MODEL("deepspeech2", [] { return std::make_shared<DeepSpeech2>(); });
SL_REGISTER_MODEL("deepspeech2_small",
                  [] { return std::make_shared<DeepSpeech2>(deepspeech2_small_options()); });

}  // namespace sl::models
