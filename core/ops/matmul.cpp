#include "core/ops/matmul.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/view.h"

namespace sl {

SL_DEFINE_KERNEL(bmm_kernel, void(const Tensor& out, const Tensor& a, const Tensor& b,
                                  Scalar alpha, Scalar beta));
SL_DEFINE_KERNEL(addmm_bias_kernel,
                 bool(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias));
SL_DEFINE_KERNEL(addmm_act_kernel,
                 AddmmActResult(const Tensor& out, const Tensor& a, const Tensor& b,
                                const Tensor& bias, Activation act, bool want_pre));

const char* activation_name(Activation act) {
  switch (act) {
    case Activation::relu:
      return "relu";
    case Activation::gelu:
      return "gelu";
    case Activation::gelu_tanh:
      return "gelu_tanh";
  }
  return "?";
}

BlasMatrix blas_matrix(int64_t rows, int64_t cols, int64_t s_row, int64_t s_col) {
  BlasMatrix m;
  if (s_col == 1 && (s_row >= std::max<int64_t>(1, cols) || rows == 1)) {
    m.ok = true;
    m.ld = rows == 1 ? std::max<int64_t>(1, cols) : s_row;
  } else if (s_row == 1 && (s_col >= std::max<int64_t>(1, rows) || cols == 1)) {
    m.ok = true;
    m.trans = true;
    m.ld = cols == 1 ? std::max<int64_t>(1, rows) : s_col;
  }
  return m;
}

namespace ops {

Tensor blas_operand(const Tensor& t) {
  return blas_matrix(t.size(1), t.size(2), t.stride(1), t.stride(2)).ok ? t : contiguous(t, true);
}

namespace {
void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a, "first operand");
  check_defined(op, b, "second operand");
  check_same_device(op, {&a, &b});
  SL_CHECK_DTYPE(a.dtype() == b.dtype(), op, ": expected both operands to have the same dtype, got ",
                 dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  SL_CHECK_DTYPE(!is_bool(a.dtype()), op, ": not supported for bool tensors");
}

/// [B,M,K] @ [B,K,N] after all checks.
Tensor bmm_unchecked(const Tensor& a, const Tensor& b) {
  Tensor out = empty({a.size(0), a.size(1), b.size(2)}, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  if (a.size(2) == 0) {
    fill_(out, 0);
    return out;
  }
  bmm_kernel(a.device().kind, out, a, b, Scalar(1), Scalar(0));
  return out;
}

/// a [batch..., M, K] @ b [batch..., K, N] (one batch shape of nb matrices, at least one batch
/// dim) -> [nb, M, N]. The batch dims are merged into one bmm when both operands allow it as a
/// view. Otherwise (e.g. attention heads: a [B, H, L, D] view of [B, L, H * D] rows) the product
/// runs on the CPU as one bmm over the last batch dim per index of the leading ones, on strided
/// views, rather than copying the operands; unless that would be many calls of little work each.
/// On other devices the operands are copied and one bmm runs: on the H200 a 4-layer encoder step
/// (batch 32, 4 heads) spent 10.3 of its 12.9 GPU ms in 801 such per-batch calls.
Tensor batched_matmul(const Tensor& a, const Tensor& b, int64_t nb) {
  const int64_t nd = a.dim() - 2, M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Shape st;
  const bool merges = compute_view_strides(a.sizes(), a.strides(), {nb, M, K}, st) &&
                      compute_view_strides(b.sizes(), b.strides(), {nb, K, N}, st);
  const int64_t last = nd > 0 ? a.size(nd - 1) : 1, outer = last > 0 ? nb / last : 0;
  const bool few_calls = outer <= 64 || last * M * N * K >= (int64_t{1} << 15);
  if (merges || nd < 2 || nb == 0 || M == 0 || N == 0 || K == 0 || !few_calls ||
      a.device().kind != DeviceKind::cpu) {
    return bmm_unchecked(reshape(a, {nb, M, K}), reshape(b, {nb, K, N}));
  }
  Tensor out = empty({nb, M, N}, a.dtype(), a.device());
  const size_t d = static_cast<size_t>(nd - 1);  // the last batch dim
  const Shape& as = a.strides();
  const Shape& bs = b.strides();
  std::vector<int64_t> idx(d, 0);  // index over the leading batch dims, last fastest
  for (int64_t o = 0; o < outer; ++o) {
    int64_t oa = a.storage_offset(), ob = b.storage_offset();
    for (size_t i = 0; i < d; ++i) {
      oa += idx[i] * as[i];
      ob += idx[i] * bs[i];
    }
    Tensor ao = as_strided(a, {last, M, K}, {as[d], as[d + 1], as[d + 2]}, oa);
    Tensor bo = as_strided(b, {last, K, N}, {bs[d], bs[d + 1], bs[d + 2]}, ob);
    Tensor co = narrow(out, 0, o * last, last);
    bmm_kernel(a.device().kind, co, ao, bo, Scalar(1), Scalar(0));
    for (size_t i = d; i-- > 0;) {
      if (++idx[i] < a.size(static_cast<int64_t>(i))) break;
      idx[i] = 0;
    }
  }
  return out;
}

/// a [M, K] @ b [K, N] + bias [N] through the device's GEMM with a bias epilogue; undefined when
/// the device has none, it declines this case, or the operands are not such (the caller's
/// unfused path then reports any error).
Tensor fused_addmm_bias(const Tensor& a, const Tensor& b, const Tensor& bias) {
  const DeviceKind k = a.device().kind;
  if (!addmm_bias_kernel.has(k) || !is_floating(a.dtype()) || b.dtype() != a.dtype() ||
      bias.dtype() != a.dtype() || b.device() != a.device() || bias.device() != a.device() ||
      a.dim() != 2 || b.dim() != 2 || a.size(1) != b.size(0) || bias.dim() != 1 ||
      bias.size(0) != b.size(1) || a.size(0) == 0 || a.size(1) == 0 || b.size(1) == 0) {
    return {};
  }
  Tensor out = empty({a.size(0), b.size(1)}, a.dtype(), a.device());
  return addmm_bias_kernel(k, out, a, b, bias) ? out : Tensor();
}
}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  check_pair("mm", a, b);
  SL_CHECK_SHAPE(a.dim() == 2 && b.dim() == 2, "mm: expected 2-d tensors, got ",
                 shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  SL_CHECK_SHAPE(a.size(1) == b.size(0), "mm: shapes ", shape_str(a.sizes()), " and ",
                 shape_str(b.sizes()), " cannot be multiplied (", a.size(1), " vs ", b.size(0),
                 ")");
  return view(bmm_unchecked(unsqueeze(a, 0), unsqueeze(b, 0)), {a.size(0), b.size(1)});
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_pair("bmm", a, b);
  SL_CHECK_SHAPE(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-d tensors, got ",
                 shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  SL_CHECK_SHAPE(a.size(0) == b.size(0) && a.size(2) == b.size(1), "bmm: shapes ",
                 shape_str(a.sizes()), " and ", shape_str(b.sizes()),
                 " cannot be multiplied (batch ", a.size(0), " vs ", b.size(0), ", inner ",
                 a.size(2), " vs ", b.size(1), ")");
  return bmm_unchecked(a, b);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_pair("matmul", a, b);
  SL_CHECK_SHAPE(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dim, got ",
                 shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  Tensor a2 = a.dim() == 1 ? unsqueeze(a, 0) : a;
  Tensor b2 = b.dim() == 1 ? unsqueeze(b, 1) : b;
  int64_t M = a2.size(-2), K = a2.size(-1), N = b2.size(-1);
  SL_CHECK_SHAPE(K == b2.size(-2), "matmul: shapes ", shape_str(a.sizes()), " and ",
                 shape_str(b.sizes()), " cannot be multiplied (", K, " vs ", b2.size(-2), ")");
  Shape ba(a2.sizes().begin(), a2.sizes().end() - 2);
  Shape bb(b2.sizes().begin(), b2.sizes().end() - 2);
  Tensor out;
  Shape batch;
  if (bb.empty()) {
    // [..., M, K] @ [K, N]: fold the batch into M (the linear-layer case), one GEMM.
    batch = ba;
    int64_t rows = shape_numel(ba) * M;
    out = view(bmm_unchecked(unsqueeze(reshape(a2, {rows, K}), 0), unsqueeze(b2, 0)), {rows, N});
  } else {
    batch = broadcast_shapes(ba, bb, "matmul");
    int64_t nb = shape_numel(batch);
    Shape sa = batch, sb = batch;
    sa.insert(sa.end(), {M, K});
    sb.insert(sb.end(), {K, N});
    out = batched_matmul(expand(a2, sa), expand(b2, sb), nb);
  }
  Shape os = batch;
  if (a.dim() > 1) os.push_back(M);
  if (b.dim() > 1) os.push_back(N);
  return view(out, os);
}

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  check_defined("addmm", bias, "bias");
  if (alpha.to_double() == 1.0 && beta.to_double() == 1.0 && a.defined() && b.defined()) {
    Tensor fused = fused_addmm_bias(a, b, bias);
    if (fused.defined()) return fused;
  }
  Tensor p = mm(a, b);
  check_same_device("addmm", {&bias, &a});
  if (alpha.to_double() != 1.0) p = binary(BinaryOp::mul, p, alpha);
  if (beta.to_double() == 0.0) return p;
  Shape s = broadcast_shapes(bias.sizes(), p.sizes(), "addmm");
  SL_CHECK_SHAPE(s == p.sizes(), "addmm: bias of shape ", shape_str(bias.sizes()),
                 " does not broadcast to the product's shape ", shape_str(p.sizes()));
  return binary(BinaryOp::add, p, bias, beta);
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  check_defined("linear", x);
  check_defined("linear", w, "weight");
  SL_CHECK_SHAPE(w.dim() == 2, "linear: weight must be 2-d [out, in], got ", shape_str(w.sizes()));
  SL_CHECK_SHAPE(x.dim() >= 1 && x.size(-1) == w.size(1), "linear: input of shape ",
                 shape_str(x.sizes()), " does not match weight ", shape_str(w.sizes()),
                 " (expected last dim ", w.size(1), ")");
  if (bias.defined()) {
    SL_CHECK_SHAPE(bias.dim() == 1 && bias.size(0) == w.size(0), "linear: bias of shape ",
                   shape_str(bias.sizes()), " does not match weight ", shape_str(w.sizes()));
    if (addmm_bias_kernel.has(x.device().kind) && x.numel() > 0 && w.numel() > 0) {
      Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
      out_shape.push_back(w.size(0));
      Tensor fused = fused_addmm_bias(reshape(x, {-1, w.size(1)}), transpose(w, 0, 1), bias);
      if (fused.defined()) return view(fused, out_shape);
    }
  }
  Tensor y = matmul(x, transpose(w, 0, 1));
  if (bias.defined()) binary_(BinaryOp::add, y, bias);
  return y;
}

namespace {
std::atomic<int64_t> g_linear_act_fused{0};

UnaryOp activation_op(Activation act) {
  switch (act) {
    case Activation::relu:
      return UnaryOp::relu;
    case Activation::gelu:
      return UnaryOp::gelu;
    case Activation::gelu_tanh:
      return UnaryOp::gelu_tanh;
  }
  SL_CHECK(false, "linear_act: unknown activation ", static_cast<int>(act));
  return UnaryOp::relu;
}
}  // namespace

LinearActResult linear_act_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                                   Activation act, bool keep_saved) {
  const char* op = "linear_act";
  check_defined(op, x);
  check_defined(op, w, "weight");
  const UnaryOp uop = activation_op(act);
  check_same_device(op, {&x, &w, &bias});
  SL_CHECK_DTYPE(is_floating(x.dtype()), op, ": expected a floating input, got ",
                 dtype_name(x.dtype()));
  SL_CHECK_DTYPE(w.dtype() == x.dtype(), op, ": expected the weight in the input's dtype ",
                 dtype_name(x.dtype()), ", got ", dtype_name(w.dtype()));
  SL_CHECK_DTYPE(!bias.defined() || bias.dtype() == x.dtype(), op,
                 ": expected the bias in the input's dtype ", dtype_name(x.dtype()), ", got ",
                 dtype_name(bias.defined() ? bias.dtype() : x.dtype()));
  SL_CHECK_SHAPE(w.dim() == 2, op, ": weight must be 2-d [out, in], got ", shape_str(w.sizes()));
  SL_CHECK_SHAPE(x.dim() >= 1 && x.size(-1) == w.size(1), op, ": input of shape ",
                 shape_str(x.sizes()), " does not match weight ", shape_str(w.sizes()),
                 " (expected last dim ", w.size(1), ")");
  SL_CHECK_SHAPE(!bias.defined() || (bias.dim() == 1 && bias.size(0) == w.size(0)), op,
                 ": bias of shape ", shape_str(bias.defined() ? bias.sizes() : Shape{}),
                 " does not match weight ", shape_str(w.sizes()), " (expected [", w.size(0), "])");
  const bool want_pre = keep_saved && act != Activation::relu;
  const DeviceKind k = x.device().kind;
  if (addmm_act_kernel.has(k) && x.numel() > 0 && w.numel() > 0) {
    Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
    out_shape.push_back(w.size(0));
    Tensor x2 = reshape(x, {-1, w.size(1)});
    Tensor out = empty({x2.size(0), w.size(0)}, x.dtype(), x.device());
    AddmmActResult r = addmm_act_kernel(k, out, x2, transpose(w, 0, 1), bias, act, want_pre);
    if (r.fused) {
      g_linear_act_fused.fetch_add(1, std::memory_order_relaxed);
      LinearActResult res{view(out, out_shape), Tensor()};
      if (keep_saved) res.saved = want_pre ? reshape(r.pre, out_shape) : res.out;
      return res;
    }
  }
  // The composite, op for op as the autograd linear then relu/gelu compute it.
  Tensor pre = linear(x, w, bias);
  LinearActResult res{unary(uop, pre), Tensor()};
  if (keep_saved) res.saved = want_pre ? pre : res.out;
  return res;
}

Tensor linear_act(const Tensor& x, const Tensor& w, const Tensor& bias, Activation act) {
  return linear_act_forward(x, w, bias, act, false).out;
}

Tensor linear_act_backward(const Tensor& grad, const Tensor& saved, Activation act) {
  switch (act) {
    case Activation::relu:
      return binary(BinaryOp::relu_backward, grad, saved);
    case Activation::gelu:
      return binary(BinaryOp::gelu_backward, grad, saved);
    case Activation::gelu_tanh:
      return binary(BinaryOp::gelu_tanh_backward, grad, saved);
  }
  SL_CHECK(false, "linear_act: unknown activation ", static_cast<int>(act));
  return {};
}

int64_t linear_act_fused_count() {
  return g_linear_act_fused.load(std::memory_order_relaxed);
}

}  // namespace ops
}  // namespace sl
