// DeepSpeech2 (models/deepspeech2.h) against deepspeech.pytorch's model, as rewritten in
// tools/gen_deepspeech2_fixtures.py (which lists what it changes), by f64 gradcheck, and by
// hand-derived conv arithmetic.
#include <algorithm>
#include <set>

#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/ops/index.h"
#include "autograd/ops/shape.h"
#include "autograd/ops/softmax.h"
#include "models/deepspeech2.h"
#include "models/registry.h"
#include "nn/fixture.h"
#include "nn/loss.h"
#include "support/testing.h"

using namespace sl;
using models::DeepSpeech2;
using models::DeepSpeech2Options;
using models::DeepSpeech2RNN;

namespace {

namespace F = nn::functional;

// The fixtures' tiny configuration (run_case's defaults in the generation script): 12 bins,
// 3 conv channels (rnn input 3 * 3 = 9), hidden 8, 2 layers, 5 classes, lookahead context 3.
DeepSpeech2Options tiny(DeepSpeech2RNN rnn, bool bidirectional) {
  return {.num_features = 12,
          .hidden_size = 8,
          .num_layers = 2,
          .rnn = rnn,
          .bidirectional = bidirectional,
          .num_classes = 5,
          .conv_channels = 3,
          .lookahead_context = 3};
}

// The reference's loss: ctc_loss(log_softmax(logits), blank 0, "sum", zero_infinity).
Tensor ctc(const Tensor& logits, const Tensor& targets, const Tensor& out_lengths,
           const Tensor& target_lengths) {
  return F::ctc_loss(log_softmax(logits, -1), targets, out_lengths, target_lengths, 0,
                     nn::Reduction::sum, true);
}

// Samples in the order `perm` (index_select along `dim`).
Tensor permuted(const Tensor& t, const std::vector<int64_t>& perm, int64_t dim) {
  return index_select(t, dim, from_vector(perm, {static_cast<int64_t>(perm.size())}));
}

// Tolerances of the float32 parity checks. Both sides run the same float32 arithmetic in a
// different order (41 * 11 and 3 * 21 * 11 term conv sums, BatchNorm's mean/variance over up to
// 252 values, two recurrent layers, the CTC forward-backward in log space), so values differ by
// a few float32 ulps per step, compounded through ~10 layers: observed ~1e-6 relative on the
// logits and losses. rtol 1e-4 / atol 1e-5 leaves a wide margin, while a wrong mask, a missed
// padded row in BatchNorm or a swapped direction moves values by 1e-2 or more.
constexpr double kRtol = 1e-4, kAtol = 1e-5;

// A gradient is a sum over every position and sample, so its float32 rounding error scales with
// the size of the terms summed, i.e. with the tensor's largest entries, not with an entry that is
// small by cancellation. Measured on lstm_lookahead (train), conv.seq_module.3.weight[124]: exact
// (float64 PyTorch) 0.0304496, PyTorch float32 0.0304251, ours 0.0304627, while that gradient's
// largest entries are ~10: both float32 results are ~2e-5 from the truth. So the absolute
// tolerance of a gradient is kAtol times its largest magnitude (at least 1).
void check_grad(const Tensor& actual, const Tensor& expected) {
  double scale = std::max(1.0, expected.abs().max().item<double>());
  SL_CHECK_CLOSE(actual, expected, kRtol, kAtol * scale);
}

// One fixture case in one mode; `perm` reorders the batch (lengths no longer sorted, which the
// reference's pack_padded_sequence would refuse) and the fixture is permuted to match.
void check_case(const testing::Fixture& fx, const std::string& name, DeepSpeech2Options opts,
                bool train, const std::vector<int64_t>& perm) {
  std::string mode = train ? "train" : "eval";
  INFO(name, " ", mode, " perm ", perm[0], perm[1], perm[2]);
  DeepSpeech2 model(opts);
  fx.load_params(model, name);  // strict by name: deepspeech.pytorch's names
  model.train(train);
  Tensor spect = permuted(fx.get(name + ".in.spect"), perm, 0).detach().requires_grad_();
  Tensor lengths = permuted(fx.get(name + ".in.lengths"), perm, 0);
  Tensor targets = permuted(fx.get(name + ".in.targets"), perm, 0);
  Tensor target_lengths = permuted(fx.get(name + ".in.target_lengths"), perm, 0);
  auto [logits, out_lengths] = model.forward(spect, lengths);
  // Output lengths are integers from the conv arithmetic: exact.
  CHECK(equal(out_lengths, permuted(fx.get(name + "." + mode + ".out_lengths"), perm, 0)));
  // Logits at every step (padded steps too: both sides compute fc(BatchNorm(0)) there).
  SL_CHECK_CLOSE(logits, permuted(fx.get(name + "." + mode + ".logits"), perm, 1), kRtol, kAtol);
  Tensor loss = ctc(logits, targets, out_lengths, target_lengths);
  SL_CHECK_CLOSE(loss, fx.get(name + "." + mode + ".loss"), kRtol, kAtol);
  loss.backward();
  check_grad(spect.grad(), permuted(fx.get(name + "." + mode + ".gspect"), perm, 0));
  for (const auto& [pname, p] : model.named_parameters()) {
    INFO("grad of ", pname);
    check_grad(p.grad(), fx.get(name + "." + mode + ".gparam." + pname));
  }
  if (train) {  // running statistics: BatchNorm saw the same rows, padded ones included
    for (const auto& [bname, b] : model.named_buffers()) {
      INFO("buffer ", bname);
      SL_CHECK_CLOSE(b, fx.get(name + ".train.after." + bname), kRtol, kAtol);
    }
  }
}

}  // namespace

TEST_CASE("deepspeech2 matches deepspeech.pytorch: bi-LSTM, bi-GRU, LSTM + lookahead") {
  testing::Fixture fx("deepspeech2", SL_MODEL_FIXTURES);
  struct Case {
    const char* name;
    DeepSpeech2Options opts;
  };
  // lstm_bi: lengths [14, 11, 6] of 14 frames; gru_bi: [12, 9, 5] of 14 frames (no sequence
  // fills the batch: 6 output steps, not 7); lstm_lookahead: [13, 13, 8] of 13 frames.
  for (const Case& c : {Case{"lstm_bi", tiny(DeepSpeech2RNN::lstm, true)},
                        Case{"gru_bi", tiny(DeepSpeech2RNN::gru, true)},
                        Case{"lstm_lookahead", tiny(DeepSpeech2RNN::lstm, false)}}) {
    for (bool train : {true, false}) {
      check_case(fx, c.name, c.opts, train, {0, 1, 2});
      check_case(fx, c.name, c.opts, train, {2, 0, 1});  // unsorted lengths
    }
  }
}

TEST_CASE("deepspeech2 in eval mode: a zero-padded sequence's outputs do not depend on its batch") {
  // MaskConv's purpose: with the padding zero (as deepspeech.pytorch's loader pads), sample 2 of
  // gru_bi (5 of 14 frames) alone gives the logits it gets in the batch. Same float32 ops on the
  // same values except the BatchNorm/GEMM batch shapes: tolerance as the parity checks.
  testing::Fixture fx("deepspeech2", SL_MODEL_FIXTURES);
  DeepSpeech2 model(tiny(DeepSpeech2RNN::gru, true));
  fx.load_params(model, "gru_bi");
  model.eval();
  NoGradGuard ng;
  Tensor spect = fx.get("gru_bi.in.spect").clone();
  Tensor lengths = fx.get("gru_bi.in.lengths");
  std::vector<int64_t> lens = lengths.to_vector<int64_t>();
  for (int64_t b = 0; b < 3; ++b) spect.narrow(0, b, 1).narrow(3, lens[b], 14 - lens[b]).zero_();
  auto [logits, out_lengths] = model.forward(spect, lengths);
  Tensor alone = spect.narrow(0, 2, 1).narrow(3, 0, lens[2]).contiguous();
  auto [logits2, out_lengths2] = model.forward(alone, tensor({lens[2]}));
  int64_t steps = DeepSpeech2::output_length(lens[2]);  // 3
  CHECK(logits2.sizes() == Shape{steps, 1, 5});
  SL_CHECK_CLOSE(logits2, logits.narrow(0, 0, steps).narrow(1, 2, 1), kRtol, kAtol);
  // The one-argument forward is the all-full-length call.
  CHECK(equal(model.forward(alone), logits2));
}

TEST_CASE("deepspeech2 f64 gradcheck through the CTC loss, train and eval mode") {
  // Tiny: 4 bins (conv frequency 4 -> 2 -> 1), 2 conv channels (rnn input 2), hidden 3, 2
  // layers, 4 classes; B = 2 with lengths [6, 3] of 6 frames (output lengths [3, 2]). The checked
  // function is the CTC loss followed by every logit, over the spectrogram and all ~2100
  // parameters. Train mode for the bi-GRU (BatchNorm batch statistics over padded rows), eval
  // mode for the unidirectional LSTM with the lookahead.
  for (bool train : {true, false}) {
    DeepSpeech2Options o{.num_features = 4,
                         .hidden_size = 3,
                         .num_layers = 2,
                         .rnn = train ? DeepSpeech2RNN::gru : DeepSpeech2RNN::lstm,
                         .bidirectional = train,
                         .num_classes = 4,
                         .conv_channels = 2,
                         .lookahead_context = 2};
    INFO((train ? "train, bi-GRU" : "eval, LSTM + lookahead"));
    manual_seed(train ? 11 : 12);
    DeepSpeech2 model(o);
    model.to(DType::f64);
    if (!train) {  // non-trivial running statistics
      NoGradGuard ng;
      for (auto [n, b] : model.named_buffers()) {
        if (n.find("running_mean") != std::string::npos)
          b.copy_(randn(b.sizes(), {.dtype = DType::f64}) * 0.3);
        if (n.find("running_var") != std::string::npos)
          b.copy_(rand(b.sizes(), {.dtype = DType::f64}) + 0.5);
      }
    }
    model.train(train);
    Tensor spect = randn({2, 1, 4, 6}, {.dtype = DType::f64}).requires_grad_();
    Tensor lengths = tensor({int64_t{6}, int64_t{3}});
    Tensor targets = tensor({int64_t{1}, int64_t{2}, int64_t{3}, int64_t{0}}).view({2, 2});
    Tensor target_lengths = tensor({int64_t{2}, int64_t{1}});
    auto fn = [&](const TensorList& in) {
      auto [logits, out_lengths] = model.forward(in[0], lengths);
      Tensor loss = ctc(logits, targets, out_lengths, target_lengths);
      return cat({loss.reshape({1}), logits.reshape({-1})});
    };
    // Central differences with eps 1e-6 in f64: truncation O(eps^2) and rounding O(1e-16 / eps)
    // errors are ~1e-10 relative; gradcheck's default atol 1e-5 / rtol 1e-3 has wide margin.
    CHECK(testing::module_gradcheck(model, fn, {spect}));
  }
}

TEST_CASE("deepspeech2 output_lengths and feature sizes follow the conv arithmetic") {
  // By hand, (n + 2 pad - kernel) / stride + 1 on the time axis: conv 1 (11, stride 2, pad 5)
  // gives (L - 1) / 2 + 1, conv 2 (11, stride 1, pad 5) keeps it.
  for (auto [in, out] : {std::pair<int64_t, int64_t>{1, 1},
                         {2, 1},
                         {3, 2},
                         {14, 7},
                         {13, 7},
                         {100, 50},
                         {101, 51}}) {
    CHECK(DeepSpeech2::output_length(in) == out);
  }
  DeepSpeech2 model(tiny(DeepSpeech2RNN::gru, true));
  CHECK(equal(model.output_lengths(tensor({int64_t{14}, int64_t{5}, int64_t{1}})),
              tensor({int64_t{7}, int64_t{3}, int64_t{1}})));
  // Frequency: conv 1 (41, stride 2, pad 20) then conv 2 (21, stride 2, pad 10), each
  // (n - 1) / 2 + 1: 12 -> 6 -> 3 (x 3 channels = 9); 161 -> 81 -> 41 (x 32 = 1312,
  // deepspeech.pytorch's rnn_input_size); 81 -> 41 -> 21 (x 16 = 336).
  CHECK(DeepSpeech2::rnn_input_size(model.options) == 9);
  CHECK(model.get_parameter("rnns.0.rnn.weight_ih_l0").sizes() == Shape{24, 9});
  CHECK(DeepSpeech2::rnn_input_size(DeepSpeech2Options{}) == 1312);
  CHECK(DeepSpeech2::rnn_input_size(models::deepspeech2_small_options()) == 336);
  SL_CHECK_THROWS(model.output_lengths(tensor({1.f})), DTypeError,
                  "DeepSpeech2: lengths must be int64, got float32");
  SL_CHECK_THROWS(model.output_lengths(zeros({2, 2}, {.dtype = DType::i64})), ShapeError,
                  "DeepSpeech2: lengths must be 1-d [B], got [2, 2]");
  SL_CHECK_THROWS(model.output_lengths(tensor({int64_t{3}, int64_t{0}})), ValueError,
                  "DeepSpeech2: a sequence needs at least 1 frame, got 0");
}

TEST_CASE("deepspeech2 rejects bad inputs and options with the values") {
  DeepSpeech2 model(tiny(DeepSpeech2RNN::lstm, true));
  Tensor x = randn({2, 1, 12, 5});
  Tensor lengths = tensor({int64_t{5}, int64_t{3}});
  CHECK(model.forward(x, lengths).first.sizes() == Shape{3, 2, 5});
  SL_CHECK_THROWS(model.forward(randn({2, 1, 13, 5}), lengths), ShapeError,
                  "DeepSpeech2: expected a spectrogram [B, 1, 12, T], got [2, 1, 13, 5]");
  SL_CHECK_THROWS(model.forward(randn({2, 12, 5}), lengths), ShapeError,
                  "DeepSpeech2: expected a spectrogram [B, 1, 12, T], got [2, 12, 5]");
  SL_CHECK_THROWS(model.forward(randn({2, 12, 5})), ShapeError,
                  "DeepSpeech2: expected a spectrogram [B, 1, 12, T], got [2, 12, 5]");
  SL_CHECK_THROWS(model.forward(randn({2, 1, 12, 0}), lengths), ShapeError,
                  "DeepSpeech2: too few frames or sequences: spectrogram [2, 1, 12, 0]");
  SL_CHECK_THROWS(model.forward(x, tensor({int64_t{5}})), ShapeError,
                  "DeepSpeech2: expected lengths [2], got [1]");
  SL_CHECK_THROWS(model.forward(x, Tensor()), ShapeError,
                  "DeepSpeech2: expected lengths [2], got undefined");
  SL_CHECK_THROWS(model.forward(x, tensor({5.f, 3.f})), DTypeError,
                  "DeepSpeech2: lengths must be int64, got float32");
  SL_CHECK_THROWS(model.forward(x, tensor({int64_t{5}, int64_t{0}})), ValueError,
                  "DeepSpeech2: length 0 of sequence 1 is outside [1, 5] (the spectrogram has 5 "
                  "frames)");
  SL_CHECK_THROWS(model.forward(x, tensor({int64_t{6}, int64_t{3}})), ValueError,
                  "DeepSpeech2: length 6 of sequence 0 is outside [1, 5]");
  SL_CHECK_THROWS(DeepSpeech2(DeepSpeech2Options{.hidden_size = 0}), ValueError,
                  "DeepSpeech2: num_features, hidden_size, num_layers, num_classes and "
                  "conv_channels must be positive, got 161, 0, 5, 29, 32");
  DeepSpeech2Options uni = tiny(DeepSpeech2RNN::gru, false);
  uni.lookahead_context = 0;
  SL_CHECK_THROWS(DeepSpeech2{uni}, ValueError,
                  "DeepSpeech2: lookahead_context must be >= 1 for a unidirectional model, got 0");
  SL_CHECK_THROWS(models::deepspeech2::Lookahead(4, 0), ValueError,
                  "Lookahead: context must be >= 1, got 0");
}

TEST_CASE("deepspeech2 registry: deepspeech.pytorch's default layout and the small model") {
  auto names = models::model_names();
  CHECK(std::find(names.begin(), names.end(), "deepspeech2") != names.end());
  CHECK(std::find(names.begin(), names.end(), "deepspeech2_small") != names.end());

  // The default model has exactly the state-dict names and shapes of deepspeech.pytorch's
  // default (recorded by the generation script): a released checkpoint loads by name.
  testing::Fixture fx("deepspeech2", SL_MODEL_FIXTURES);
  auto full = models::create_model("deepspeech2");
  nn::StateDict sd = full->state_dict();
  std::set<std::string> ours, theirs;
  for (const auto& [name, t] : sd) {
    ours.insert(name);
    std::vector<int64_t> dims = fx.get("default.shape." + name).to_vector<int64_t>();
    INFO(name);
    REQUIRE(!dims.empty());
    CHECK(Shape(dims.begin() + 1, dims.end()) == t.sizes());
  }
  for (const auto& k : {"conv.seq_module.0.weight", "rnns.0.rnn.weight_ih_l0_reverse",
                        "rnns.4.batch_norm.module.running_var", "fc.0.module.1.weight"}) {
    CHECK(ours.count(k) == 1);
  }
  // Every one of ours is among theirs (above); the reference has 80 entries: the conv stack's
  // 2 x (weight, bias) + 2 x 5 BatchNorm2d entries, 5 layers x 8 LSTM tensors, 4 x 5
  // BatchNorm1d entries, the fc's BatchNorm1d (5) and Linear weight (1).
  CHECK(ours.size() == 80);
  // The reference's parameter count (the generation script prints it).
  CHECK(full->num_parameters() == 86'618'400);

  // The small model: 81 bins, 2 bi-GRU layers of 128, 29 classes.
  auto small = models::create_model("deepspeech2_small");
  CHECK(small->get_parameter("rnns.1.rnn.weight_hh_l0_reverse").sizes() == Shape{384, 128});
  CHECK(small->get_parameter("conv.seq_module.3.weight").sizes() == Shape{16, 16, 21, 11});
  CHECK(small->num_parameters() == 626'704);  // printed by the generation script
  NoGradGuard ng;
  CHECK(small->forward(randn({2, 1, 81, 9})).sizes() == Shape{5, 2, 29});
}
