// GRU and LSTM against PyTorch (fixture: rnn): multi-layer, bidirectional, batch_first, initial
// states and variable lengths (PyTorch side: pack_padded_sequence); gradchecks; errors.
#include "fixture.h"
#include "nn/rnn.h"

using namespace sl;
using sl::testing::Fixture;
using sl::testing::module_gradcheck;

// f32: rtol 1e-5, atol 2e-6. Gradients flow back through 5 steps and 2 layers of gates; each
// step adds O(H) products of O(1) values in a different order than PyTorch's fused kernels, so
// absolute differences reach ~1e-6 (2x the default atol).
constexpr double kRtol = 1e-5, kAtol = 2e-6;

namespace {
struct RnnCase {
  const char* name;
  bool lstm;
  int64_t layers;
  bool bidir, batch_first;
};
}  // namespace

TEST_CASE("GRU and LSTM match PyTorch, with and without lengths") {
  Fixture fx("rnn");
  for (RnnCase c :
       {RnnCase{"gru_l1_bf", false, 1, false, true}, RnnCase{"gru_l2_bi", false, 2, true, false},
        RnnCase{"lstm_l1_bf", true, 1, false, true},
        RnnCase{"lstm_l2_bi_bf", true, 2, true, true}}) {
    nn::RNNOptions o{
        .num_layers = c.layers, .batch_first = c.batch_first, .bidirectional = c.bidir};
    for (bool with_lengths : {false, true}) {
      std::string name = std::string(c.name) + (with_lengths ? "_lengths" : "");
      CAPTURE(name);
      std::shared_ptr<nn::RNNBase> m;
      if (c.lstm) {
        m = std::make_shared<nn::LSTM>(3, 4, o);
      } else {
        m = std::make_shared<nn::GRU>(3, 4, o);
      }
      fx.load_params(*m, name);
      Tensor x = fx.input(name, 0);
      if (!with_lengths) {
        TensorList outs;
        if (c.lstm) {
          auto [y, h, cc] = std::static_pointer_cast<nn::LSTM>(m)->forward(x, Tensor(), Tensor());
          outs = {y, h, cc};
        } else {
          auto [y, h] = std::static_pointer_cast<nn::GRU>(m)->forward(x, Tensor());
          outs = {y, h};
        }
        fx.check_backward(name, outs, {x}, m.get(), kRtol, kAtol);
        continue;
      }
      Tensor lengths = fx.get(name + ".lengths");
      Tensor h0 = fx.input(name, 1);
      TensorList outs, ins{x, h0};
      if (c.lstm) {
        Tensor c0 = fx.input(name, 2);
        ins.push_back(c0);
        auto [y, h, cc] = std::static_pointer_cast<nn::LSTM>(m)->forward(x, h0, c0, lengths);
        outs = {y, h, cc};
      } else {
        auto [y, h] = std::static_pointer_cast<nn::GRU>(m)->forward(x, h0, lengths);
        outs = {y, h};
      }
      fx.check_backward(name, outs, ins, m.get(), kRtol, kAtol);
      // Padded steps (sequence 1 has 3 of 5) get no gradient.
      Tensor gx =
          c.batch_first ? x.grad()[1].narrow(0, 3, 2) : x.grad().narrow(0, 3, 2).select(1, 1);
      CHECK(gx.abs().max().item<double>() == 0.0);
    }
  }
}

TEST_CASE("RNN parameter names, repr and default init follow PyTorch") {
  nn::LSTM m(3, 4, {.num_layers = 2, .bidirectional = true});
  std::vector<std::string> names;
  for (const auto& [n, p] : m.named_parameters()) names.push_back(n);
  CHECK(names.size() == 16);
  CHECK(names[0] == "weight_ih_l0");
  CHECK(names[4] == "weight_ih_l0_reverse");
  CHECK(names[15] == "bias_hh_l1_reverse");
  CHECK(m.get_parameter("weight_ih_l1").sizes() == Shape{16, 8});
  CHECK(m.str() == "LSTM(3, 4, num_layers=2, bidirectional=True)");
  for (const auto& p : m.parameters()) CHECK(p.abs().max().item<double>() <= 0.5);  // 1/sqrt(4)
  nn::GRU g(3, 4, {.bias = false, .batch_first = true});
  CHECK(g.named_parameters().size() == 2);
  CHECK(g.str() == "GRU(3, 4, bias=False, batch_first=True)");
}

TEST_CASE("GRU/LSTM gradcheck in float64 with lengths and states") {
  manual_seed(3);
  TensorOptions f64{.dtype = DType::f64};
  nn::GRU g(2, 2, {.bidirectional = true, .tensor_options = f64});
  Tensor x = randn({3, 2, 2}, f64).requires_grad_();
  Tensor h0 = randn({2, 2, 2}, f64).requires_grad_();
  Tensor len = from_vector(std::vector<int64_t>{3, 2});
  CHECK(module_gradcheck(g,
                         [&](const TensorList& in) {
                           auto [y, h] = g.forward(in[0], in[1], len);
                           return y.sum() + (h * h).sum();
                         },
                         {x, h0}));
  nn::LSTM l(2, 2, {.num_layers = 2, .tensor_options = f64});
  CHECK(module_gradcheck(l,
                         [&](const TensorList& in) {
                           auto [y, h, c] = l.forward(in[0], Tensor(), Tensor(), len);
                           return y.sum() + c.sum();
                         },
                         {x}));
}

TEST_CASE("RNN lengths: the padded tail changes nothing; dropout only in training") {
  manual_seed(4);
  nn::LSTM m(3, 5, {.num_layers = 2, .dropout = 0.5, .bidirectional = true});
  m.eval();
  Tensor x = randn({6, 2, 3});
  Tensor len = from_vector(std::vector<int64_t>{6, 4});
  auto [y1, h1, c1] = m.forward(x, Tensor(), Tensor(), len);
  Tensor x2 = x.clone();
  {
    NoGradGuard ng;
    x2.narrow(0, 4, 2).select(1, 1).fill_(100.0);  // garbage in the padding of sequence 1
  }
  auto [y2, h2, c2] = m.forward(x2, Tensor(), Tensor(), len);
  SL_CHECK_CLOSE(y1, y2, 0, 0);
  SL_CHECK_CLOSE(h1, h2, 0, 0);
  CHECK(y1[5][1].abs().max().item<double>() == 0.0);
  // Sequence 1 alone, unpadded, gives the same result.
  auto [y3, h3, c3] = m.forward(x.narrow(0, 0, 4).narrow(1, 1, 1), Tensor(), Tensor());
  SL_CHECK_CLOSE(y3.select(1, 0), y1.narrow(0, 0, 4).select(1, 1), 1e-6, 1e-7);
  SL_CHECK_CLOSE(h3.select(1, 0), h1.select(1, 1), 1e-6, 1e-7);
  m.train();
  auto [a, ha, ca] = m.forward(x, Tensor(), Tensor());
  auto [b, hb, cb] = m.forward(x, Tensor(), Tensor());
  CHECK_FALSE(equal(a, b));
}

TEST_CASE("RNN error paths") {
  nn::GRU g(3, 4);
  SL_CHECK_THROWS(g.forward(randn({5, 2, 2})), ShapeError,
                  "GRU: input_size is 3 but the input has shape [5, 2, 2]");
  SL_CHECK_THROWS(g.forward(randn({5})), ShapeError, "expected input [T, B, 3]");
  SL_CHECK_THROWS(g.forward(randn({5, 2, 3}), Tensor(), from_vector(std::vector<int64_t>{6, 2})),
                  ValueError, "length 6 is outside [1, 5] (the sequence has 5 steps)");
  SL_CHECK_THROWS(g.forward(randn({5, 2, 3}), Tensor(), from_vector(std::vector<int64_t>{5})),
                  ShapeError, "lengths must be [2], got [1]");
  SL_CHECK_THROWS(g.forward(randn({5, 2, 3}), randn({2, 2, 4})), ShapeError,
                  "expected h0 of shape [1, 2, 4], got [2, 2, 4]");
  SL_CHECK_THROWS(nn::LSTM(3, 0), ValueError, "hidden_size must be positive");
}
