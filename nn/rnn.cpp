#include "nn/rnn.h"

#include <cmath>

#include "core/creation.h"
#include "nn/init.h"

namespace sl::nn {

RNNBase::RNNBase(const char* name, int64_t gates, int64_t in, int64_t hidden, RNNOptions o)
    : Module(name), input_size(in), hidden_size(hidden), options(o), gates_(gates) {
  SL_CHECK(in > 0 && hidden > 0, name, ": input_size and hidden_size must be positive, got ", in,
           " and ", hidden);
  SL_CHECK(o.num_layers >= 1, name, ": num_layers must be >= 1, got ", o.num_layers);
  SL_CHECK(o.dropout >= 0.0 && o.dropout <= 1.0, name, ": dropout must be in [0, 1], got ",
           o.dropout);
  TensorOptions to = o.tensor_options;
  to.requires_grad = false;
  int64_t D = num_directions(), G = gates * hidden;
  // PyTorch's registration order: per layer, per direction: w_ih, w_hh, b_ih, b_hh.
  for (int64_t l = 0; l < o.num_layers; ++l) {
    for (int64_t d = 0; d < D; ++d) {
      std::string sfx = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
      int64_t layer_in = l == 0 ? in : hidden * D;
      flat_weights_.push_back(register_parameter("weight_ih" + sfx, empty({G, layer_in}, to)));
      flat_weights_.push_back(register_parameter("weight_hh" + sfx, empty({G, hidden}, to)));
      if (o.bias) {
        flat_weights_.push_back(register_parameter("bias_ih" + sfx, empty({G}, to)));
        flat_weights_.push_back(register_parameter("bias_hh" + sfx, empty({G}, to)));
      }
    }
  }
  reset_parameters();
}

void RNNBase::reset_parameters() {
  double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  for (auto& p : parameters()) init::uniform_(p, -bound, bound);
}

std::string RNNBase::extra_repr() const {
  std::string s = std::to_string(input_size) + ", " + std::to_string(hidden_size);
  if (options.num_layers != 1) s += ", num_layers=" + std::to_string(options.num_layers);
  if (!options.bias) s += ", bias=False";
  if (options.batch_first) s += ", batch_first=True";
  if (options.dropout != 0.0) s += ", dropout=" + repr::py_float(options.dropout);
  if (options.bidirectional) s += ", bidirectional=True";
  return s;
}

void RNNBase::check_inputs(const char* op, const Tensor& x, const Tensor& h0, const Tensor& c0,
                           const Tensor& lengths) const {
  SL_CHECK(x.defined(), op, ": the input is undefined");
  SL_CHECK_SHAPE(x.dim() == 3 || x.dim() == 2, op, ": expected input [T, B, ", input_size, "]",
                 options.batch_first ? " ([B, T, I] with batch_first)" : "",
                 " or unbatched [T, I], got ", shape_str(x.sizes()));
  SL_CHECK_SHAPE(x.size(-1) == input_size, op, ": input_size is ", input_size,
                 " but the input has shape ", shape_str(x.sizes()));
  bool batched = x.dim() == 3;
  int64_t T = batched && options.batch_first ? x.size(1) : x.size(0);
  int64_t B = batched ? (options.batch_first ? x.size(0) : x.size(1)) : 1;
  Shape state = batched ? Shape{options.num_layers * num_directions(), B, hidden_size}
                        : Shape{options.num_layers * num_directions(), hidden_size};
  for (auto [s, what] : {std::pair{&h0, "h0"}, std::pair{&c0, "c0"}}) {
    SL_CHECK_SHAPE(!s->defined() || s->sizes() == state, op, ": expected ", what, " of shape ",
                   shape_str(state), ", got ", shape_str(s->sizes()));
  }
  if (!lengths.defined()) return;
  SL_CHECK_DTYPE(lengths.dtype() == DType::i64 || lengths.dtype() == DType::i32, op,
                 ": lengths must be int64, got ", dtype_name(lengths.dtype()));
  SL_CHECK_SHAPE(lengths.dim() == 1 && lengths.size(0) == B, op, ": lengths must be [", B,
                 "], got ", shape_str(lengths.sizes()));
  for (int64_t v : lengths.to(DType::i64).to_vector<int64_t>()) {
    SL_CHECK(v >= 1 && v <= T, op, ": length ", v, " is outside [1, ", T, "] (the sequence has ", T,
             " steps)");
  }
}

GRU::GRU(int64_t in, int64_t hidden, RNNOptions opts) : RNNBase("GRU", 3, in, hidden, opts) {}

std::pair<Tensor, Tensor> GRU::forward(const Tensor& x, const Tensor& h0, const Tensor& lengths) {
  check_inputs("GRU", x, h0, Tensor(), lengths);
  return gru(x, h0, flat_weights_, options.bias, options.num_layers, options.dropout, is_training(),
             options.bidirectional, options.batch_first, lengths);
}

LSTM::LSTM(int64_t in, int64_t hidden, RNNOptions opts) : RNNBase("LSTM", 4, in, hidden, opts) {}

std::tuple<Tensor, Tensor, Tensor> LSTM::forward(const Tensor& x, const Tensor& h0,
                                                 const Tensor& c0, const Tensor& lengths) {
  check_inputs("LSTM", x, h0, c0, lengths);
  return lstm(x, h0, c0, flat_weights_, options.bias, options.num_layers, options.dropout,
              is_training(), options.bidirectional, options.batch_first, lengths);
}

}  // namespace sl::nn
