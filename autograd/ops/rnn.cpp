// Differentiable LSTM / GRU: one autograd node per layer (both directions), whose backward is
// the layer's BPTT (core/ops/rnn.cpp); cells reuse the step kernels through a fused pointwise
// node after two linear projections.
#include "autograd/ops/rnn.h"

#include <functional>
#include <tuple>

#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/dropout.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/matmul.h"
#include "autograd/ops/shape.h"
#include "core/amp.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/reduce.h"
#include "core/ops/rnn.h"
#include "core/ops/view.h"

namespace sl {

namespace {

// ---- shared checks ------------------------------------------------------------------------

void check_same(const char* op, const Tensor& ref, const Tensor& t, const char* what) {
  if (!t.defined()) return;
  SL_CHECK_DEVICE(t.device() == ref.device(), op, ": ", what, " is on ", t.device(),
                  " but the input is on ", ref.device());
  SL_CHECK_DTYPE(t.dtype() == ref.dtype(), op, ": ", what, " has dtype ", dtype_name(t.dtype()),
                 " but the input has ", dtype_name(ref.dtype()));
}

void check_shape(const char* op, const Tensor& t, const Shape& want, const std::string& what) {
  SL_CHECK_SHAPE(t.sizes() == want, op, ": ", what, " has shape ", shape_str(t.sizes()),
                 ", expected ", shape_str(want));
}

// ---- double backward --------------------------------------------------------------------------
// Note [RNN double backward]: the fused step kernels record nothing, so under create_graph (Note
// [Double backward] in autograd/engine.cpp) a cell's or a layer's backward recomputes its forward
// as differentiable ops (the equations of Note [RNN layout], the same masking for lengths) from
// its inputs attached to their history and returns grad(..., create_graph) of that: a gradient
// with a graph, differentiable again. The plain backward keeps the kernels.

/// LSTM's pointwise step on pre-activations (all biases included) as differentiable ops.
std::pair<Tensor, Tensor> lstm_step_ops(const Tensor& gates, const Tensor& c) {
  std::vector<Tensor> q = gates.chunk(4, 1);  // i, f, g, o
  Tensor c_next = sigmoid(q[1]) * c + sigmoid(q[0]) * tanh(q[2]);
  return {sigmoid(q[3]) * tanh(c_next), c_next};
}

/// GRU's pointwise step (GruStep's equations) as differentiable ops.
Tensor gru_step_ops(const Tensor& gx, const Tensor& gh_in, const Tensor& h, const Tensor& b_hh) {
  Tensor gh = b_hh.defined() ? gh_in + b_hh : gh_in;
  std::vector<Tensor> x = gx.chunk(3, 1), r = gh.chunk(3, 1);  // r, z, n thirds
  Tensor reset = sigmoid(x[0] + r[0]), update = sigmoid(x[1] + r[1]);
  Tensor n = tanh(x[2] + reset * r[2]);
  return (1.0 - update) * n + update * h;
}

/// The create_graph backward of a fused node with inputs `saved` (Note [RNN double backward]):
/// `ops_forward` recomputes the node's outputs from its inputs as differentiable ops.
variable_list recomputed_grads(const char* name, const BackwardCtx& c,
                               const std::vector<SavedTensor>& saved,
                               const std::function<TensorList(const TensorList&)>& ops_forward) {
  TensorList in;
  for (const SavedTensor& t : saved) {
    // A fresh alias (a view) of each input: grad() w.r.t. the aliases sees only their direct
    // uses below. W.r.t. the inputs themselves, one input's gradient would also flow into
    // another through the history between them (a GRU cell's gh = h @ W_hh^T leads to h).
    Tensor t_in = t.unpack(name);
    in.push_back(t_in.defined() && t_in.requires_grad() ? t_in.view(t_in.sizes()) : t_in);
  }
  variable_list result(in.size());
  variable_list wrt;
  std::vector<size_t> slot;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].defined() && in[i].requires_grad() && c.needs(i)) {
      wrt.push_back(in[i]);
      slot.push_back(i);
    }
  }
  if (wrt.empty()) return result;
  TensorList outs = ops_forward(in);
  variable_list roots, grads;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].defined() && outs[i].requires_grad()) {
      roots.push_back(outs[i]);
      grads.push_back(c.grad(i));
    }
  }
  if (roots.empty()) return result;
  variable_list g = grad(roots, wrt, grads, /*retain_graph=*/true, /*create_graph=*/true);
  for (size_t k = 0; k < wrt.size(); ++k) result[slot[k]] = g[k];
  return result;
}

std::vector<SavedTensor> save_all(const TensorList& inputs) {
  return std::vector<SavedTensor>(inputs.begin(), inputs.end());
}

// ---- cells ------------------------------------------------------------------------------------

/// Fused LSTM pointwise step on pre-activation gates [N, 4H] and c [N, H]: (h', c').
std::pair<Tensor, Tensor> lstm_pointwise(const Tensor& gates, const Tensor& c) {
  const int64_t N = gates.size(0), H = c.size(1);
  LstmStep st;
  st.gates = ops::contiguous(gates, /*force_copy=*/true);  // becomes the activations
  st.c_prev = ops::contiguous(c);
  st.h_prev = st.c_prev;  // read only for inactive rows; there are none without lengths
  st.h_next = ops::empty({N, H}, c.dtype(), c.device());
  st.c_next = ops::empty({N, H}, c.dtype(), c.device());
  lstm_step_forward_kernel(c.device().kind, st);
  Tensor h_out = st.h_next, c_out = st.c_next;
  if (needs_grad(gates, c)) {
    // SavedTensor, not Tensor captures: c_next is the output c_out itself, and a captured
    // Tensor would make the node own the tensor that owns it (a leaked graph per call).
    record(
        "LstmCellBackward", {gates, c}, {&h_out, &c_out},
        [sact = SavedTensor(st.gates), scp = SavedTensor(st.c_prev), scn = SavedTensor(st.c_next),
         sin = save_all({gates, c})](const BackwardCtx& ctx) {
          const char* name = "LstmCellBackward";
          if (GradMode::is_enabled()) {
            return recomputed_grads(name, ctx, sin, [](const TensorList& in) {
              auto [h, c] = lstm_step_ops(in[0], in[1]);
              return TensorList{h, c};
            });
          }
          const Tensor act = sact.unpack(name), cp = scp.unpack(name);
          LstmStepBackward b;
          b.gates = act;
          b.c_prev = cp;
          b.c_next = scn.unpack(name);
          b.dh = ops::contiguous(ctx.grad(0));
          b.dc = ops::contiguous(ctx.grad(1), /*force_copy=*/true);
          b.dgates = ops::empty(act.sizes(), act.dtype(), act.device());
          b.dh_prev = ops::empty(cp.sizes(), cp.dtype(), cp.device());
          lstm_step_backward_kernel(act.device().kind, b);
          return variable_list{b.dgates, b.dc};
        },
        DoubleBackward::supported);
  }
  return {h_out, c_out};
}

/// Fused GRU pointwise step on gx [N, 3H] (input projection with b_ih), gh [N, 3H]
/// (h @ W_hh^T), h [N, H] and b_hh [3H] (or undefined): h'.
Tensor gru_pointwise(const Tensor& gx, const Tensor& gh, const Tensor& h, const Tensor& b_hh) {
  const int64_t N = gx.size(0), H = h.size(1);
  GruStep st;
  st.gx = ops::contiguous(gx, true);
  st.gh = ops::contiguous(gh, true);
  st.bias_hh = b_hh.defined() ? ops::contiguous(b_hh) : b_hh;
  st.h_prev = ops::contiguous(h);
  st.h_next = ops::empty({N, H}, h.dtype(), h.device());
  gru_step_forward_kernel(h.device().kind, st);
  Tensor out = st.h_next;
  if (needs_grad(gx, gh, h, b_hh)) {
    record(
        "GruCellBackward", {gx, gh, h, b_hh}, {&out},
        [sx = st.gx, sh = st.gh, hp = st.h_prev,
         sin = save_all({gx, gh, h, b_hh})](const BackwardCtx& ctx) {
          if (GradMode::is_enabled()) {
            return recomputed_grads("GruCellBackward", ctx, sin, [](const TensorList& in) {
              return TensorList{gru_step_ops(in[0], in[1], in[2], in[3])};
            });
          }
          GruStepBackward b;
          b.gx = sx;
          b.gh = sh;
          b.h_prev = hp;
          b.dh = ops::contiguous(ctx.grad(0));
          b.dgx = ops::empty(sx.sizes(), sx.dtype(), sx.device());
          b.dgh = ops::empty(sh.sizes(), sh.dtype(), sh.device());
          b.dh_prev = ops::empty(hp.sizes(), hp.dtype(), hp.device());
          gru_step_backward_kernel(sx.device().kind, b);
          Tensor db = ctx.needs(3) ? ops::reduce(ReduceOp::sum, b.dgh, {0}, false) : Tensor();
          return variable_list{b.dgx, b.dgh, b.dh_prev, db};
        },
        DoubleBackward::supported);
  }
  return out;
}

/// Checks a cell call; returns (input, h, c) as 2-d tensors (zeros for undefined states) and
/// whether the input was unbatched.
struct CellArgs {
  Tensor x, h, c;
  bool unbatched = false;
};

CellArgs check_cell(const char* op, int64_t G, const Tensor& input, const Tensor& h,
                    const Tensor& c, bool has_c, const Tensor& w_ih, const Tensor& w_hh,
                    const Tensor& b_ih, const Tensor& b_hh) {
  ops::check_defined(op, input);
  ops::check_defined(op, w_ih, "weight_ih");
  ops::check_defined(op, w_hh, "weight_hh");
  SL_CHECK_DTYPE(is_floating(input.dtype()), op, ": expected a floating input, got ",
                 dtype_name(input.dtype()));
  SL_CHECK_SHAPE(input.dim() == 1 || input.dim() == 2, op, ": expected input [N, I] or [I], got ",
                 shape_str(input.sizes()));
  SL_CHECK_SHAPE(w_hh.dim() == 2 && w_hh.size(0) % G == 0 && w_hh.size(1) * G == w_hh.size(0), op,
                 ": weight_hh must be [", G, " * H, H], got ", shape_str(w_hh.sizes()));
  const int64_t H = w_hh.size(1);
  CellArgs a;
  a.unbatched = input.dim() == 1;
  a.x = a.unbatched ? input.unsqueeze(0) : input;
  const int64_t N = a.x.size(0), I = a.x.size(1);
  check_shape(op, w_ih, {G * H, I}, "weight_ih");
  for (const auto& [t, name] : {std::pair{&b_ih, "bias_ih"}, std::pair{&b_hh, "bias_hh"}}) {
    if (t->defined()) check_shape(op, *t, {G * H}, name);
  }
  auto state = [&](const Tensor& s, const char* name) {
    if (!s.defined()) return zeros({N, H}, {.dtype = input.dtype(), .device = input.device()});
    check_shape(op, s, a.unbatched ? Shape{H} : Shape{N, H}, name);
    return a.unbatched ? s.unsqueeze(0) : s;
  };
  a.h = state(h, "hx");
  if (has_c) a.c = state(c, "cx");
  check_same(op, input, w_ih, "weight_ih");
  check_same(op, input, w_hh, "weight_hh");
  check_same(op, input, b_ih, "bias_ih");
  check_same(op, input, b_hh, "bias_hh");
  check_same(op, input, a.h, "hx");
  check_same(op, input, a.c, "cx");
  return a;
}

// ---- whole sequences ------------------------------------------------------------------------

/// One layer (both directions) as one autograd node: outputs y, h_n (and c_n for LSTM).
/// One layer (Note [RNN layout]) as differentiable ops: {y, h_n, c_n} from x [T, N, I], h0 / c0
/// [D, N, H] and the flat weights (w_ih, w_hh, b_ih, b_hh per direction).
TensorList rnn_layer_ops(RnnMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0,
                         const TensorList& wts, const Tensor& lengths) {
  const bool lstm = mode == RnnMode::lstm;
  const int64_t T = x.size(0), D = static_cast<int64_t>(wts.size() / 4);
  TensorList ys, hs, cs;
  for (int64_t d = 0; d < D; ++d) {
    const Tensor &w_ih = wts[4 * d], &w_hh = wts[4 * d + 1], &b_ih = wts[4 * d + 2],
                 &b_hh = wts[4 * d + 3];
    Tensor h = h0.select(0, d), c = lstm ? c0.select(0, d) : Tensor();
    TensorList y(static_cast<size_t>(T));
    for (int64_t step = 0; step < T; ++step) {
      const int64_t t = d == 0 ? step : T - 1 - step;
      Tensor gx = linear(x.select(0, t), w_ih, b_ih), gh = linear(h, w_hh);
      Tensor h_next, c_next;
      if (lstm) {
        std::tie(h_next, c_next) = lstm_step_ops(b_hh.defined() ? gx + gh + b_hh : gx + gh, c);
      } else {
        h_next = gru_step_ops(gx, gh, h, b_hh);
      }
      Tensor out = h_next;
      if (lengths.defined()) {  // inactive rows keep their state and output 0
        Tensor active = lengths.gt(t).unsqueeze(1);
        out = where(active, h_next, zeros({}, {.dtype = h.dtype(), .device = h.device()}));
        h_next = where(active, h_next, h);
        if (lstm) c_next = where(active, c_next, c);
      }
      y[static_cast<size_t>(t)] = out;
      h = h_next;
      c = c_next;
    }
    ys.push_back(stack(y, 0));
    hs.push_back(h);
    if (lstm) cs.push_back(c);
  }
  return {D == 1 ? ys[0] : cat(ys, 2), stack(hs, 0), lstm ? stack(cs, 0) : Tensor()};
}

std::vector<Tensor> rnn_layer(RnnMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0,
                              const std::vector<RnnWeights>& w, const Tensor& lengths) {
  const bool lstm = mode == RnnMode::lstm;
  RnnLayerOutput r = ops::rnn_layer_forward(mode, ops::contiguous(x), ops::contiguous(h0),
                                            lstm ? ops::contiguous(c0) : Tensor(), w, lengths);
  Tensor y = r.y, hn = r.h_n, cn = r.c_n;
  TensorList inputs{x, h0, c0};
  for (const auto& wd : w) inputs.insert(inputs.end(), {wd.w_ih, wd.w_hh, wd.b_ih, wd.b_hh});
  if (needs_grad_list(inputs)) {
    std::vector<Tensor*> outs{&y, &hn};
    if (lstm) outs.push_back(&cn);
    const char* name = lstm ? "LstmLayerBackward" : "GruLayerBackward";
    // version guards: the backward reads x and the weights, which must not change in between
    std::vector<SavedTensor> guards{SavedTensor(r.saved.x)};
    for (const auto& wd : w) {
      for (const Tensor* t : {&wd.w_ih, &wd.w_hh}) guards.emplace_back(*t);
    }
    record(
        name, inputs, outs,
        [saved = std::move(r.saved), guards, lstm, name, sin = save_all(inputs), mode,
         lengths](const BackwardCtx& c) {
          if (GradMode::is_enabled()) {
            return recomputed_grads(name, c, sin, [mode, lengths](const TensorList& in) {
              return rnn_layer_ops(mode, in[0], in[1], in[2], TensorList(in.begin() + 3, in.end()),
                                   lengths);
            });
          }
          for (const auto& g : guards) g.unpack(name);
          bool any_w = false;
          for (size_t i = 3; i < 3 + 4 * saved.w.size(); ++i) any_w = any_w || c.needs(i);
          RnnLayerGrads g =
              ops::rnn_layer_backward(saved, c.grad(0), c.grad(1), lstm ? c.grad(2) : Tensor(),
                                      {c.needs(0), c.needs(1), c.needs(2), any_w});
          variable_list out{g.x, g.h0, g.c0};
          for (size_t d = 0; d < saved.w.size(); ++d) {
            const RnnWeights& gw = g.w[d];
            size_t base = 3 + 4 * d;
            out.push_back(c.needs(base) ? gw.w_ih : Tensor());
            out.push_back(c.needs(base + 1) ? gw.w_hh : Tensor());
            out.push_back(c.needs(base + 2) ? gw.b_ih : Tensor());
            out.push_back(c.needs(base + 3) ? gw.b_hh : Tensor());
          }
          return out;
        },
        DoubleBackward::supported);
  }
  return {y, hn, cn};
}

/// Concatenation along dim 0 with its gradient (the layers' final states into [L * D, N, H]).
Tensor concat0(const TensorList& parts) {
  int64_t total = 0;
  for (const auto& p : parts) total += p.size(0);
  Shape s = parts[0].sizes();
  s[0] = total;
  Tensor out = ops::empty(s, parts[0].dtype(), parts[0].device());
  std::vector<int64_t> starts;
  int64_t at = 0;
  for (const auto& p : parts) {
    ops::copy_(ops::narrow(out, 0, at, p.size(0)), p);
    starts.push_back(at);
    at += p.size(0);
  }
  if (needs_grad_list(parts)) {
    std::vector<int64_t> sizes;
    for (const auto& p : parts) sizes.push_back(p.size(0));
    record(
        "CatBackward", parts, {&out},
        [starts, sizes](const BackwardCtx& c) {
          const bool graph = GradMode::is_enabled();  // create_graph: narrow as a tracked view
          variable_list g;
          for (size_t i = 0; i < starts.size(); ++i)
            g.push_back(graph ? c.grad().narrow(0, starts[i], sizes[i])
                              : ops::narrow(c.grad(), 0, starts[i], sizes[i]));
          return g;
        },
        DoubleBackward::supported);
  }
  return out;
}

struct SeqResult {
  Tensor output, h_n, c_n;
};

SeqResult run_rnn(RnnMode mode, const Tensor& input, const Tensor& h0_in, const Tensor& c0_in,
                  const TensorList& params, bool has_biases, int64_t num_layers, double dropout_p,
                  bool train, bool bidirectional, bool batch_first, const Tensor& lengths,
                  Generator* gen) {
  const char* op = rnn_mode_name(mode);
  const bool lstm = mode == RnnMode::lstm;
  const int64_t G = lstm ? 4 : 3, D = bidirectional ? 2 : 1, L = num_layers;
  ops::check_defined(op, input);
  SL_CHECK(L >= 1, op, ": num_layers must be at least 1, got ", L);
  SL_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, op, ": dropout must be in [0, 1], got ",
           dropout_p);
  SL_CHECK_DTYPE(is_floating(input.dtype()), op, ": expected a floating input, got ",
                 dtype_name(input.dtype()));
  SL_CHECK_SHAPE(input.dim() == 2 || input.dim() == 3, op,
                 ": expected input [T, N, I] (or [N, T, I] with batch_first, [T, I] unbatched), "
                 "got ",
                 shape_str(input.sizes()));
  const size_t per = has_biases ? 4 : 2;
  SL_CHECK_SHAPE(params.size() == static_cast<size_t>(L * D) * per, op, ": expected ",
                 L * D * static_cast<int64_t>(per), " parameters (", L, " layers x ", D,
                 " directions x ", per, "), got ", params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    SL_CHECK(params[i].defined(), op, ": parameter ", i, " is undefined");
    check_same(op, input, params[i], "a parameter");
  }
  const bool unbatched = input.dim() == 2;
  Tensor x = unbatched ? input.unsqueeze(1) : (batch_first ? input.transpose(0, 1) : input);
  const int64_t T = x.size(0), N = x.size(1), I = x.size(2);
  // Note [Empty RNN batch]: N = 0 is accepted, as PyTorch: empty output and [L * D, 0, H] final
  // states, and zero gradients for the weights. T = 0 stays refused (as PyTorch): there would be
  // no step to take the final state from.
  SL_CHECK_SHAPE(T > 0, op, ": expected a non-empty sequence (T > 0), got input ",
                 shape_str(input.sizes()));
  SL_CHECK_SHAPE(params[1].dim() == 2, op, ": weight_hh_l0 must be 2-d, got ",
                 shape_str(params[1].sizes()));
  const int64_t H = params[1].size(1);
  // per layer and direction: the weights, checked against the expected shapes
  std::vector<std::vector<RnnWeights>> layers(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t d = 0; d < D; ++d) {
      size_t base = static_cast<size_t>(l * D + d) * per;
      std::string sfx = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
      RnnWeights w{params[base], params[base + 1], has_biases ? params[base + 2] : Tensor(),
                   has_biases ? params[base + 3] : Tensor()};
      check_shape(op, w.w_ih, {G * H, l == 0 ? I : D * H}, "weight_ih" + sfx);
      check_shape(op, w.w_hh, {G * H, H}, "weight_hh" + sfx);
      if (has_biases) {
        check_shape(op, w.b_ih, {G * H}, "bias_ih" + sfx);
        check_shape(op, w.b_hh, {G * H}, "bias_hh" + sfx);
      }
      layers[static_cast<size_t>(l)].push_back(w);
    }
  }
  auto state = [&](const Tensor& s, const char* name) {
    if (!s.defined()) {
      return zeros({L * D, N, H}, {.dtype = input.dtype(), .device = input.device()});
    }
    check_same(op, input, s, name);
    check_shape(op, s, unbatched ? Shape{L * D, H} : Shape{L * D, N, H}, name);
    return unbatched ? s.unsqueeze(1) : s;
  };
  Tensor h0 = state(h0_in, "h0");
  Tensor c0 = lstm ? state(c0_in, "c0") : Tensor();
  Tensor len;
  if (lengths.defined()) len = ops::check_rnn_lengths(op, lengths, T, N, input.device());

  TensorList hs, cs;
  Tensor layer_in = x;
  for (int64_t l = 0; l < L; ++l) {
    if (l > 0 && train && dropout_p > 0.0) layer_in = sl::dropout(layer_in, dropout_p, true, gen);
    Tensor h0l = h0.narrow(0, l * D, D);
    Tensor c0l = lstm ? c0.narrow(0, l * D, D) : Tensor();
    std::vector<Tensor> r =
        rnn_layer(mode, layer_in, h0l, c0l, layers[static_cast<size_t>(l)], len);
    layer_in = r[0];
    hs.push_back(r[1]);
    if (lstm) cs.push_back(r[2]);
  }
  SeqResult res;
  res.output = layer_in;
  res.h_n = L == 1 ? hs[0] : concat0(hs);
  if (lstm) res.c_n = L == 1 ? cs[0] : concat0(cs);
  if (unbatched) {
    res.output = res.output.squeeze(1);
    res.h_n = res.h_n.squeeze(1);
    if (lstm) res.c_n = res.c_n.squeeze(1);
  } else if (batch_first) {
    res.output = res.output.transpose(0, 1);
  }
  return res;
}

}  // namespace

std::pair<Tensor, Tensor> lstm_cell(const Tensor& input_in, const Tensor& h_in, const Tensor& c_in,
                                    const Tensor& w_ih_in, const Tensor& w_hh_in,
                                    const Tensor& b_ih_in, const Tensor& b_hh_in) {
  // autocast's lower policy (Note [Autocast]) on every floating input, states included
  const Tensor input = autocast(input_in, AmpPolicy::lower), h = autocast(h_in, AmpPolicy::lower),
               c = autocast(c_in, AmpPolicy::lower), w_ih = autocast(w_ih_in, AmpPolicy::lower),
               w_hh = autocast(w_hh_in, AmpPolicy::lower),
               b_ih = autocast(b_ih_in, AmpPolicy::lower),
               b_hh = autocast(b_hh_in, AmpPolicy::lower);
  CellArgs a = check_cell("lstm_cell", 4, input, h, c, true, w_ih, w_hh, b_ih, b_hh);
  Tensor gates = add(linear(a.x, w_ih, b_ih), linear(a.h, w_hh, b_hh));
  auto [h1, c1] = lstm_pointwise(gates, a.c);
  if (a.unbatched) return {h1.squeeze(0), c1.squeeze(0)};
  return {h1, c1};
}

Tensor gru_cell(const Tensor& input_in, const Tensor& h_in, const Tensor& w_ih_in,
                const Tensor& w_hh_in, const Tensor& b_ih_in, const Tensor& b_hh_in) {
  const Tensor input = autocast(input_in, AmpPolicy::lower), h = autocast(h_in, AmpPolicy::lower),
               w_ih = autocast(w_ih_in, AmpPolicy::lower),
               w_hh = autocast(w_hh_in, AmpPolicy::lower),
               b_ih = autocast(b_ih_in, AmpPolicy::lower),
               b_hh = autocast(b_hh_in, AmpPolicy::lower);
  CellArgs a = check_cell("gru_cell", 3, input, h, Tensor(), false, w_ih, w_hh, b_ih, b_hh);
  Tensor h1 = gru_pointwise(linear(a.x, w_ih, b_ih), linear(a.h, w_hh), a.h, b_hh);
  return a.unbatched ? h1.squeeze(0) : h1;
}

std::tuple<Tensor, Tensor, Tensor> lstm(const Tensor& input, const Tensor& h0, const Tensor& c0,
                                        const TensorList& params, bool has_biases,
                                        int64_t num_layers, double dropout, bool train,
                                        bool bidirectional, bool batch_first, const Tensor& lengths,
                                        Generator* gen) {
  SeqResult r =
      run_rnn(RnnMode::lstm, autocast(input, AmpPolicy::lower), autocast(h0, AmpPolicy::lower),
              autocast(c0, AmpPolicy::lower), autocast(params, AmpPolicy::lower), has_biases,
              num_layers, dropout, train, bidirectional, batch_first, lengths, gen);
  return {r.output, r.h_n, r.c_n};
}

std::pair<Tensor, Tensor> gru(const Tensor& input, const Tensor& h0, const TensorList& params,
                              bool has_biases, int64_t num_layers, double dropout, bool train,
                              bool bidirectional, bool batch_first, const Tensor& lengths,
                              Generator* gen) {
  SeqResult r =
      run_rnn(RnnMode::gru, autocast(input, AmpPolicy::lower), autocast(h0, AmpPolicy::lower),
              Tensor(), autocast(params, AmpPolicy::lower), has_biases, num_layers, dropout, train,
              bidirectional, batch_first, lengths, gen);
  return {r.output, r.h_n};
}

}  // namespace sl
