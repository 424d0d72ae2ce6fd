#include "autograd/node.h"

#include <atomic>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/view_tracking.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"

namespace sl {

namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
thread_local bool t_grad_enabled = true;
}  // namespace

bool GradMode::is_enabled() {
  return t_grad_enabled;
}
void GradMode::set_enabled(bool enabled) {
  t_grad_enabled = enabled;
}

Node::Node() : sequence_nr(g_next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}
// Note [Deep graph teardown]
// A node owns its inputs' nodes through next_edges, so freeing the last tensor of a long chain
// (an unrolled RNN, or a loss summed over many iterations without detach) would destroy the
// chain recursively, one stack frame per node, and overflow the stack at a few hundred thousand
// nodes. Instead, the outermost destructor on a thread collects the input nodes this node held
// the last reference to and releases them one at a time in a loop; nested destructors only hand
// theirs to that loop. Nodes still referenced elsewhere are simply unreferenced as usual.
Node::~Node() {
  // trivially destructible, so it stays usable while thread-local objects are being destroyed
  static thread_local std::vector<std::shared_ptr<Node>>* t_pending = nullptr;
  bool releases_last = false;
  for (const Edge& e : next_edges) releases_last |= e.node != nullptr && e.node.use_count() == 1;
  if (!releases_last) return;
  std::vector<std::shared_ptr<Node>> local;
  std::vector<std::shared_ptr<Node>>& pending = t_pending ? *t_pending : local;
  for (Edge& e : next_edges) {
    if (e.node) pending.push_back(std::move(e.node));
  }
  if (t_pending) return;  // the outer loop below (in an enclosing destructor) releases them
  t_pending = &local;
  while (!local.empty()) {
    std::shared_ptr<Node> n = std::move(local.back());
    local.pop_back();
    n.reset();  // may run ~Node, which appends to `local`
  }
  t_pending = nullptr;
}

variable_list LambdaNodeBase::apply(variable_list&& grads) {
  SL_CHECK_AUTOGRAD(!released(), name_,
                    ": trying to backward through the graph a second time (or directly access "
                    "saved tensors after they have already been freed); call backward with "
                    "retain_graph=true the first time if you need to");
  uint64_t mask = 0;
  for (size_t i = 0; i < next_edges.size() && i < 64; ++i) {
    if (next_edges[i].valid()) mask |= uint64_t{1} << i;
  }
  BackwardCtx ctx{grads, mask};
  return call(ctx);
}

void check_hook_result(const char* on, const Tensor& given, const Tensor& returned) {
  SL_CHECK_SHAPE(returned.sizes() == given.sizes(), "register_hook: a hook on ", on,
                 " tensor has changed the size of the gradient: was ", shape_str(given.sizes()),
                 ", got ", shape_str(returned.sizes()));
  SL_CHECK_DTYPE(returned.dtype() == given.dtype(), "register_hook: a hook on ", on,
                 " tensor has changed the dtype of the gradient: was ", dtype_name(given.dtype()),
                 ", got ", dtype_name(returned.dtype()));
  SL_CHECK_DEVICE(returned.device() == given.device(), "register_hook: a hook on ", on,
                  " tensor has changed the device of the gradient: was ", given.device(), ", got ",
                  returned.device());
}

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  sequence_nr = UINT64_MAX;  // run as soon as ready
  outputs.push_back(OutputMeta{variable_.sizes(), variable_.dtype(), variable_.device()});
}

variable_list AccumulateGrad::apply(variable_list&& grads) {
  Tensor g = std::move(grads[0]);
  AutogradMeta& meta = variable_.impl()->autograd_meta();
  for (auto& hook : meta.hooks) {
    if (!hook) continue;
    Tensor r = hook(g);
    if (!r.defined()) return {};  // consumed by the hook
    check_hook_result("a leaf", g, r);
    g = std::move(r);
  }
  if (GradMode::is_enabled()) {
    // create_graph (Note [Double backward]): .grad() keeps how it was computed, so it is a copy
    // made by a differentiable op, or the out-of-place sum with the previous .grad(), as PyTorch.
    meta.grad = meta.grad.defined() ? add(meta.grad, g) : g.clone();
  } else if (!meta.grad.defined()) {
    // Steal the incoming buffer when nobody else can see it; otherwise copy, so that .grad()
    // never aliases another tensor.
    bool exclusive = g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 &&
                     g.is_contiguous() && g.storage_offset() == 0 &&
                     g.storage()->nbytes() == g.nbytes();
    meta.grad = exclusive ? g : ops::contiguous(g, /*force_copy=*/true);
  } else {
    ops::binary_(BinaryOp::add, meta.grad, g);
  }
  for (auto& hook : meta.post_accumulate_hooks) {
    if (hook) hook(variable_);
  }
  return {};
}

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  tensor_ = t.detach();
  version_ = t.version();
  if (t.requires_grad()) history_ = gradient_edge(t);
}

SavedTensor SavedTensor::output(const Tensor& out, uint32_t output_nr) {
  SavedTensor s;
  if (!out.defined()) return s;
  s.tensor_ = out.detach();
  s.version_ = out.version();
  s.output_nr_ = output_nr;
  s.is_output_ = true;
  return s;
}

Tensor SavedTensor::unpack(const char* op) const {
  if (tensor_.defined() && tensor_.version() != version_) [[unlikely]] {
    detail::throw_error<AutogradError>(
        op, ": one of the tensors needed for gradient computation (shape ",
        shape_str(tensor_.sizes()), ", ", dtype_name(tensor_.dtype()),
        ") has been modified by an in-place operation: it was saved at version ", version_,
        " and is now at version ", tensor_.version());
  }
  if (Node* n = detail::create_graph_node(); n && tensor_.defined()) [[unlikely]] {
    Edge e = is_output_ ? Edge{n->shared_from_this(), output_nr_} : history_;
    if (e.valid()) return detail::alias_with_history(tensor_, e);
  }
  return tensor_;
}

namespace detail {
namespace {
thread_local Node* t_create_graph_node = nullptr;
}  // namespace

Node* create_graph_node() {
  return t_create_graph_node;
}

CreateGraphNodeScope::CreateGraphNodeScope(Node* node) : prev_(t_create_graph_node) {
  t_create_graph_node = node;
}
CreateGraphNodeScope::~CreateGraphNodeScope() {
  t_create_graph_node = prev_;
}

Tensor alias_with_history(const Tensor& t, const Edge& e) {
  Tensor a = t.detach();
  AutogradMeta& meta = a.impl()->autograd_meta();
  meta.grad_fn = e.node;
  meta.output_nr = e.input_nr;
  return a;
}
}  // namespace detail

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  AutogradMeta& meta = leaf.impl()->autograd_meta();
  if (auto acc = meta.grad_accumulator.lock()) return acc;
  auto acc = std::make_shared<AccumulateGrad>(leaf);
  meta.grad_accumulator = acc;
  return acc;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.impl()->autograd) return {};
  if (t.impl()->autograd->view) detail::refresh_view(t.impl_ptr());
  const AutogradMeta& meta = *t.impl()->autograd;
  if (meta.grad_fn) return Edge{meta.grad_fn, meta.output_nr};
  if (meta.requires_grad) return Edge{grad_accumulator(t), 0};
  return {};
}

}  // namespace sl
