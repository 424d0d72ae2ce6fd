// The time loops of LSTM / GRU layers (Note [RNN layout]): GEMMs through bmm_kernel and the
// per-step pointwise kernels of the device.
#include "core/ops/rnn.h"

#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/matmul.h"
#include "core/ops/reduce.h"
#include "core/ops/view.h"

namespace sl {

SL_DEFINE_KERNEL(lstm_step_forward_kernel, void(const LstmStep& s));
SL_DEFINE_KERNEL(lstm_step_backward_kernel, void(const LstmStepBackward& s));
SL_DEFINE_KERNEL(gru_step_forward_kernel, void(const GruStep& s));
SL_DEFINE_KERNEL(gru_step_backward_kernel, void(const GruStepBackward& s));

const char* rnn_mode_name(RnnMode m) {
  return m == RnnMode::lstm ? "lstm" : "gru";
}

namespace ops {

namespace {

/// [1, rows, cols] view of a 2-d tensor (what bmm_kernel takes).
Tensor as3(const Tensor& m) {
  return unsqueeze(m, 0);
}

/// c (+)= a @ b on the device's GEMM; c a contiguous 2-d tensor.
void gemm(const Tensor& c, const Tensor& a, const Tensor& b, bool accumulate) {
  bmm_kernel(c.device().kind, as3(c), as3(a), as3(b), Scalar(1.0), Scalar(accumulate ? 1.0 : 0.0));
}

/// Columns [d * H, (d + 1) * H) of y [T, N, D * H] at time t: [N, H] with row stride D * H.
Tensor out_slice(const Tensor& y, int64_t t, int64_t d, int64_t H) {
  return narrow(select(y, 0, t), 1, d * H, H);
}

/// gate buffer [T, N, GH] = x [T, N, I] @ w_ih^T (+ bias broadcast over rows).
Tensor input_projection(const Tensor& x, const Tensor& w_ih, const Tensor& bias) {
  const int64_t T = x.size(0), N = x.size(1), I = x.size(2), GH = w_ih.size(0);
  Tensor g = empty({T, N, GH}, x.dtype(), x.device());
  if (g.numel() == 0) return g;
  Tensor g2 = view(g, {T * N, GH});
  if (bias.defined()) copy_(g2, expand(unsqueeze(bias, 0), {T * N, GH}));
  if (I == 0) {
    if (!bias.defined()) fill_(g2, 0);
    return g;
  }
  gemm(g2, view(x, {T * N, I}), transpose(w_ih, 0, 1), bias.defined());
  return g;
}

}  // namespace

Tensor check_rnn_lengths(const char* op, const Tensor& lengths, int64_t T, int64_t N,
                         Device device) {
  SL_CHECK_SHAPE(lengths.dim() == 1 && lengths.size(0) == N, op,
                 ": lengths must be a 1-d tensor with one entry per sequence (", N, "), got ",
                 shape_str(lengths.sizes()));
  SL_CHECK_DTYPE(is_integral(lengths.dtype()), op, ": lengths must be an integer tensor, got ",
                 dtype_name(lengths.dtype()));
  std::vector<int64_t> v = lengths.to_vector<int64_t>();
  for (int64_t b = 0; b < N; ++b) {
    int64_t l = v[static_cast<size_t>(b)];
    SL_CHECK(l <= T, op, ": lengths[", b, "] = ", l, " is longer than the sequence (", T,
             " steps)");
    SL_CHECK(l >= 1, op, ": lengths[", b, "] = ", l, " must be at least 1");
  }
  return to_device(cast(lengths, DType::i64), device);
}

RnnLayerOutput rnn_layer_forward(RnnMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0,
                                 const std::vector<RnnWeights>& w, const Tensor& lengths) {
  const bool lstm = mode == RnnMode::lstm;
  const int64_t T = x.size(0), N = x.size(1);
  const auto D = static_cast<int64_t>(w.size());
  const int64_t H = w[0].w_hh.size(1);
  const Device dev = x.device();
  RnnLayerOutput r;
  r.y = empty({T, N, D * H}, x.dtype(), dev);
  r.h_n = empty({D, N, H}, x.dtype(), dev);
  if (lstm) r.c_n = empty({D, N, H}, x.dtype(), dev);
  RnnLayerSaved& s = r.saved;
  s.mode = mode;
  s.x = x;
  s.lengths = lengths;
  s.w = w;
  // an empty batch (Note [Empty RNN batch] in autograd/ops/rnn.cpp): nothing to run, and no
  // kernel launched over zero rows (the CPU loops would cope; a CUDA grid of 0 blocks is an error)
  if (N == 0) return r;
  for (int64_t d = 0; d < D; ++d) {
    const RnnWeights& wd = w[static_cast<size_t>(d)];
    const bool reverse = d == 1;
    // LSTM folds both biases into the input projection; GRU adds b_hh inside the step
    Tensor bias = wd.b_ih;
    if (lstm && wd.b_hh.defined()) {
      bias = bias.defined() ? binary(BinaryOp::add, bias, wd.b_hh) : wd.b_hh;
    }
    Tensor gates = input_projection(x, wd.w_ih, bias);
    Tensor gh = lstm ? Tensor() : empty({T, N, 3 * H}, x.dtype(), dev);
    Tensor hbuf = empty({T + 1, N, H}, x.dtype(), dev);
    Tensor cbuf = lstm ? empty({T + 1, N, H}, x.dtype(), dev) : Tensor();
    const int64_t first = reverse ? T : 0;
    copy_(select(hbuf, 0, first), select(h0, 0, d));
    if (lstm) copy_(select(cbuf, 0, first), select(c0, 0, d));
    Tensor w_hh_t = transpose(wd.w_hh, 0, 1);  // [H, G*H]
    for (int64_t k = 0; k < T; ++k) {
      const int64_t t = reverse ? T - 1 - k : k;
      const int64_t prev = reverse ? t + 1 : t, next = reverse ? t : t + 1;
      Tensor h_prev = select(hbuf, 0, prev);
      if (lstm) {
        LstmStep st;
        st.gates = select(gates, 0, t);
        gemm(st.gates, h_prev, w_hh_t, /*accumulate=*/true);
        st.h_prev = h_prev;
        st.c_prev = select(cbuf, 0, prev);
        st.h_next = select(hbuf, 0, next);
        st.c_next = select(cbuf, 0, next);
        st.y = out_slice(r.y, t, d, H);
        st.lengths = lengths;
        st.t = t;
        lstm_step_forward_kernel(dev.kind, st);
      } else {
        GruStep st;
        st.gx = select(gates, 0, t);
        st.gh = select(gh, 0, t);
        gemm(st.gh, h_prev, w_hh_t, /*accumulate=*/false);
        st.bias_hh = wd.b_hh;
        st.h_prev = h_prev;
        st.h_next = select(hbuf, 0, next);
        st.y = out_slice(r.y, t, d, H);
        st.lengths = lengths;
        st.t = t;
        gru_step_forward_kernel(dev.kind, st);
      }
    }
    const int64_t last = reverse ? 0 : T;
    copy_(select(r.h_n, 0, d), select(hbuf, 0, last));
    if (lstm) copy_(select(r.c_n, 0, d), select(cbuf, 0, last));
    s.gates.push_back(gates);
    s.gh.push_back(gh);
    s.hbuf.push_back(hbuf);
    s.cbuf.push_back(cbuf);
  }
  return r;
}

RnnLayerGrads rnn_layer_backward(const RnnLayerSaved& s, const Tensor& dy, const Tensor& dh_n,
                                 const Tensor& dc_n, std::array<bool, 4> needs) {
  const bool lstm = s.mode == RnnMode::lstm;
  const Tensor& x = s.x;
  const int64_t T = x.size(0), N = x.size(1), I = x.size(2);
  const auto D = static_cast<int64_t>(s.w.size());
  const int64_t H = s.w[0].w_hh.size(1), G = lstm ? 4 : 3;
  const Device dev = x.device();
  const DType dt = x.dtype();
  Tensor dyc = dy.defined() ? contiguous(dy) : Tensor();
  RnnLayerGrads g;
  if (needs[0]) g.x = empty({T, N, I}, dt, dev);
  if (needs[1]) g.h0 = empty({D, N, H}, dt, dev);
  if (needs[2] && lstm) g.c0 = empty({D, N, H}, dt, dev);
  g.w.resize(static_cast<size_t>(D));
  if (N == 0) {
    // an empty batch (Note [Empty RNN batch] in autograd/ops/rnn.cpp): the inputs' gradients are
    // empty and the weights', sums over no rows, zero
    if (needs[3]) {
      for (int64_t d = 0; d < D; ++d) {
        const RnnWeights& wd = s.w[static_cast<size_t>(d)];
        RnnWeights& gw = g.w[static_cast<size_t>(d)];
        for (auto [src, dst] : {std::pair{&wd.w_ih, &gw.w_ih}, std::pair{&wd.w_hh, &gw.w_hh},
                                std::pair{&wd.b_ih, &gw.b_ih}, std::pair{&wd.b_hh, &gw.b_hh}}) {
          if (!src->defined()) continue;
          *dst = empty(src->sizes(), dt, dev);
          fill_(*dst, 0);
        }
      }
    }
    return g;
  }
  for (int64_t d = 0; d < D; ++d) {
    const auto du = static_cast<size_t>(d);
    const RnnWeights& wd = s.w[du];
    const bool reverse = d == 1;
    Tensor dgx = empty({T, N, G * H}, dt, dev);
    Tensor dgh = lstm ? dgx : empty({T, N, G * H}, dt, dev);
    Tensor dh_a = empty({N, H}, dt, dev), dh_b = empty({N, H}, dt, dev);
    if (dh_n.defined())
      copy_(dh_a, select(dh_n, 0, d));
    else
      fill_(dh_a, 0);
    Tensor dc;
    if (lstm) {
      dc = empty({N, H}, dt, dev);
      if (dc_n.defined())
        copy_(dc, select(dc_n, 0, d));
      else
        fill_(dc, 0);
    }
    for (int64_t k = 0; k < T; ++k) {
      const int64_t t = reverse ? k : T - 1 - k;  // the forward order, reversed
      const int64_t prev = reverse ? t + 1 : t, next = reverse ? t : t + 1;
      Tensor dy_t = dyc.defined() ? out_slice(dyc, t, d, H) : Tensor();
      if (lstm) {
        LstmStepBackward st;
        st.gates = select(s.gates[du], 0, t);
        st.c_prev = select(s.cbuf[du], 0, prev);
        st.c_next = select(s.cbuf[du], 0, next);
        st.dh = dh_a;
        st.dy = dy_t;
        st.dc = dc;
        st.dgates = select(dgx, 0, t);
        st.dh_prev = dh_b;
        st.lengths = s.lengths;
        st.t = t;
        lstm_step_backward_kernel(dev.kind, st);
      } else {
        GruStepBackward st;
        st.gx = select(s.gates[du], 0, t);
        st.gh = select(s.gh[du], 0, t);
        st.h_prev = select(s.hbuf[du], 0, prev);
        st.dh = dh_a;
        st.dy = dy_t;
        st.dgx = select(dgx, 0, t);
        st.dgh = select(dgh, 0, t);
        st.dh_prev = dh_b;
        st.lengths = s.lengths;
        st.t = t;
        gru_step_backward_kernel(dev.kind, st);
      }
      gemm(dh_b, select(dgh, 0, t), wd.w_hh, /*accumulate=*/true);
      std::swap(dh_a, dh_b);
    }
    if (g.h0.defined()) copy_(select(g.h0, 0, d), dh_a);
    if (g.c0.defined()) copy_(select(g.c0, 0, d), dc);
    Tensor dgx2 = view(dgx, {T * N, G * H}), dgh2 = view(dgh, {T * N, G * H});
    if (g.x.defined() && I > 0) gemm(view(g.x, {T * N, I}), dgx2, wd.w_ih, d > 0);
    if (g.x.defined() && I == 0 && d == 0) fill_(g.x, 0);
    if (needs[3]) {
      RnnWeights& gw = g.w[du];
      gw.w_ih = empty(wd.w_ih.sizes(), dt, dev);
      if (I > 0) {
        gemm(gw.w_ih, transpose(dgx2, 0, 1), view(x, {T * N, I}), false);
      }
      // h_prev of every step: slots [0, T) forward, [1, T] reverse
      Tensor hprev = narrow(s.hbuf[du], 0, reverse ? 1 : 0, T);
      gw.w_hh = empty(wd.w_hh.sizes(), dt, dev);
      gemm(gw.w_hh, transpose(dgh2, 0, 1), view(hprev, {T * N, H}), false);
      if (wd.b_ih.defined()) gw.b_ih = reduce(ReduceOp::sum, dgx2, {0}, false);
      if (wd.b_hh.defined())
        gw.b_hh = lstm && gw.b_ih.defined() ? gw.b_ih : reduce(ReduceOp::sum, dgh2, {0}, false);
    }
  }
  return g;
}

}  // namespace ops
}  // namespace sl
