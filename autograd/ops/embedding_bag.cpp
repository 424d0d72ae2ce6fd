// embedding_bag and embedding_renorm_ (contracts in the header). Bags are described on the device
// by bounds [B + 1] (bag b: entries [bounds[b], bounds[b + 1])); sum and mean route every entry
// to its bag with one index_add (entries left out, padding or past the last bag, go to a spare
// bag B that is cut off), so the weight and per_sample_weights gradients come from the index
// ops' own backward; max records its backward here.
#include "autograd/ops/embedding_bag.h"

#include <vector>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/index.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/embedding_bag.h"
#include "core/ops/index.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/ops/view.h"

namespace sl {

namespace {
constexpr const char* kOp = "embedding_bag";

Tensor filled(const Shape& s, DType dt, Device dev, Scalar v) {
  Tensor t = ops::empty(s, dt, dev);
  ops::fill_(t, v);
  return t;
}

bool is_index_dtype(DType dt) {
  return dt == DType::i64 || dt == DType::i32;
}

std::string rows_desc(int64_t n) {
  return detail::str_cat("a weight with ", n, " rows");
}

/// Host checks of the offsets as PyTorch 1.13's embedding_bag (offsets[0] == 0, offsets[-1] <=
/// L), plus non-decreasing (PyTorch's CPU fails inside fbgemm on those).
void check_offsets_on_host(const Tensor& offsets, int64_t L) {
  Tensor h = ops::contiguous(ops::to_device(offsets, kCPU));
  const int64_t* p = h.data_ptr<int64_t>();
  const int64_t n = h.numel();
  if (n == 0) return;
  SL_CHECK(p[0] == 0, kOp, ": offsets[0] has to be 0 (the first bag starts at position 0), got ",
           p[0]);
  for (int64_t b = 1; b < n; ++b) {
    SL_CHECK(p[b] >= p[b - 1], kOp, ": offsets must be non-decreasing, got offsets[", b - 1,
             "] = ", p[b - 1], " > offsets[", b, "] = ", p[b]);
  }
  SL_CHECK(p[n - 1] <= L, kOp, ": offsets[-1] can not be greater than the input's length ", L,
           ", got offsets[-1] = ", p[n - 1]);
}

/// out[index[j]] += src[j] for 1-d out and src, without a host range check: the callers' indices
/// are in range by construction (bag numbers, or bounds already checked on the host; unchecked
/// CUDA indexing still has the kernel's guard, Note [Index checks]), which saves two device
/// synchronisations per call on CUDA.
void add_at_(const Tensor& out, const Tensor& index, const Tensor& src) {
  if (index.numel() == 0) return;
  index_add_kernel(out.device().kind, ops::view(out, {1, out.numel(), 1}), index,
                   ops::view(src, {1, src.numel(), 1}), Scalar(1), -1, kOp);
}

/// The bag of every entry, i64 [L] in [0, B]: the number of bag ends bounds[1..B] at or before
/// the entry (B: past the last bag), and B for padding entries.
Tensor bag_of_entries(const Tensor& bounds, const Tensor& idx, int64_t B, int64_t skip) {
  const int64_t L = idx.numel();
  const Device dev = idx.device();
  Tensor marks = filled({L + 1}, DType::i64, dev, 0);
  add_at_(marks, ops::contiguous(ops::narrow(bounds, 0, 1, B)), filled({B}, DType::i64, dev, 1));
  Tensor bag = ops::contiguous(ops::narrow(ops::cumsum(marks, 0), 0, 0, L));
  if (skip >= 0) bag = ops::masked_fill(bag, ops::binary(BinaryOp::eq, idx, Scalar(skip)), B);
  return bag;
}

Tensor embedding_bag_max(const Tensor& weight, const Tensor& idx, const Tensor& bounds,
                         int64_t skip) {
  const int64_t N = weight.size(0), D = weight.size(1);
  Tensor rows = ops::index_select(weight, 0, idx);
  auto [out, arg] = ops::embedding_bag_max(rows, bounds, idx, skip);
  if (needs_grad(weight)) {
    SavedTensor sa(arg), si(idx);
    record(
        "EmbeddingBagMaxBackward", {weight}, {&out},
        [sa, si, N, D](const BackwardCtx& c) -> variable_list {
          const Tensor& g = c.grad();
          Tensor arg = sa.unpack("EmbeddingBagMaxBackward");
          Tensor idx = si.unpack("EmbeddingBagMaxBackward");
          Tensor gw = filled({(N + 1) * D}, g.dtype(), g.device(), 0);
          if (idx.numel() > 0 && arg.numel() > 0) {
            // the weight row of each (bag, column)'s maximum; row N (cut off) for empty bags
            Tensor flat_arg = ops::reshape(arg, {-1});
            Tensor row = ops::index_select(idx, 0, ops::clamp(flat_arg, Scalar(0), std::nullopt));
            row = ops::masked_fill(row, ops::binary(BinaryOp::lt, flat_arg, Scalar(0)), N);
            Tensor col = arange(0, D, 1, {.dtype = DType::i64, .device = g.device()});
            Tensor pos = ops::binary(
                BinaryOp::add,
                ops::reshape(ops::binary(BinaryOp::mul, row, Scalar(D)), arg.sizes()), col);
            Tensor flat_pos = ops::contiguous(ops::reshape(pos, {-1}));
            // create_graph: the recorded index_add, its own gradient a gather (Note [Double
            // backward] in autograd/engine.cpp); with nothing to add gw is a constant zero
            gw = GradMode::is_enabled()
                     ? index_add(gw, 0, flat_pos, g.reshape({-1}))
                     : ops::index_add(gw, 0, flat_pos, ops::contiguous(ops::reshape(g, {-1})));
          }
          return {gw.requires_grad() ? gw.narrow(0, 0, N * D).view({N, D})
                                     : ops::view(ops::narrow(gw, 0, 0, N * D), {N, D})};
        },
        DoubleBackward::supported);
  }
  return out;
}
}  // namespace

EmbeddingBagMode embedding_bag_mode(const std::string& mode, const char* op) {
  if (mode == "sum") return EmbeddingBagMode::sum;
  if (mode == "mean") return EmbeddingBagMode::mean;
  if (mode == "max") return EmbeddingBagMode::max;
  detail::throw_error<ValueError>(op, ": mode has to be one of sum, mean or max, got '", mode, "'");
}

const char* embedding_bag_mode_name(EmbeddingBagMode mode) {
  switch (mode) {
    case EmbeddingBagMode::sum:
      return "sum";
    case EmbeddingBagMode::mean:
      return "mean";
    case EmbeddingBagMode::max:
      return "max";
  }
  return "?";
}

void embedding_renorm_(const Tensor& weight, const Tensor& indices, double max_norm,
                       double norm_type) {
  const char* op = "embedding_renorm_";
  ops::check_defined(op, weight, "weight");
  ops::check_defined(op, indices, "indices");
  ops::check_same_device(op, {&weight, &indices});
  SL_CHECK_SHAPE(weight.dim() == 2, op,
                 ": weight must be 2-d [num_embeddings, embedding_dim], got ",
                 shape_str(weight.sizes()));
  SL_CHECK_DTYPE(is_floating(weight.dtype()), op, ": weight must be floating, got ",
                 dtype_name(weight.dtype()));
  Tensor idx = ops::contiguous(
      ops::reshape(ops::check_index(op, indices, weight.size(0), rows_desc(weight.size(0))), {-1}));
  if (idx.numel() == 0 || weight.size(1) == 0) return;
  NoGradGuard no_grad;
  Tensor w = weight.detach();
  Tensor rows = ops::index_select(w, 0, idx);
  // as torch.embedding_renorm_: the norm read as a double, scale = max_norm / (norm + 1e-7) in
  // double, `row *= scale` in the weight's dtype; rows within max_norm are written back as they are
  Tensor norm = ops::cast(rows.norm(norm_type, {1}, true), DType::f64);
  Tensor scale =
      ops::binary(BinaryOp::div, Scalar(max_norm), ops::binary(BinaryOp::add, norm, Scalar(1e-7)));
  scale = ops::masked_fill(scale, ops::binary(BinaryOp::le, norm, Scalar(max_norm)), 1.0);
  Tensor scaled = ops::binary(BinaryOp::mul, rows, ops::cast(scale, w.dtype()));
  Tensor target = ops::contiguous(ops::expand(ops::unsqueeze(idx, 1), scaled.sizes()));
  // a repeated index writes the same row again: every distinct row is scaled once
  Tensor dst = w.is_contiguous() ? w : ops::contiguous(w);
  scatter_kernel(w.device().kind, dst, 0, target, scaled, false, op);
  if (!dst.is_same(w)) ops::copy_(w, dst);
  weight.bump_version();
}

Tensor embedding_bag(const Tensor& weight, const Tensor& input, const EmbeddingBagOptions& o) {
  ops::check_defined(kOp, weight, "weight");
  ops::check_defined(kOp, input, "input");
  SL_CHECK_SHAPE(weight.dim() == 2, kOp,
                 ": weight must be 2-d [num_embeddings, embedding_dim], got ",
                 shape_str(weight.sizes()));
  SL_CHECK_DTYPE(is_floating(weight.dtype()), kOp, ": weight must be floating, got ",
                 dtype_name(weight.dtype()));
  SL_CHECK_DTYPE(is_index_dtype(input.dtype()), kOp, ": input must be int64 or int32, got ",
                 dtype_name(input.dtype()));
  ops::check_same_device(kOp, {&weight, &input});
  SL_CHECK(!o.sparse, kOp, ": sparse=true is not supported (there are no sparse tensors): use ",
           "sparse=false, a dense weight gradient");
  const EmbeddingBagMode mode = o.mode;
  const char* mode_name = embedding_bag_mode_name(mode);
  SL_CHECK(!(mode == EmbeddingBagMode::max && o.scale_grad_by_freq), kOp,
           ": max mode does not support scaling the gradient by the frequency "
           "(scale_grad_by_freq)");
  const int64_t N = weight.size(0), D = weight.size(1);
  std::optional<int64_t> pad = o.padding_idx;
  if (pad) {
    SL_CHECK(*pad >= -N && *pad < N, kOp, ": padding_idx ", *pad, " must be within [", -N, ", ", N,
             ") for a weight with ", N, " rows");
    if (*pad < 0) *pad += N;
  }
  const Tensor& psw = o.per_sample_weights;
  if (psw.defined()) {
    SL_CHECK(mode == EmbeddingBagMode::sum, kOp,
             ": per_sample_weights is only supported for mode='sum', got mode='", mode_name, "'");
    SL_CHECK_SHAPE(psw.sizes() == input.sizes(), kOp, ": per_sample_weights (",
                   shape_str(psw.sizes()), ") must have the same shape as the input (",
                   shape_str(input.sizes()), ")");
    SL_CHECK_DTYPE(psw.dtype() == weight.dtype(), kOp, ": per_sample_weights must have the ",
                   "weight's dtype ", dtype_name(weight.dtype()), ", got ",
                   dtype_name(psw.dtype()));
    ops::check_same_device(kOp, {&weight, &psw});
  }
  const Device dev = weight.device();
  Tensor flat, bounds;
  int64_t B = 0;
  if (input.dim() == 2) {
    SL_CHECK(!o.offsets.defined(), kOp, ": if input is 2-d (", shape_str(input.sizes()),
             "), offsets has to be undefined: each row is a bag of fixed length");
    B = input.size(0);
    const int64_t n = input.size(1);
    std::vector<int64_t> b(static_cast<size_t>(B + 1));
    for (int64_t i = 0; i <= B; ++i) b[static_cast<size_t>(i)] = i * n;
    bounds = ops::to_device(from_vector(b, {B + 1}), dev);
    flat = ops::reshape(input, {-1});
  } else {
    SL_CHECK(input.dim() == 1, kOp, ": input has to be a 1-d or 2-d tensor, got shape ",
             shape_str(input.sizes()));
    SL_CHECK(o.offsets.defined(), kOp, ": a 1-d input needs offsets (a 1-d tensor), got none");
    SL_CHECK(o.offsets.dim() == 1, kOp, ": offsets has to be a 1-d tensor, got shape ",
             shape_str(o.offsets.sizes()));
    SL_CHECK_DTYPE(o.offsets.dtype() == input.dtype(), kOp,
                   ": offsets must have the input's dtype ", dtype_name(input.dtype()), ", got ",
                   dtype_name(o.offsets.dtype()));
    ops::check_same_device(kOp, {&input, &o.offsets});
    flat = input;
    const int64_t L = input.numel();
    Tensor off = ops::contiguous(ops::cast(o.offsets, DType::i64));
    if (ops::index_checks_on_host(dev)) check_offsets_on_host(off, L);
    if (o.include_last_offset) {
      SL_CHECK(off.numel() >= 1, kOp,
               ": with include_last_offset, offsets needs at least 1 entry, got none");
      B = off.numel() - 1;
      bounds = off;
    } else {
      B = off.numel();
      bounds = ops::cat({off, filled({1}, DType::i64, dev, L)}, 0);
    }
  }
  Tensor idx = ops::contiguous(ops::check_index(kOp, flat, N, rows_desc(N)));
  if (o.max_norm) embedding_renorm_(weight, idx, *o.max_norm, o.norm_type);
  const int64_t skip = pad.value_or(-1);
  if (mode == EmbeddingBagMode::max) return embedding_bag_max(weight, idx, bounds, skip);

  const int64_t L = idx.numel();
  Tensor bag = bag_of_entries(bounds, idx, B, skip);
  Tensor rows = embedding(weight, idx, pad, o.scale_grad_by_freq);
  if (psw.defined()) rows = rows * psw.reshape({L, 1});
  Tensor sums = index_add(zeros({B + 1, D}, {.dtype = weight.dtype(), .device = dev}), 0, bag, rows)
                    .narrow(0, 0, B);
  if (mode == EmbeddingBagMode::sum) return sums;
  // mean: PyTorch's sum / max(bag_size, 1), bag_size counting the non-padding entries
  Tensor counts = filled({B + 1}, weight.dtype(), dev, 0);
  add_at_(counts, bag, filled({L}, weight.dtype(), dev, 1));
  counts = ops::clamp(ops::narrow(counts, 0, 0, B), Scalar(1), std::nullopt);
  return sums / ops::unsqueeze(counts, 1);
}

}  // namespace sl
