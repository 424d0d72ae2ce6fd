// Differentiable matrix products with their backward beside them.
#include "autograd/ops/matmul.h"

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/activation_derivative.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "core/amp.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/matmul.h"
#include "core/ops/view.h"

namespace sl {

namespace {
/// The ops the matmul gradients are written with: the kernels in a plain backward, the
/// differentiable ops while a backward records a graph (create_graph); the same values.
struct KernelOps {
  static Tensor mul(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::mul, a, b); }
  static Tensor unsqueeze(const Tensor& t, int64_t d) { return ops::unsqueeze(t, d); }
  static Tensor squeeze(const Tensor& t, int64_t d) { return ops::squeeze(t, d); }
  static Tensor transpose(const Tensor& t, int64_t a, int64_t b) { return ops::transpose(t, a, b); }
  static Tensor reshape(const Tensor& t, const Shape& s) { return ops::reshape(t, s); }
  static Tensor matmul(const Tensor& a, const Tensor& b) { return ops::matmul(a, b); }
  static Tensor mm(const Tensor& a, const Tensor& b) { return ops::mm(a, b); }
};
struct GraphOps {
  static Tensor mul(const Tensor& a, const Tensor& b) { return sl::mul(a, b); }
  static Tensor unsqueeze(const Tensor& t, int64_t d) { return t.unsqueeze(d); }
  static Tensor squeeze(const Tensor& t, int64_t d) { return t.squeeze(d); }
  static Tensor transpose(const Tensor& t, int64_t a, int64_t b) { return t.transpose(a, b); }
  static Tensor reshape(const Tensor& t, const Shape& s) { return t.reshape(s); }
  static Tensor matmul(const Tensor& a, const Tensor& b) { return sl::matmul(a, b); }
  static Tensor mm(const Tensor& a, const Tensor& b) { return sl::mm(a, b); }
};

/// Gradient of matmul w.r.t. a (shape sa), reduced back to its (possibly 1-d / broadcast) shape.
template <class O>
Tensor matmul_grad_a(const Tensor& g, const Shape& sa, const Tensor& b) {
  size_t ad = sa.size();
  if (ad == 1 && b.dim() == 1) return O::mul(b, g);  // dot
  Tensor g2 = g, b2;
  if (b.dim() == 1) {
    g2 = O::unsqueeze(g, -1);  // [..., M, 1]
    b2 = O::unsqueeze(b, 0);   // [1, K]
  } else {
    b2 = O::transpose(b, -1, -2);
    if (ad == 1) g2 = O::unsqueeze(g, -2);
  }
  Tensor ga = O::matmul(g2, b2);
  if (ad == 1) ga = O::squeeze(ga, -2);
  return sum_to(ga, sa);
}

/// Gradient of matmul w.r.t. b (shape sb).
template <class O>
Tensor matmul_grad_b(const Tensor& g, const Tensor& a, const Shape& sb) {
  size_t bd = sb.size();
  if (a.dim() == 1 && bd == 1) return O::mul(a, g);
  Tensor g2 = g, a2;
  if (a.dim() == 1) {
    g2 = O::unsqueeze(g, -2);  // [..., 1, N]
    a2 = O::unsqueeze(a, -1);  // [K, 1]
  } else {
    a2 = O::transpose(a, -1, -2);
    if (bd == 1) g2 = O::unsqueeze(g, -1);
  }
  if (bd == 2 && a2.dim() > 2) {
    // [..., K, M] @ [..., M, N] summed over the batch == one GEMM over the folded batch
    int64_t K = a2.size(-2), N = g2.size(-1);
    Tensor af = O::reshape(O::transpose(a2, -1, -2), {-1, K});  // [B*M, K]
    Tensor gf = O::reshape(g2, {-1, N});                        // [B*M, N]
    return O::mm(O::transpose(af, 0, 1), gf);
  }
  Tensor gb = O::matmul(a2, g2);
  if (bd == 1) gb = O::squeeze(gb, -1);
  return sum_to(gb, sb);
}

/// The gradients (bias, x, w) of y = x @ w^T + bias from g = dL/dy [..., out], for the edges
/// (bias, x, w) of `c`; x and w saved only where the other needs them.
template <class O>
variable_list linear_backward(const char* name, const BackwardCtx& c, const Tensor& g,
                              const SavedTensor& sx, const SavedTensor& sw) {
  const int64_t out = g.size(-1);
  Tensor gb, gx, gw;
  if (c.needs(0)) gb = sum_to(g, {out});
  if (c.needs(1)) gx = O::matmul(g, sw.unpack(name));  // [..., out] @ [out, in]
  if (c.needs(2)) {
    Tensor xs = sx.unpack(name);  // [rows, out]^T @ [rows, in]
    gw = O::mm(O::transpose(O::reshape(g, {-1, out}), 0, 1), O::reshape(xs, {-1, xs.size(-1)}));
  }
  return {gb, gx, gw};
}

/// linear_backward with the ops grad mode asks for.
variable_list linear_backward(const char* name, const BackwardCtx& c, const Tensor& g,
                              const SavedTensor& sx, const SavedTensor& sw) {
  return GradMode::is_enabled() ? linear_backward<GraphOps>(name, c, g, sx, sw)
                                : linear_backward<KernelOps>(name, c, g, sx, sw);
}

/// The differentiable activation linear_act stands for.
Tensor apply_activation(const Tensor& t, Activation act) {
  switch (act) {
    case Activation::relu:
      return relu(t);
    case Activation::gelu:
      return gelu(t, "none");
    case Activation::gelu_tanh:
      return gelu(t, "tanh");
  }
  SL_CHECK(false, "linear_act: unknown activation ", static_cast<int>(act));
  return {};
}

Tensor record_matmul(const char* name, Tensor out, const Tensor& a, const Tensor& b) {
  if (needs_grad(a, b)) {
    SavedTensor sa = b.requires_grad() ? SavedTensor(a) : SavedTensor();
    SavedTensor sb = a.requires_grad() ? SavedTensor(b) : SavedTensor();
    Shape shape_a = a.sizes(), shape_b = b.sizes();
    record(
        name, {a, b}, {&out},
        [=](const BackwardCtx& c) -> variable_list {
          const bool graph = GradMode::is_enabled();
          Tensor ga, gb;
          if (c.needs(0)) {
            Tensor bv = sb.unpack(name);
            ga = graph ? matmul_grad_a<GraphOps>(c.grad(), shape_a, bv)
                       : matmul_grad_a<KernelOps>(c.grad(), shape_a, bv);
          }
          if (c.needs(1)) {
            Tensor av = sa.unpack(name);
            gb = graph ? matmul_grad_b<GraphOps>(c.grad(), av, shape_b)
                       : matmul_grad_b<KernelOps>(c.grad(), av, shape_b);
          }
          return {ga, gb};
        },
        DoubleBackward::supported);
  }
  return out;
}
}  // namespace

// The products opt in to autocast's `lower` policy (Note [Autocast] in core/amp.h): inside a
// scope, float32 operands are cast (differentiably) to the scope's 16-bit dtype first.
Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = autocast(a_in, AmpPolicy::lower), b = autocast(b_in, AmpPolicy::lower);
  return record_matmul("MatmulBackward", ops::matmul(a, b), a, b);
}
Tensor mm(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = autocast(a_in, AmpPolicy::lower), b = autocast(b_in, AmpPolicy::lower);
  return record_matmul("MmBackward", ops::mm(a, b), a, b);
}
Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = autocast(a_in, AmpPolicy::lower), b = autocast(b_in, AmpPolicy::lower);
  return record_matmul("BmmBackward", ops::bmm(a, b), a, b);
}

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  Tensor p = mm(a, b);
  if (alpha.to_double() != 1.0) p = mul(p, alpha);
  if (beta.to_double() == 0.0) return p;
  ops::check_defined("addmm", bias, "bias");
  return add(p, autocast(bias, AmpPolicy::lower), beta);
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  ops::check_defined("linear", x);
  ops::check_defined("linear", w, "weight");
  SL_CHECK_SHAPE(w.dim() == 2, "linear: weight must be 2-d [out, in], got ", shape_str(w.sizes()));
  SL_CHECK_SHAPE(x.dim() >= 1 && x.size(-1) == w.size(1), "linear: input of shape ",
                 shape_str(x.sizes()), " does not match weight ", shape_str(w.sizes()),
                 " (expected last dim ", w.size(1), ")");
  if (bias.defined()) {
    SL_CHECK_SHAPE(bias.dim() == 1 && bias.size(0) == w.size(0), "linear: bias of shape ",
                   shape_str(bias.sizes()), " does not match weight ", shape_str(w.sizes()));
  }
  Tensor xa = autocast(x, AmpPolicy::lower), wa = autocast(w, AmpPolicy::lower);
  Tensor ba = bias.defined() ? autocast(bias, AmpPolicy::lower) : Tensor();
  if (ba.defined() && (ba.dtype() != xa.dtype() || ba.device() != xa.device())) {
    return add(matmul(xa, wa.t()), ba);  // type promotion / device errors as add's
  }
  // One node: the weight gradient is computed as g^T x, directly in w's [out, in] layout (the
  // gradient of w.t() would be a transposed view that accumulating into .grad() copies), and the
  // forward adds the bias in place (the device's fused GEMM epilogue where it has one).
  Tensor y = ops::linear(xa, wa, ba);
  if (needs_grad(xa, wa, ba)) {
    SavedTensor sx = wa.requires_grad() ? SavedTensor(xa) : SavedTensor();
    SavedTensor sw = xa.requires_grad() ? SavedTensor(wa) : SavedTensor();
    // Edges (bias, x, w), as PyTorch's addmm: the bias gradient is accumulated before the
    // weight's, the order in which the former add-then-matmul graph delivered them (gradient
    // hooks, e.g. dist bucketing, see that order).
    record(
        "LinearBackward", {ba, xa, wa}, {&y},
        [sx, sw](const BackwardCtx& c) -> variable_list {
          return linear_backward("LinearBackward", c, c.grad(), sx, sw);
        },
        DoubleBackward::supported);
  }
  return y;
}

Tensor linear_act(const Tensor& x, const Tensor& w, const Tensor& bias, Activation act) {
  ops::check_defined("linear_act", x);
  ops::check_defined("linear_act", w, "weight");
  Tensor xa = autocast(x, AmpPolicy::lower), wa = autocast(w, AmpPolicy::lower);
  Tensor ba = bias.defined() ? autocast(bias, AmpPolicy::lower) : Tensor();
  if (ba.defined() && ba.dtype() != xa.dtype() && wa.dtype() == xa.dtype() &&
      is_floating(xa.dtype()) && ba.device() == xa.device()) {
    return apply_activation(linear(xa, wa, ba), act);  // the bias promoted as linear's add does
  }
  // One node, as linear's (edges bias, x, w; the weight gradient in w's layout), whose backward
  // first turns the incoming gradient into the pre-activation's: from the saved output for relu
  // (y > 0 exactly where the pre-activation is), from the saved pre-activation for the gelus.
  const bool grad = needs_grad(xa, wa, ba);
  ops::LinearActResult r = ops::linear_act_forward(xa, wa, ba, act, grad);
  Tensor y = r.out;
  if (grad) {
    // Under create_graph the gelus' derivative is taken at the pre-activation recomputed from
    // x, w and bias attached to their history (the saved one has none), so all three are kept.
    const bool recompute = act != Activation::relu;
    SavedTensor sx = recompute || wa.requires_grad() ? SavedTensor(xa) : SavedTensor();
    SavedTensor sw = recompute || xa.requires_grad() ? SavedTensor(wa) : SavedTensor();
    SavedTensor sb = recompute ? SavedTensor(ba) : SavedTensor();
    SavedTensor saved(r.saved);
    record(
        "LinearActBackward", {ba, xa, wa}, {&y},
        [sx, sw, sb, saved, act](const BackwardCtx& c) -> variable_list {
          const char* name = "LinearActBackward";
          if (!GradMode::is_enabled()) {
            Tensor g = ops::linear_act_backward(c.grad(), saved.unpack(name), act);
            return linear_backward(name, c, g, sx, sw);
          }
          // create_graph (Note [Double backward]): the pre-activation's gradient as recorded ops
          const Tensor& g = c.grad();
          Tensor gz;
          if (act == Activation::relu) {
            // relu's derivative is piecewise constant: the saved output's sign mask is enough
            gz = where(gt(saved.unpack(name), 0), g,
                       zeros({}, {.dtype = g.dtype(), .device = g.device()}));
          } else {
            Tensor z = linear(sx.unpack(name), sw.unpack(name), sb.unpack(name));
            gz = mul(g, detail::gelu_derivative(z, act == Activation::gelu_tanh));
          }
          return linear_backward(name, c, gz, sx, sw);
        },
        DoubleBackward::supported);
  }
  return y;
}

Tensor outer(const Tensor& a, const Tensor& b) {
  SL_CHECK_SHAPE(a.dim() == 1 && b.dim() == 1, "outer: expected 1-d tensors, got ",
                 shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  return mul(a.unsqueeze(1), b.unsqueeze(0));
}

Tensor dot(const Tensor& a, const Tensor& b) {
  SL_CHECK_SHAPE(a.dim() == 1 && b.dim() == 1 && a.size(0) == b.size(0),
                 "dot: expected two 1-d tensors of equal length, got ", shape_str(a.sizes()),
                 " and ", shape_str(b.sizes()));
  return matmul(a, b);
}

Tensor Tensor::matmul(const Tensor& o) const {
  return sl::matmul(*this, o);
}
Tensor Tensor::mm(const Tensor& o) const {
  return sl::mm(*this, o);
}
Tensor Tensor::bmm(const Tensor& o) const {
  return sl::bmm(*this, o);
}

}  // namespace sl
