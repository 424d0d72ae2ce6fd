#include "core/ops/reduce.h"

#include <algorithm>
#include <cmath>

#include "core/ops/copy.h"
#include "core/ops/view.h"

namespace sl {

SL_DEFINE_KERNEL(reduce_kernel, void(ReduceOp op, const Tensor& out, const Tensor& in,
                                     const ReduceParams& params));
SL_DEFINE_KERNEL(arg_reduce_kernel,
                 void(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in));
SL_DEFINE_KERNEL(cumsum_kernel, void(const Tensor& out, const Tensor& in));

const char* reduce_op_name(ReduceOp op) {
  static const char* names[] = {"sum", "mean", "prod",      "max", "min",
                                "var", "norm", "logsumexp", "all", "any"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(ReduceOp::count_));
  return names[static_cast<int>(op)];
}

namespace ops {

namespace {

DType reduce_result_dtype(ReduceOp op, DType in) {
  if (op == ReduceOp::all || op == ReduceOp::any) return DType::b8;
  if (is_floating(in)) return in;
  if (op == ReduceOp::sum || op == ReduceOp::prod) return DType::i64;
  if (op == ReduceOp::max || op == ReduceOp::min) return in;
  return kDefaultFloat;
}

struct Layout3 {
  Tensor in3;      // contiguous [outer, R, inner]
  Shape out_keep;  // output shape with keepdim
  Shape out_nokeep;
  int64_t outer = 1, r = 1, inner = 1;
};

/// Moves the reduced dims together; see Note [Reduction layout].
Layout3 to_3d(const Tensor& t, const std::vector<int64_t>& wdims) {
  Layout3 L;
  int64_t n = t.dim();
  std::vector<bool> red(static_cast<size_t>(n), false);
  for (int64_t d : wdims) red[static_cast<size_t>(d)] = true;
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = t.sizes()[static_cast<size_t>(i)];
    L.out_keep.push_back(red[static_cast<size_t>(i)] ? 1 : s);
    if (!red[static_cast<size_t>(i)]) L.out_nokeep.push_back(s);
  }
  // Are the reduced dims one adjacent run? Then [before, run, after] needs no permutation.
  int64_t first = n, last = -1;
  for (int64_t d : wdims) {
    first = std::min(first, d);
    last = std::max(last, d);
  }
  bool adjacent = wdims.empty() || (last - first + 1 == static_cast<int64_t>(wdims.size()));
  Tensor src = t;
  if (!adjacent) {
    std::vector<int64_t> order;
    for (int64_t i = 0; i < n; ++i)
      if (!red[static_cast<size_t>(i)]) order.push_back(i);
    for (int64_t i = 0; i < n; ++i)
      if (red[static_cast<size_t>(i)]) order.push_back(i);
    src = permute(t, order);
    first = n - static_cast<int64_t>(wdims.size());
    last = n - 1;
  }
  if (wdims.empty()) {
    first = 0;
    last = -1;
  }
  for (int64_t i = 0; i < first; ++i) L.outer *= src.sizes()[static_cast<size_t>(i)];
  for (int64_t i = first; i <= last; ++i) L.r *= src.sizes()[static_cast<size_t>(i)];
  for (int64_t i = last + 1; i < n; ++i) L.inner *= src.sizes()[static_cast<size_t>(i)];
  L.in3 = view(contiguous(src), {L.outer, L.r, L.inner});
  return L;
}

}  // namespace

Tensor reduce(ReduceOp op, const Tensor& t, const std::vector<int64_t>& dims, bool keepdim,
              const ReduceParams& params) {
  const char* name = reduce_op_name(op);
  check_defined(name, t);
  std::vector<int64_t> wdims = wrap_dims(dims, t.dim(), name);
  if (op == ReduceOp::norm) {
    SL_CHECK(!std::isnan(params.p), "norm: order p must be a number (any real, or +-inf), got ",
             params.p);
  }
  // PyTorch's rule: mean, var/std and norm have no integer result and refuse to guess one;
  // logsumexp promotes integers to the default float.
  SL_CHECK_DTYPE(is_floating(t.dtype()) ||
                     !(op == ReduceOp::mean || op == ReduceOp::var || op == ReduceOp::norm),
                 name, ": input dtype must be floating point, got ", dtype_name(t.dtype()),
                 " (an integer or bool input has no ", name,
                 " dtype to infer); convert first, e.g. t.to(sl::DType::f32)");
  Tensor x = t;
  DType out_dtype = reduce_result_dtype(op, t.dtype());
  if (op == ReduceOp::logsumexp && !is_floating(t.dtype())) x = cast(t, out_dtype);
  Layout3 L = to_3d(x, wdims);
  if (L.r == 0) {
    SL_CHECK(op != ReduceOp::max && op != ReduceOp::min, name,
             ": cannot reduce over a zero-size dim (no identity); input shape ",
             shape_str(t.sizes()));
  }
  Tensor out = empty({L.outer, L.inner}, out_dtype, t.device());
  if (out.numel() > 0) reduce_kernel(t.device().kind, op, out, L.in3, params);
  return view(out, keepdim ? L.out_keep : L.out_nokeep);
}

std::pair<Tensor, Tensor> arg_reduce(bool is_max, const Tensor& t, int64_t dim, bool keepdim) {
  const char* name = is_max ? "max" : "min";
  check_defined(name, t);
  int64_t d = wrap_dim(dim, t.dim(), name);
  Layout3 L = to_3d(t, t.dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{d});
  SL_CHECK(L.r > 0, name, ": cannot reduce over a zero-size dim ", dim, " of shape ",
           shape_str(t.sizes()));
  Tensor values = empty({L.outer, L.inner}, t.dtype(), t.device());
  Tensor indices = empty({L.outer, L.inner}, DType::i64, t.device());
  if (values.numel() > 0) arg_reduce_kernel(t.device().kind, is_max, values, indices, L.in3);
  const Shape& s = keepdim ? L.out_keep : L.out_nokeep;
  return {view(values, s), view(indices, s)};
}

Tensor cumsum(const Tensor& t, int64_t dim) {
  check_defined("cumsum", t);
  int64_t d = wrap_dim(dim, t.dim(), "cumsum");
  Tensor x = is_floating(t.dtype()) ? t : cast(t, DType::i64);
  Layout3 L = to_3d(x, t.dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{d});
  Tensor out = empty({L.outer, L.r, L.inner}, x.dtype(), t.device());
  if (out.numel() > 0) cumsum_kernel(t.device().kind, out, L.in3);
  return view(out, t.sizes());
}

}  // namespace ops
}  // namespace sl
