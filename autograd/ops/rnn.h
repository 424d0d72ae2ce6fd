// Differentiable LSTM and GRU: single cells and full sequences, with PyTorch's gate order and
// equations, named and ordered as torch's functional forms (torch.lstm_cell, torch.gru_cell,
// torch.lstm, torch.gru). Kernels and layout: core/ops/rnn.h (Note [RNN layout]).
//
//   LSTM (gates i, f, g, o):  i = s(W_ii x + b_ii + W_hi h + b_hi), f = s(...), g = tanh(...),
//        o = s(...), c' = f * c + i * g, h' = o * tanh(c')
//   GRU (gates r, z, n):      r = s(W_ir x + b_ir + W_hr h + b_hr), z = s(...),
//        n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h
// with weight_ih [G*H, I], weight_hh [G*H, H], biases [G*H] holding the gates in that order.
// First-order gradients only: the backward is not itself differentiable.
#pragma once

#include <tuple>
#include <utility>

#include "core/random.h"
#include "core/tensor.h"

namespace sl {

/// One LSTM step: input [N, I] (or [I]), h / c [N, H] (or [H]; undefined = zeros), w_ih
/// [4H, I], w_hh [4H, H], biases [4H] or undefined. Returns (h', c'). Throws ShapeError for
/// mismatched shapes, DTypeError, DeviceError.
std::pair<Tensor, Tensor> lstm_cell(const Tensor& input, const Tensor& h, const Tensor& c,
                                    const Tensor& w_ih, const Tensor& w_hh,
                                    const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

/// One GRU step: input [N, I] (or [I]), h [N, H] (or [H]; undefined = zeros), w_ih [3H, I],
/// w_hh [3H, H], biases [3H] or undefined. Returns h'. Errors as lstm_cell.
Tensor gru_cell(const Tensor& input, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

/// Multi-layer, optionally bidirectional LSTM over a whole sequence.
///   input   [T, N, I] ([N, T, I] with batch_first; [T, I] unbatched)
///   h0, c0  [L * D, N, H] ([L * D, H] unbatched), undefined = zeros; D = 2 if bidirectional
///   params  per layer, per direction (forward, then reverse): w_ih, w_hh, then b_ih, b_hh when
///           has_biases (PyTorch's _flat_weights order); layer l > 0 takes D * H inputs
///   dropout applied to each layer's output except the last when train (generator `gen`, the
///           default generator when null)
///   lengths [N] integer tensor (any device) of valid steps per sequence, 1 <= lengths[b] <= T,
///           or undefined (all T): steps t >= lengths[b] are padding; their outputs are 0, the
///           final states are those at step lengths[b] - 1 (forward) / 0 (reverse), and no
///           gradient flows through them (pack_padded_sequence + pad_packed_sequence semantics,
///           without sorting).
/// Returns (output [T, N, D * H] (batch_first: [N, T, D * H]), h_n [L * D, N, H],
/// c_n [L * D, N, H]). An empty batch (N = 0) gives empty outputs and states and zero weight
/// gradients, as PyTorch. Throws ShapeError (ranks, T = 0, parameter count or shapes, state
/// shapes), ValueError (num_layers < 1, dropout outside [0, 1], lengths out of range), DTypeError,
/// DeviceError.
std::tuple<Tensor, Tensor, Tensor> lstm(const Tensor& input, const Tensor& h0, const Tensor& c0,
                                        const TensorList& params, bool has_biases,
                                        int64_t num_layers, double dropout, bool train,
                                        bool bidirectional, bool batch_first,
                                        const Tensor& lengths = Tensor(), Generator* gen = nullptr);

/// Multi-layer, optionally bidirectional GRU over a whole sequence; arguments, semantics and
/// errors as lstm (without c0). Returns (output, h_n).
std::pair<Tensor, Tensor> gru(const Tensor& input, const Tensor& h0, const TensorList& params,
                              bool has_biases, int64_t num_layers, double dropout, bool train,
                              bool bidirectional, bool batch_first,
                              const Tensor& lengths = Tensor(), Generator* gen = nullptr);

}  // namespace sl
