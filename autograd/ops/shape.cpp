// Differentiable shape ops with their backward beside them.
#include "autograd/ops/shape.h"

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/index.h"
#include "autograd/view_tracking.h"
#include "core/ops/copy.h"
#include "core/ops/reduce.h"
#include "core/ops/shape.h"
#include "core/ops/view.h"

namespace sl {

namespace {
bool is_legacy_empty(const Tensor& t) {
  return t.defined() && t.dim() == 1 && t.size(0) == 0;
}

/// One node for all the pieces of a split: their gradients are concatenated back.
std::vector<Tensor> record_split(const Tensor& x, std::vector<Tensor> pieces, int64_t dim) {
  for (Tensor& p : pieces) detail::mark_view(p, x, ViewCreation::multi_output, "SplitBackward");
  if (!needs_grad(x)) return pieces;
  int64_t d = wrap_dim(dim, x.dim(), "split");
  std::vector<Tensor*> outs;
  for (Tensor& p : pieces) outs.push_back(&p);
  record(
      "SplitBackward", {x}, outs,
      [d](const BackwardCtx& c) -> variable_list {
        return {GradMode::is_enabled() ? cat(c.grads, d) : ops::cat(c.grads, d)};
      },
      DoubleBackward::supported);
  return pieces;
}
}  // namespace

Tensor cat(const TensorList& tensors, int64_t dim) {
  Tensor out = ops::cat(tensors, dim);
  if (needs_grad_list(tensors)) {
    const Tensor* ref = nullptr;
    for (const Tensor& t : tensors) {
      if (!is_legacy_empty(t)) {
        ref = &t;
        break;
      }
    }
    if (!ref) return out;  // nothing to differentiate: the result is empty
    int64_t d = wrap_dim(dim, ref->dim(), "cat");
    std::vector<int64_t> lengths;  // -1: skipped legacy empty input
    for (const Tensor& t : tensors) lengths.push_back(is_legacy_empty(t) ? -1 : t.size(d));
    record(
        "CatBackward", tensors, {&out},
        [d, lengths](const BackwardCtx& c) -> variable_list {
          const bool graph = GradMode::is_enabled();  // create_graph: narrow as a tracked view
          variable_list grads;
          int64_t off = 0;
          for (size_t i = 0; i < lengths.size(); ++i) {
            if (lengths[i] < 0 || !c.needs(i)) {
              grads.emplace_back();
            } else {
              grads.push_back(graph ? c.grad().narrow(d, off, lengths[i])
                                    : ops::narrow(c.grad(), d, off, lengths[i]));
            }
            off += std::max<int64_t>(lengths[i], 0);
          }
          return grads;
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor stack(const TensorList& tensors, int64_t dim) {
  Tensor out = ops::stack(tensors, dim);
  if (needs_grad_list(tensors)) {
    int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
    size_t n = tensors.size();
    record(
        "StackBackward", tensors, {&out},
        [d, n](const BackwardCtx& c) -> variable_list {
          const bool graph = GradMode::is_enabled();  // create_graph: select as a tracked view
          variable_list grads;
          for (size_t i = 0; i < n; ++i) {
            const auto k = static_cast<int64_t>(i);
            grads.push_back(!c.needs(i) ? Tensor()
                            : graph     ? c.grad().select(d, k)
                                        : ops::select(c.grad(), d, k));
          }
          return grads;
        },
        DoubleBackward::supported);
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  return record_split(x, ops::split(x, split_size, dim), dim);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  return split_with_sizes(x, sizes, dim);
}

std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes,
                                     int64_t dim) {
  return record_split(x, ops::split_with_sizes(x, sizes, dim), dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  return record_split(x, ops::chunk(x, chunks, dim), dim);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode,
           Scalar value) {
  if (mode != "constant") {
    // reflect / replicate are index_selects along the padded dims (differentiable themselves)
    Tensor out = x;
    for (const auto& [d, idx] : ops::pad_index_maps(x, pads, mode)) {
      out = index_select(out, d, idx);
    }
    return out.is_same(x) ? x.clone() : out;
  }
  Tensor out = ops::pad(x, pads, mode, value);
  if (needs_grad(x)) {
    // padding by -pads crops what was added and zero-fills what was cropped
    std::vector<int64_t> inverse;
    for (int64_t p : pads) inverse.push_back(-p);
    record(
        "PadBackward", {x}, {&out},
        [inverse](const BackwardCtx& c) -> variable_list {
          return {GradMode::is_enabled() ? pad(c.grad(), inverse, "constant", 0)
                                         : ops::pad(c.grad(), inverse, "constant", 0)};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor tril(const Tensor& x, int64_t diagonal) {
  Tensor out = ops::tril(x, diagonal);
  if (needs_grad(x)) {
    record(
        "TrilBackward", {x}, {&out},
        [diagonal](const BackwardCtx& c) -> variable_list {
          return {GradMode::is_enabled() ? tril(c.grad(), diagonal)
                                         : ops::tril(c.grad(), diagonal)};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor triu(const Tensor& x, int64_t diagonal) {
  Tensor out = ops::triu(x, diagonal);
  if (needs_grad(x)) {
    record(
        "TriuBackward", {x}, {&out},
        [diagonal](const BackwardCtx& c) -> variable_list {
          return {GradMode::is_enabled() ? triu(c.grad(), diagonal)
                                         : ops::triu(c.grad(), diagonal)};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) {
  Tensor out = ops::flip(x, dims);
  if (needs_grad(x)) {
    record(
        "FlipBackward", {x}, {&out},
        [dims](const BackwardCtx& c) -> variable_list {
          return {GradMode::is_enabled() ? flip(c.grad(), dims) : ops::flip(c.grad(), dims)};
        },
        DoubleBackward::supported);
  }
  return out;
}

Tensor repeat(const Tensor& x, const Shape& repeats) {
  Tensor out = ops::repeat(x, repeats);
  if (needs_grad(x)) {
    Shape xs = x.sizes();
    record(
        "RepeatBackward", {x}, {&out},
        [xs, repeats](const BackwardCtx& c) -> variable_list {
          // g viewed as [r0, s0, r1, s1, ...]; summing the r dims gives x's gradient
          size_t m = repeats.size(), lead = m - xs.size();
          Shape interleaved;
          std::vector<int64_t> rdims;
          for (size_t i = 0; i < m; ++i) {
            interleaved.insert(interleaved.end(), {repeats[i], i < lead ? 1 : xs[i - lead]});
            rdims.push_back(static_cast<int64_t>(2 * i));
          }
          Tensor g = grad_reshape(c.grad(), interleaved);
          return {grad_reshape(grad_sum(g, rdims, false), xs)};
        },
        DoubleBackward::supported);
  }
  return out;
}

// ---- Tensor methods ---------------------------------------------------------------------------

Tensor Tensor::tril(int64_t diagonal) const {
  return sl::tril(*this, diagonal);
}
Tensor Tensor::triu(int64_t diagonal) const {
  return sl::triu(*this, diagonal);
}
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const {
  return sl::split(*this, split_size, dim);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const {
  return sl::chunk(*this, chunks, dim);
}

}  // namespace sl
