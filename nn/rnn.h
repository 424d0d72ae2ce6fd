// GRU and LSTM, as torch.nn.GRU / torch.nn.LSTM: multi-layer, bidirectional, batch_first,
// initial states, inter-layer dropout, and variable lengths given as a lengths tensor (what
// pack_padded_sequence does in PyTorch): padded steps leak into neither outputs nor gradients.
// Parameter names and layouts are PyTorch's (weight_ih_l0, weight_hh_l0, bias_ih_l0,
// bias_hh_l0, ..._reverse; gate order r,z,n for GRU and i,f,g,o for LSTM), so weights load by
// name.
//
// Note [RNN lengths]
// With lengths, sequence b has valid steps 0..len_b-1. Its outputs at steps >= len_b are zero,
// and its final state is the state after step len_b - 1 (for the reverse direction: after step
// 0, the reverse pass starting at step len_b - 1 from the initial state). Masked steps keep the
// previous state exactly (a select, not arithmetic), so their inputs get zero gradient.
#pragma once

#include <tuple>
#include <utility>

#include "autograd/ops/rnn.h"

#include "nn/module.h"

namespace sl::nn {

struct RNNOptions {
  int64_t num_layers = 1;
  bool bias = true;
  /// Inputs/outputs [B, T, *] instead of [T, B, *] (states stay [layers * dirs, B, H]).
  bool batch_first = false;
  /// Dropout on the outputs of every layer but the last, in training.
  double dropout = 0.0;
  bool bidirectional = false;
  TensorOptions tensor_options = {};
};

/// Shared parameter handling of GRU and LSTM (gates = 3 or 4).
class RNNBase : public Module {
 public:
  RNNBase(const char* name, int64_t gates, int64_t input_size, int64_t hidden_size,
          RNNOptions opts);
  /// Every parameter U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch.
  void reset_parameters();
  std::string extra_repr() const override;

  const int64_t input_size, hidden_size;
  const RNNOptions options;
  int64_t num_directions() const { return options.bidirectional ? 2 : 1; }

 protected:
  /// Checks the input, initial-state and lengths shapes (ShapeError / ValueError / DTypeError
  /// naming `op`).
  void check_inputs(const char* op, const Tensor& x, const Tensor& h0, const Tensor& c0,
                    const Tensor& lengths) const;
  /// Parameters in PyTorch's _flat_weights order (what sl::lstm / sl::gru take).
  TensorList flat_weights_;
  const int64_t gates_;
};

/// Both run the fused sequence kernels of autograd/ops/rnn.h.
///
/// forward(x, h0, lengths) -> (output, h_n): x [T, B, I] ([B, T, I] if batch_first; [T, I]
/// unbatched);
/// h0 [L*D, B, H] (zeros when undefined); lengths int64 [B] with values in
/// [1, T] (undefined: all T). output [T, B, D*H] (batch_first: [B, T, D*H]), h_n [L*D, B, H].
/// Throws ShapeError for mismatched shapes, ValueError for lengths outside [1, T].
class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, RNNOptions opts = {});
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& h0,
                                    const Tensor& lengths = Tensor());
  Tensor forward(const Tensor& x) override { return forward(x, Tensor()).first; }
};

/// As GRU with a cell state: forward(x, h0, c0, lengths) -> (output, h_n, c_n).
class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, RNNOptions opts = {});
  std::tuple<Tensor, Tensor, Tensor> forward(const Tensor& x, const Tensor& h0, const Tensor& c0,
                                             const Tensor& lengths = Tensor());
  Tensor forward(const Tensor& x) override { return std::get<0>(forward(x, Tensor(), Tensor())); }
};

}  // namespace sl::nn
