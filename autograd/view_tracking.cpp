#include "autograd/view_tracking.h"

#include "autograd/function.h"
#include "core/ops/copy.h"
#include "core/ops/reduce.h"
#include "core/ops/view.h"

namespace sl::detail {

namespace {

/// Where a tensor lies in its storage.
struct Geometry {
  Shape sizes;
  Shape strides;
  int64_t offset = 0;
};

Geometry geometry_of(const TensorImpl& t) {
  return Geometry{t.sizes, t.strides, t.offset};
}

/// Number of storage elements from the first element of `g` to its last (0 when empty).
int64_t span_of(const Geometry& g) {
  int64_t span = 1;
  for (size_t d = 0; d < g.sizes.size(); ++d) {
    if (g.sizes[d] == 0) return 0;
    span += (g.sizes[d] - 1) * g.strides[d];
  }
  return span;
}

/// True when several elements of `g` share one storage element (a stride-0 dim of size > 1).
bool has_internal_overlap(const Geometry& g) {
  for (size_t d = 0; d < g.sizes.size(); ++d) {
    if (g.strides[d] == 0 && g.sizes[d] > 1) return true;
  }
  return false;
}

/// True when every element of `v` lies in the storage span of `base` (always for the view
/// methods; an as_strided alias may reach beyond its base).
bool within_span(const Geometry& v, const Geometry& base) {
  const int64_t n = span_of(v);
  return n == 0 || (v.offset >= base.offset && v.offset + n <= base.offset + span_of(base));
}

void throw_outside_base(const char* op) {
  throw_error<AutogradError>(op,
                             ": the view (an as_strided alias) reaches storage elements outside "
                             "its base, so the base's gradient cannot describe it; take the "
                             "alias of a tensor that covers those elements");
}

/// A zero-filled buffer covering the base's storage span, in g's dtype and on its device.
Tensor zero_span(const Geometry& base, const Tensor& like) {
  Tensor flat = ops::empty({span_of(base)}, like.dtype(), like.device());
  ops::fill_(flat, 0);
  return flat;
}

/// `flat` (from zero_span) seen with `g`'s geometry, relative to the base's first element.
Tensor region(const Tensor& flat, const Geometry& g, const Geometry& base) {
  return ops::as_strided(flat, g.sizes, g.strides, g.offset - base.offset);
}

/// The base's gradient for a gradient `g` of the view: g written into the view's elements, zero
/// elsewhere; summed over the view's stride-0 (expanded) dims.
Tensor view_grad_to_base(const Tensor& g, const Geometry& base, const Geometry& view) {
  Tensor flat = zero_span(base, g);
  Geometry v = view;
  std::vector<int64_t> expanded;
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.strides[d] == 0 && v.sizes[d] > 1) {
      expanded.push_back(static_cast<int64_t>(d));
      v.sizes[d] = 1;
    }
  }
  Tensor gv = expanded.empty() ? g : ops::reduce(ReduceOp::sum, g, expanded, /*keepdim=*/true);
  ops::copy_(region(flat, v, base), gv);
  return region(flat, base, base);
}

/// grad_fn of a view regenerated from its base's current history (PyTorch's AsStridedBackward).
class AsStridedBackward final : public Node {
 public:
  AsStridedBackward(Geometry base, Geometry view)
      : base_(std::move(base)), view_(std::move(view)) {}
  const char* name() const override { return "AsStridedBackward"; }
  variable_list apply(variable_list&& grads) override {
    return {view_grad_to_base(grads[0], base_, view_)};
  }

 private:
  Geometry base_, view_;
};

/// The base's grad_fn after an in-place op `fn` on one of its views (PyTorch's CopySlices): the
/// base's gradient outside the view goes to the base's previous history unchanged; inside the
/// view it goes through fn's backward, whose gradient for the view's old values is written back
/// into the view's region. fn's gradients for its other operands go to their edges.
class CopySlices final : public Node {
 public:
  CopySlices(Geometry base, Geometry view, std::shared_ptr<Node> fn)
      : base_(std::move(base)), view_(std::move(view)), fn_(std::move(fn)) {}
  const char* name() const override { return "CopySlices"; }
  variable_list apply(variable_list&& grads) override {
    Tensor flat = zero_span(base_, grads[0]);
    Tensor in_base = region(flat, base_, base_);
    Tensor in_view = region(flat, view_, base_);
    ops::copy_(in_base, grads[0]);
    variable_list res = fn_->apply({ops::contiguous(in_view, /*force_copy=*/true)});
    SL_CHECK_AUTOGRAD(res.size() == next_edges.size(), fn_->name(), ": backward returned ",
                      res.size(), " gradients, expected ", next_edges.size());
    if (res[0].defined()) {
      ops::copy_(in_view, res[0]);
    } else {
      ops::fill_(in_view, 0);  // the op replaced the view's values (copy_, fill_)
    }
    res[0] = in_base;
    return res;
  }
  void release_saved() override { fn_->release_saved(); }

 private:
  Geometry base_, view_;
  std::shared_ptr<Node> fn_;
};

void throw_base_overlap(const char* op) {
  throw_error<AutogradError>(op,
                             ": the base of this view has elements that share one memory "
                             "location (an expanded tensor), so its gradient cannot be rebuilt "
                             "after an in-place change; clone() the base before taking views");
}

std::shared_ptr<Node> make_view_node(const TensorImpl& base, const TensorImpl& view,
                                     const Edge& base_edge) {
  Geometry bg = geometry_of(base);
  if (has_internal_overlap(bg)) throw_base_overlap("AsStridedBackward");
  if (!within_span(geometry_of(view), bg)) throw_outside_base("AsStridedBackward");
  auto node = std::make_shared<AsStridedBackward>(bg, geometry_of(view));
  node->next_edges.push_back(base_edge);
  node->outputs.push_back(OutputMeta{view.sizes, view.dtype, view.storage->device()});
  return node;
}

}  // namespace

void mark_view(Tensor& out, const Tensor& input, ViewCreation creation, const char* creator) {
  if (!is_floating(out.dtype()) || out.is_same(input)) return;
  std::shared_ptr<TensorImpl> base = input.impl_ptr();
  if (const AutogradMeta* im = input.impl()->autograd.get(); im && im->view) {
    base = im->view->base;
    if (creation == ViewCreation::normal) {
      creation = im->view->creation;
      creator = im->view->creator;
    }
  }
  if (!GradMode::is_enabled()) creation = ViewCreation::no_grad;
  auto vm = std::make_unique<ViewMeta>();
  vm->creation = creation;
  vm->creator = creator;
  vm->attr_version = out.version();
  if (const AutogradMeta* bm = base->autograd.get()) {
    vm->base_grad_fn = bm->grad_fn;
    vm->base_output_nr = bm->output_nr;
  }
  vm->base = std::move(base);
  out.impl()->autograd_meta().view = std::move(vm);
}

void refresh_view(const std::shared_ptr<TensorImpl>& impl_ptr) {
  TensorImpl& impl = *impl_ptr;
  AutogradMeta& m = *impl.autograd;
  ViewMeta& vm = *m.view;
  uint32_t version = impl.storage->version();
  if (version == vm.attr_version) [[likely]]
    return;
  const AutogradMeta* bm = vm.base->autograd.get();
  const std::shared_ptr<Node>& base_fn = bm ? bm->grad_fn : std::shared_ptr<Node>();
  uint32_t base_nr = bm ? bm->output_nr : 0;
  // Written under NoGradGuard (an optimizer step), or by an op that kept the base's history:
  // the view's graph still describes its values. (An in-place op reads its operands after its
  // kernel wrote and before it records: recheck_operand_views makes them compare again.)
  if (base_fn == vm.base_grad_fn && base_nr == vm.base_output_nr) {
    vm.attr_version = version;
    return;
  }
  if (vm.creation == ViewCreation::no_grad) {
    // as PyTorch: the view is outside the graph but its values now come from a recorded op;
    // whether its use should carry that gradient is ambiguous. Reads with grad mode off are
    // fine (and leave the view stale, so that a later read with grad mode on still refuses).
    if (!GradMode::is_enabled()) return;
    throw_error<AutogradError>(
        "a view created under NoGradGuard is used after its base (or another view of its base) "
        "was modified in place with grad mode on; autograd cannot tell whether that change "
        "belongs to the view's gradient. Make the view and do the in-place op both inside the "
        "NoGradGuard block or both outside it, or use a clone() of the view");
  }
  vm.attr_version = version;
  vm.base_grad_fn = base_fn;
  vm.base_output_nr = base_nr;
  // a leaf view that was given requires_grad_() keeps accumulating its own gradient
  if (m.requires_grad) return;
  if (!base_fn) {
    m.grad_fn.reset();
    m.output_nr = 0;
    return;
  }
  m.grad_fn = make_view_node(*vm.base, impl, Edge{base_fn, base_nr});
  m.output_nr = 0;
  if (m.retains_grad) add_retain_grad_hook(impl_ptr);
}

void check_inplace_view(const Tensor& self, const char* op, std::initializer_list<Tensor> others) {
  const ViewMeta& vm = *self.impl()->autograd->view;
  Tensor base(vm.base);
  bool records = self.requires_grad() || base.requires_grad();
  for (const Tensor& o : others) records = records || (o.defined() && o.requires_grad());
  if (!records) return;
  SL_CHECK_AUTOGRAD(!(base.is_leaf() && base.requires_grad()), op,
                    ": a view of a leaf tensor that requires grad is being used in an in-place "
                    "operation; wrap the update in sl::NoGradGuard (an optimizer step) or apply "
                    "the op to a clone() of the view");
  SL_CHECK_AUTOGRAD(vm.creation != ViewCreation::no_grad, op,
                    ": a view created under NoGradGuard is being modified in place with grad "
                    "mode on, which autograd cannot record; make the view and modify it both "
                    "inside the NoGradGuard block (not recorded) or both outside it (recorded)");
  SL_CHECK_AUTOGRAD(vm.creation != ViewCreation::multi_output, op,
                    ": this tensor is one of "
                    "several views returned by one op (",
                    vm.creator ? vm.creator : "?",
                    ") and cannot be modified in place while recording; use an out-of-place op "
                    "or modify a clone()");
  SL_CHECK_AUTOGRAD(!has_internal_overlap(geometry_of(*self.impl())), op,
                    ": the view has elements that share one memory location (an expanded view) "
                    "and cannot be modified in place while recording; clone() it first");
  if (has_internal_overlap(geometry_of(*vm.base))) throw_base_overlap(op);
  if (!within_span(geometry_of(*self.impl()), geometry_of(*vm.base))) throw_outside_base(op);
}

void recheck_operand_views(std::initializer_list<Tensor> others) {
  for (const Tensor& o : others) {
    if (!o.defined() || !o.impl()->autograd || !o.impl()->autograd->view) continue;
    ViewMeta& vm = *o.impl()->autograd->view;
    vm.attr_version = o.version() - 1;  // any value but the current version
  }
}

void rebase_view(const std::shared_ptr<Node>& fn, Tensor& self,
                 std::initializer_list<Tensor> others) {
  AutogradMeta& meta = self.impl()->autograd_meta();
  ViewMeta& vm = *meta.view;
  TensorImpl& base = *vm.base;
  AutogradMeta& bm = base.autograd_meta();
  Geometry bg = geometry_of(base);
  if (has_internal_overlap(bg)) throw_base_overlap(fn->name());
  // fn's first edge: the base's previous history (the view's old values are part of it); it
  // only decides whether fn computes that gradient, CopySlices routes it
  fn->next_edges.reserve(others.size() + 1);
  fn->next_edges.push_back(bm.grad_fn ? Edge{bm.grad_fn, bm.output_nr} : Edge{});
  for (const Tensor& o : others) fn->next_edges.push_back(gradient_edge(o));
  fn->outputs.push_back(OutputMeta{self.sizes(), self.dtype(), self.device()});
  auto copy = std::make_shared<CopySlices>(bg, geometry_of(*self.impl()), fn);
  copy->next_edges = fn->next_edges;
  copy->outputs.push_back(OutputMeta{base.sizes, base.dtype, base.storage->device()});
  bm.grad_fn = copy;
  bm.output_nr = 0;
  bm.requires_grad = false;
  if (bm.retains_grad) add_retain_grad_hook(vm.base);
  // the view: a view of the base's new history
  vm.attr_version = self.version();
  vm.base_grad_fn = copy;
  vm.base_output_nr = 0;
  meta.grad_fn = make_view_node(base, *self.impl(), Edge{copy, 0});
  meta.output_nr = 0;
  meta.requires_grad = false;
  if (meta.retains_grad) add_retain_grad_hook(self.impl_ptr());
  recheck_operand_views(others);
}

}  // namespace sl::detail
