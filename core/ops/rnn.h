// The "rnn" family: LSTM and GRU layers over whole sequences (and single cells), with PyTorch's
// gate order and equations. Not differentiable (see autograd/ops/rnn.h).
//
// Note [RNN layout]
// A layer runs over x [T, N, I] (time-major, contiguous) for one or two directions. Per
// direction, the input projections of all steps are one GEMM into a gate buffer [T, N, G*H]
// (G = 4 for LSTM: i, f, g, o; G = 3 for GRU: r, z, n); each step then does one recurrent GEMM
// (h_prev [N, H] @ W_hh^T) and one fused pointwise kernel (the slots below), and the backward
// mirrors this (a pointwise kernel and a GEMM per step, then weight gradients as three GEMMs
// over all steps). The time loop lives in core/ops/rnn.cpp and uses bmm_kernel, so a device
// only provides the pointwise kernels.
// States live in buffers hbuf / cbuf [T + 1, N, H] indexed by "slot": the forward direction
// reads slot t and writes slot t + 1 at time t, the reverse direction reads t + 1 and writes t,
// so the initial state is slot 0 (forward) / T (reverse), the final one slot T / 0, and the
// inputs h_prev of all steps form one contiguous [T, N, H] range for the weight gradient.
// Variable lengths: with a lengths tensor [N] (i64, on the device), row b is active at time t
// iff t < lengths[b]. An inactive step copies the state through (h_next = h_prev, c_next =
// c_prev) and writes 0 to the output; in backward it passes the state gradients through and
// its gate gradients are 0. So padded steps reach neither outputs, final states nor gradients,
// and the reverse direction of row b effectively starts at time lengths[b] - 1 (as
// pack_padded_sequence + pad_packed_sequence in PyTorch).
// Pointwise kernels take [N, H]-shaped views whose rows are contiguous (inner stride 1) with
// any row stride (the output y is a column slice of [T, N, D * H]); gate buffers are
// contiguous.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace sl {

/// One LSTM step for a batch (Note [RNN layout]).
struct LstmStep {
  Tensor gates;           ///< [N, 4H]: in pre-activations (i, f, g, o); out activations
  Tensor h_prev, c_prev;  ///< [N, H]
  Tensor h_next, c_next;  ///< [N, H] out
  Tensor y;               ///< [N, H] out (h_next, or 0 where inactive); may be undefined
  Tensor lengths;         ///< [N] i64 or undefined (every row active)
  int64_t t = 0;
  /// The device of the step (the profiler times kernel calls by their arguments' device).
  Device device() const { return gates.device(); }
};

/// Backward of one LSTM step.
struct LstmStepBackward {
  Tensor gates;           ///< [N, 4H] saved activations
  Tensor c_prev, c_next;  ///< [N, H] saved states
  Tensor dh;              ///< [N, H] gradient w.r.t. h_next from later steps / h_n
  Tensor dy;              ///< [N, H] gradient w.r.t. this step's output; may be undefined
  Tensor dc;              ///< [N, H] in: gradient w.r.t. c_next; out: w.r.t. c_prev
  Tensor dgates;          ///< [N, 4H] out: gradient w.r.t. the pre-activations (0 inactive)
  Tensor dh_prev;         ///< [N, H] out: dh where inactive, 0 where active (the recurrent
                          ///< GEMM adds dgates @ W_hh afterwards)
  Tensor lengths;
  int64_t t = 0;
  /// The device of the step (the profiler times kernel calls by their arguments' device).
  Device device() const { return gates.device(); }
};

/// One GRU step: r = s(gx_r + gh_r + b_r), z = s(gx_z + gh_z + b_z),
/// n = tanh(gx_n + r * (gh_n + b_n)), h_next = (1 - z) * n + z * h_prev, where gx holds the
/// input projection with b_ih and gh = h_prev @ W_hh^T, b = bias_hh.
struct GruStep {
  Tensor gx;       ///< [N, 3H]: in input projections; out r, z, n (saved for backward)
  Tensor gh;       ///< [N, 3H]: in recurrent projections; out: its n-third holds gh_n + b_n
  Tensor bias_hh;  ///< [3H] or undefined
  Tensor h_prev;   ///< [N, H]
  Tensor h_next;   ///< [N, H] out
  Tensor y;        ///< [N, H] out or undefined
  Tensor lengths;
  int64_t t = 0;
  /// The device of the step (the profiler times kernel calls by their arguments' device).
  Device device() const { return gx.device(); }
};

/// Backward of one GRU step.
struct GruStepBackward {
  Tensor gx, gh;   ///< [N, 3H] as GruStep left them
  Tensor h_prev;   ///< [N, H]
  Tensor dh, dy;   ///< as in LstmStepBackward
  Tensor dgx;      ///< [N, 3H] out: gradient w.r.t. gx (0 inactive)
  Tensor dgh;      ///< [N, 3H] out: gradient w.r.t. gh + bias_hh (0 inactive)
  Tensor dh_prev;  ///< [N, H] out: dh * z where active, dh where inactive (the GEMM adds
                   ///< dgh @ W_hh afterwards)
  Tensor lengths;
  int64_t t = 0;
  /// The device of the step (the profiler times kernel calls by their arguments' device).
  Device device() const { return gx.device(); }
};

SL_DECLARE_KERNEL(lstm_step_forward_kernel, void(const LstmStep& s));
SL_DECLARE_KERNEL(lstm_step_backward_kernel, void(const LstmStepBackward& s));
SL_DECLARE_KERNEL(gru_step_forward_kernel, void(const GruStep& s));
SL_DECLARE_KERNEL(gru_step_backward_kernel, void(const GruStepBackward& s));

enum class RnnMode : uint8_t { lstm, gru };
const char* rnn_mode_name(RnnMode m);

/// The weights of one direction of one layer (biases may be undefined).
struct RnnWeights {
  Tensor w_ih, w_hh, b_ih, b_hh;
};

/// What a layer forward keeps for its backward, per direction.
struct RnnLayerSaved {
  RnnMode mode = RnnMode::lstm;
  Tensor x;                   ///< [T, N, I]
  Tensor lengths;             ///< on the device, or undefined
  std::vector<RnnWeights> w;  ///< per direction
  std::vector<Tensor> gates;  ///< LSTM: [T, N, 4H] activations; GRU: gx [T, N, 3H]
  std::vector<Tensor> gh;     ///< GRU: [T, N, 3H]
  std::vector<Tensor> hbuf;   ///< [T + 1, N, H]
  std::vector<Tensor> cbuf;   ///< LSTM: [T + 1, N, H]
};

/// Outputs of a layer forward: y [T, N, D * H], h_n / c_n [D, N, H] (c_n: LSTM only).
struct RnnLayerOutput {
  Tensor y, h_n, c_n;
  RnnLayerSaved saved;
};

/// Gradients of a layer: x, h0, c0 and per direction (w_ih, w_hh, b_ih, b_hh) (undefined where
/// not requested).
struct RnnLayerGrads {
  Tensor x, h0, c0;
  std::vector<RnnWeights> w;
};

namespace ops {

/// Checks lengths for a batch of N sequences of length T: 1-d integer, N values in [1, T].
/// Returns them as i64 on `device`. Throws ShapeError / DTypeError / ValueError naming op.
Tensor check_rnn_lengths(const char* op, const Tensor& lengths, int64_t T, int64_t N,
                         Device device);
/// Runs one layer (Note [RNN layout]): x [T, N, I] contiguous, h0 / c0 [D, N, H] (c0 only for
/// LSTM), one RnnWeights per direction (D = w.size(), 1 or 2), lengths as check_rnn_lengths
/// returns it or undefined. Shapes must already be checked.
RnnLayerOutput rnn_layer_forward(RnnMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0,
                                 const std::vector<RnnWeights>& w, const Tensor& lengths);
/// Backward of rnn_layer_forward from the gradients of y, h_n, c_n (any may be undefined =
/// zero). needs: {x, h0, c0, weights}.
RnnLayerGrads rnn_layer_backward(const RnnLayerSaved& saved, const Tensor& dy, const Tensor& dh_n,
                                 const Tensor& dc_n, std::array<bool, 4> needs);

}  // namespace ops
}  // namespace sl
