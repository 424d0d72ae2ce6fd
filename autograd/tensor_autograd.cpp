// Tensor's autograd methods (declared in core/tensor.h).
#include "autograd/function.h"
#include "autograd/node.h"
#include "autograd/view_tracking.h"

namespace sl {

namespace {
const Tensor kUndefined;
const std::shared_ptr<Node> kNoNode;

/// The autograd meta of `impl` (null if none), with a view's grad_fn brought up to date first.
const AutogradMeta* current_meta(const std::shared_ptr<TensorImpl>& impl) {
  const AutogradMeta* m = impl->autograd.get();
  if (m && m->view) detail::refresh_view(impl);
  return m;
}
}  // namespace

bool Tensor::requires_grad() const {
  checked();
  const auto* m = current_meta(impl_);
  return m && (m->requires_grad || m->grad_fn);
}

Tensor& Tensor::requires_grad_(bool on) {
  AutogradMeta& m = impl()->autograd_meta();
  if (m.view) detail::refresh_view(impl_);  // a stale view's grad_fn first (it may have one now)
  SL_CHECK_AUTOGRAD(!m.grad_fn || on, "requires_grad_: can only change the flag of leaf "
                    "tensors; use detach() to get a tensor that does not require grad");
  if (on) {
    SL_CHECK_AUTOGRAD(is_floating(dtype()), "requires_grad_: only floating point tensors can "
                      "require gradients, got ", dtype_name(dtype()));
  }
  if (!m.grad_fn) m.requires_grad = on;
  return *this;
}

const Tensor& Tensor::grad() const {
  const auto* m = checked().autograd.get();
  return m ? m->grad : kUndefined;
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined()) {
    SL_CHECK_SHAPE(g.sizes() == sizes(), "set_grad: gradient of shape ", shape_str(g.sizes()),
                   " for a tensor of shape ", shape_str(sizes()));
    SL_CHECK_DTYPE(g.dtype() == dtype(), "set_grad: gradient of dtype ", dtype_name(g.dtype()),
                   " for a tensor of dtype ", dtype_name(dtype()));
    SL_CHECK_DEVICE(g.device() == device(), "set_grad: gradient on ", g.device(),
                    " for a tensor on ", device());
  }
  impl()->autograd_meta().grad = g;
}

const std::shared_ptr<Node>& Tensor::grad_fn() const {
  checked();
  const auto* m = current_meta(impl_);
  return m ? m->grad_fn : kNoNode;
}

uint32_t Tensor::output_nr() const {
  checked();
  const auto* m = current_meta(impl_);
  return m ? m->output_nr : 0;
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

Tensor Tensor::detach() const {
  const auto& i = checked();
  return Tensor(std::make_shared<TensorImpl>(i.storage, i.sizes, i.strides, i.offset, i.dtype));
}

Tensor& Tensor::detach_() {
  checked();
  SL_CHECK_AUTOGRAD(!(impl()->autograd && impl()->autograd->view),
                    "detach_: cannot detach a view in place (its base would keep a history "
                    "the view no longer has); use detach(), which returns a new tensor");
  if (impl()->autograd) {
    impl()->autograd->grad_fn.reset();
    impl()->autograd->output_nr = 0;
    impl()->autograd->requires_grad = false;
  }
  return *this;
}

namespace detail {
void add_retain_grad_hook(const std::shared_ptr<TensorImpl>& impl) {
  AutogradMeta& m = impl->autograd_meta();
  std::weak_ptr<TensorImpl> weak = impl;
  const Node* node = m.grad_fn.get();  // the node holds the hook: a plain pointer, no cycle
  const uint32_t nr = m.output_nr;
  m.grad_fn->pre_hooks.push_back(
      Node::PreHook{SIZE_MAX, nr, [weak, node, nr](const Tensor& g) {
                      auto t = weak.lock();
                      if (!t) return g;
                      AutogradMeta& meta = t->autograd_meta();
                      // an in-place op gave the tensor a newer grad_fn (which has a hook of its
                      // own): this gradient is its old value's
                      if (meta.grad_fn.get() != node || meta.output_nr != nr) return g;
                      meta.grad = meta.grad.defined() ? meta.grad + g : g.clone();
                      return g;
                    }});
}
}  // namespace detail

void Tensor::retain_grad() const {
  SL_CHECK_AUTOGRAD(requires_grad(), "retain_grad: the tensor does not require grad");
  if (is_leaf()) return;  // leaves keep .grad anyway
  AutogradMeta& m = impl()->autograd_meta();
  if (m.retains_grad) return;
  m.retains_grad = true;
  detail::add_retain_grad_hook(impl_);
}

bool Tensor::retains_grad() const {
  const auto* m = checked().autograd.get();
  return m && m->retains_grad;
}

size_t Tensor::register_hook(GradHook hook) const {
  SL_CHECK_AUTOGRAD(requires_grad(), "register_hook: cannot register a hook on a tensor that "
                    "does not require grad");
  AutogradMeta& m = impl()->autograd_meta();
  if (m.grad_fn) {
    size_t id = m.grad_fn->pre_hooks.size();
    m.grad_fn->pre_hooks.push_back(Node::PreHook{id, m.output_nr, std::move(hook)});
    return id;
  }
  m.hooks.push_back(std::move(hook));
  return m.hooks.size() - 1;
}

void Tensor::remove_hook(size_t id) const {
  AutogradMeta& m = impl()->autograd_meta();
  if (m.grad_fn) {
    // ids count the node's hooks over all its outputs: match this tensor's output too, so that
    // one output of a multi-output op cannot remove another's hook
    bool found = false;
    for (auto& h : m.grad_fn->pre_hooks) {
      if (h.id == id && h.output_nr == m.output_nr) {
        h.fn = nullptr;
        found = true;
      }
    }
    SL_CHECK_INDEX(found, "remove_hook: no hook with id ", id, " on this tensor");
    return;
  }
  SL_CHECK_INDEX(id < m.hooks.size(), "remove_hook: no hook with id ", id);
  m.hooks[id] = nullptr;
}

size_t Tensor::register_post_accumulate_grad_hook(PostAccumulateHook hook) const {
  SL_CHECK_AUTOGRAD(is_leaf() && requires_grad(), "register_post_accumulate_grad_hook: only "
                    "leaf tensors that require grad accumulate gradients");
  AutogradMeta& m = impl()->autograd_meta();
  m.post_accumulate_hooks.push_back(std::move(hook));
  return m.post_accumulate_hooks.size() - 1;
}

void Tensor::remove_post_accumulate_grad_hook(size_t id) const {
  AutogradMeta& m = impl()->autograd_meta();
  SL_CHECK_INDEX(id < m.post_accumulate_hooks.size(), "remove_post_accumulate_grad_hook: no "
                 "hook with id ", id);
  m.post_accumulate_hooks[id] = nullptr;
}

}  // namespace sl
