// Note [In-place on views]
// Every floating view made by a Tensor view method (view, reshape when it does not copy, slice,
// select, narrow, permute, transpose, t, expand, squeeze, unsqueeze, flatten, unflatten,
// movedim, as_strided) or by an op returning several views (split, chunk, attention heads) records
// its root base and the base's grad_fn at that time (ViewMeta in core/tensor.h,
// autograd/view_tracking.h). A view and its base share one version counter. Views made with core
// ops::* directly (dist/'s flat parameter and gradient buffers) are not tracked and never take part
// in autograd.
//
// Supported, with PyTorch's results:
// - An in-place op on the base after a view was taken (y.mul_(3) after v = y[0]): the view's
//   grad_fn no longer describes its values. The accessors that read grad_fn (requires_grad,
//   grad_fn, gradient_edge, so every op that takes the view as input, and backward) see that the
//   version moved and the base's grad_fn changed, and replace the view's grad_fn by an
//   AsStridedBackward of the base's current history. A write under NoGradGuard (an optimizer
//   step) leaves the base's grad_fn as it was, so the view keeps its graph, as in PyTorch.
// - A recorded in-place op on a view (copy_ of a computed value into a slice of an output or
//   padding buffer, v.mul_(w)): the op's node gets an edge to the base's previous history (the
//   view's old values are part of it) instead of the view's, and the base's grad_fn becomes a
//   CopySlices node (PyTorch's): its backward sends the base's gradient outside the view to the
//   base's previous history unchanged, and inside the view through the op's backward, whose
//   gradient for the view's old values is written back into that region. The view's grad_fn
//   becomes an AsStridedBackward of the new base history, and other views of the base follow as
//   above. A base that needed no grad (zeros()) requires grad afterwards.
// - An in-place op whose operand is another view of the written memory (v.add_(w), w aliasing
//   v): the op reads w after its kernel wrote and before it records, so w's edge is its old
//   history; once recorded, recheck_operand_views makes w compare with the base's new history
//   at its next read.
// - retain_grad follows the tensor through in-place changes (its own, its base's, a rebuild of
//   the view): .grad() is the gradient of the tensor's current value.
//
// Refused with AutogradError while grad mode is on and the op would record (the view, its base
// or an operand requires grad), before anything is written, as PyTorch refuses them:
// - a view of a leaf that requires grad (the leaf rule; optimizer steps run under NoGradGuard);
// - a view made under NoGradGuard: it is not in the graph, so whether the write belongs to the
//   gradient is ambiguous (for the same reason, such a view is refused when read with grad mode
//   on after its base got a new history from a recorded in-place op);
// - one of several views from one op (split, chunk, heads): they share one node, which cannot
//   be rebased for one of them;
// - an expanded view, or a view of an expanded base (several elements share one memory
//   location): the write is not a function of each element;
// - an as_strided alias reaching storage elements outside its base.
// An integer or bool tensor never records (copy_ of a float into one carries no gradient).
// detach_() refuses any tracked view (use detach()). In-place ops under NoGradGuard, and those
// that record nothing (no tensor involved requires grad), are always allowed: they only bump
// the version counter.
//
// The refresh writes the view's autograd meta lazily from const accessors; like other autograd
// state it is not synchronised, so one stale view must not be used from two threads at once.
// Hooks registered with register_hook stay on the grad_fn the tensor had when they were added.
// Note [Double backward]
// backward(..., create_graph = true) and grad(..., create_graph = true) run the backward with grad
// mode on, so the ops a backward formula calls record their own graph and the gradients can be
// differentiated again (gradient penalties, Hessian-vector products), as PyTorch's create_graph.
// - A formula sees its saved tensors attached to their history: an input saved with
//   SavedTensor(t) comes back with the grad_fn/output_nr it had when saved (a leaf: its
//   AccumulateGrad), an output saved with SavedTensor::output comes back as an output of the node
//   being run. Without create_graph unpack returns the plain saved tensor, as before.
// - Only ops recorded with DoubleBackward::supported (autograd/function.h) have formulas built
//   from differentiable ops; where a plain backward uses a kernel (a fused tanh/sigmoid/relu/gelu/
//   silu backward, the GEMMs of matmul and linear, reshape/expand/sum in sum_to) the formula
//   branches on GradMode and uses the differentiable ops when it is on (the same values). The
//   gradients of every other node get a NoDoubleBackward grad_fn: a second backward through
//   them throws AutogradError naming the op, even where the true second derivative would be zero
//   (never a silently missing term).
// - Supported: add/sub/mul/div (tensor and scalar), neg, abs, exp, log, log1p, expm1, sqrt,
//   rsqrt, square, reciprocal, tanh, sigmoid, relu, gelu (both forms), silu, sin, cos, erf, pow
//   (all three forms), maximum/minimum, clamp, hardtanh, leaky_relu, where, masked_fill, casts
//   and device copies, matmul/mm/bmm/dot/outer/addmm, linear, linear_act, softmax,
//   log_softmax, the views view/reshape/permute/transpose/t/expand/squeeze/unsqueeze/flatten/
//   unflatten/movedim/narrow/select/slice (any step) with clone/contiguous, cat, stack, split/
//   chunk, pad, flip, tril/triu, repeat;
//   reductions: sum, mean, prod, max/min (all and along a dim), amax/amin, var, std, norm,
//   logsumexp, cumsum; sort/topk;
//   indexing: gather, scatter, scatter_add, index_select, index_add, embedding, embedding_bag,
//   masked_select (each linear in its floating input: its gradient is again one of them);
//   every nn::functional loss but ctc_loss (composites of the above; binary_cross_entropy's own
//   node opts in);
//   layer_norm, batch_norm (training and eval), group_norm, instance_norm (the fused kernels
//   when grad mode is off; the formulas as differentiable ops, statistics recomputed from the
//   input, under create_graph); max/avg/adaptive pools 1-d and 2-d (Note [Pool double
//   backward], autograd/ops/pool.cpp) and interpolate in every mode (linear maps recorded with
//   their adjoints, detail::record_linear_pair); dropout (the same mask); attention_softmax and
//   scaled_dot_product_attention on both paths (the fused one's create_graph backward is the
//   unfused formulas, probabilities recomputed from q and k); LSTM / GRU cells and layers (the
//   forward recomputed as differentiable ops, Note [RNN double backward]); dp's output gather.
//   tests/autograd/test_double_backward*.cpp gradgradcheck every op-case table case of these and
//   check that the others refuse; gradgradcheck first checks that the gradient a create_graph
//   backward computes equals the plain backward's (the two branches of each formula).
//   In-place: add_, sub_, mul_ / div_ by a scalar, neg_, masked_fill_ on a tensor that is not a
//   view (Note [In-place double backward], autograd/ops/elementwise_methods.cpp).
//   Convolutions: conv1d/conv2d/conv_transpose1d/conv_transpose2d (Note [Conv double backward],
//   autograd/ops/conv.cpp).
// - Not yet: ctc_loss, copy_, the in-place ops that save a value (mul_ / div_ by a tensor,
//   clamp_, relu_, pow_, the unary ones but neg_), and any in-place op on a view.
// - The graph is kept (retain_graph is implied), as PyTorch's default for create_graph. An
//   AccumulateGrad under create_graph stores a copy with a graph (clone, then out-of-place adds),
//   so backward(create_graph) makes parameter -> .grad() -> graph -> AccumulateGrad -> parameter
//   a reference cycle, as in PyTorch (which warns about it): reset .grad() to break it, or use
//   grad(), which leaves .grad() alone.
#include "autograd/engine.h"

#include <optional>
#include <queue>
#include <string>
#include <unordered_map>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "core/amp.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/profiler.h"

namespace sl {

namespace {

struct ReadyCmp {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

struct GraphTask {
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, variable_list> buffers;
  // capture mode (sl::grad): gradients arriving at these (node, input_nr) slots are kept
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> captures;
  variable_list captured;
  bool capture_only = false;
};

void accumulate_into(variable_list& buf, uint32_t slot, Tensor g) {
  if (!buf[slot].defined()) {
    buf[slot] = std::move(g);
  } else if (GradMode::is_enabled()) {
    buf[slot] = add(buf[slot], g);  // create_graph: the sum is part of the recorded graph
  } else {
    buf[slot] = ops::binary(BinaryOp::add, buf[slot], g);
  }
}

/// The node a gradient computed under create_graph by a backward that is not
/// double_differentiable gets as its grad_fn: a second backward reaching it throws, naming the op.
class NoDoubleBackward final : public Node {
 public:
  explicit NoDoubleBackward(const char* op) : op_(op), name_(op_ + " (no double backward)") {}
  const char* name() const override { return name_.c_str(); }
  variable_list apply(variable_list&&) override {
    detail::throw_error<AutogradError>(
        op_,
        ": double backward is not supported for this op: a "
        "gradient computed through it with create_graph=true cannot be differentiated again "
        "(the ops that support it are listed in Note [Double backward], autograd/engine.cpp)");
  }

 private:
  std::string op_;  // the node whose gradient this guards ("SoftmaxBackward")
  std::string name_;
};

Tensor refuse_double_backward(const char* op, const Tensor& g) {
  Tensor out = g.detach();
  detail::attach_node(std::make_shared<NoDoubleBackward>(op), {}, {&out});
  return out;
}

Tensor check_grad(const Node& producer, size_t edge_index, const Node& target, uint32_t slot,
                  Tensor g) {
  const OutputMeta& m = target.outputs[slot];
  if (g.sizes() != m.sizes) {
    detail::throw_error<AutogradError>(producer.name(), ": backward returned a gradient of shape ",
                                       shape_str(g.sizes()), " for input ", edge_index,
                                       ", expected ", shape_str(m.sizes));
  }
  SL_CHECK_AUTOGRAD(g.device() == m.device, producer.name(), ": gradient for input ", edge_index,
                    " is on ", g.device(), ", expected ", m.device);
  if (g.dtype() != m.dtype) g = GradMode::is_enabled() ? g.to(m.dtype) : ops::cast(g, m.dtype);
  return g;
}

void execute(GraphTask& task, const std::vector<std::pair<Edge, Tensor>>& roots, bool retain_graph,
             bool create_graph) {
  // create_graph records the backward's own ops (Note [Double backward]); it keeps the graph.
  std::optional<NoGradGuard> no_grad;
  std::optional<EnableGradGuard> grad;
  if (create_graph) {
    grad.emplace();
    retain_graph = true;
  } else {
    no_grad.emplace();
  }
  // Backward ops run in the dtypes forward recorded, even when backward() is called inside an
  // autocast scope (Note [Autocast]); a checkpoint's recompute restores its forward's state.
  AutocastStateGuard no_autocast{AutocastState{}};
  // 1. dependency counts over everything reachable
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
  for (const auto& [edge, g] : roots) {
    if (!seen[edge.node.get()]) {
      seen[edge.node.get()] = true;
      stack.push_back(edge.node.get());
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.valid()) continue;
      Node* m = e.node.get();
      task.deps[m] += 1;
      if (!seen[m]) {
        seen[m] = true;
        stack.push_back(m);
      }
    }
  }
  // 2. seed root buffers
  std::priority_queue<Node*, std::vector<Node*>, ReadyCmp> ready;
  for (const auto& [edge, g] : roots) {
    Node* n = edge.node.get();
    auto& buf = task.buffers[n];
    if (buf.empty()) buf.resize(n->outputs.size());
    accumulate_into(buf, edge.input_nr, g);
  }
  for (const auto& [edge, g] : roots) {
    Node* n = edge.node.get();
    if (task.deps[n] == 0) {
      task.deps[n] = -1;  // queued
      ready.push(n);
    }
  }
  // 3. run
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    variable_list grads = std::move(task.buffers[node]);
    task.buffers.erase(node);
    if (grads.empty()) grads.resize(node->outputs.size());
    bool any = false;
    for (const auto& g : grads) any = any || g.defined();

    variable_list results;
    if (any) {
      for (const auto& hook : node->pre_hooks) {
        Tensor& g = grads[hook.output_nr];
        if (g.defined() && hook.fn) {
          Tensor r = hook.fn(g);
          if (r.defined()) {
            check_hook_result("a non-leaf", g, r);
            g = r;
          }
        }
      }
      auto cap = task.captures.find(node);
      if (cap != task.captures.end()) {
        for (auto [slot, idx] : cap->second) {
          if (grads[slot].defined()) task.captured[idx] = grads[slot];
        }
      }
      bool is_accumulate = dynamic_cast<AccumulateGrad*>(node) != nullptr;
      if (!(task.capture_only && is_accumulate)) {
        for (size_t i = 0; i < grads.size(); ++i) {
          if (!grads[i].defined()) {
            const OutputMeta& m = node->outputs[i];
            grads[i] = ops::empty(m.sizes, m.dtype, m.device);
            ops::fill_(grads[i], 0);
          }
        }
        profiler::Scope scope(node->name(), profiler::Category::autograd);
        {
          detail::CreateGraphNodeScope graph_node(create_graph ? node : nullptr);
          results = node->apply(std::move(grads));
        }
        if (!retain_graph) node->release_saved();
        SL_CHECK_AUTOGRAD(results.empty() || results.size() == node->next_edges.size(),
                          node->name(), ": backward returned ", results.size(),
                          " gradients, expected ", node->next_edges.size());
        if (create_graph && !node->double_differentiable) {
          for (Tensor& r : results) {
            if (r.defined()) r = refuse_double_backward(node->name(), r);
          }
        }
      }
    }
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.valid()) continue;
      Node* target = e.node.get();
      if (i < results.size() && results[i].defined()) {
        auto& buf = task.buffers[target];
        if (buf.empty()) buf.resize(target->outputs.size());
        accumulate_into(buf, e.input_nr, check_grad(*node, i, *target, e.input_nr, results[i]));
      }
      if (--task.deps[target] == 0) {
        task.deps[target] = -1;
        ready.push(target);
      }
    }
  }
}

std::vector<std::pair<Edge, Tensor>> make_roots(const variable_list& roots,
                                                const variable_list& grad_roots) {
  SL_CHECK_AUTOGRAD(grad_roots.empty() || grad_roots.size() == roots.size(),
                    "backward: got ", grad_roots.size(), " gradients for ", roots.size(),
                    " tensors");
  std::vector<std::pair<Edge, Tensor>> out;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& t = roots[i];
    ops::check_defined("backward", t, "root");
    Edge e = gradient_edge(t);
    SL_CHECK_AUTOGRAD(e.valid(), "backward: element ", i,
                      " of tensors does not require grad and does not have a grad_fn");
    Tensor g = i < grad_roots.size() ? grad_roots[i] : Tensor();
    if (!g.defined()) {
      SL_CHECK_AUTOGRAD(t.numel() == 1, "backward: grad can be implicitly created only for "
                        "tensors with one element, got shape ", shape_str(t.sizes()),
                        "; pass a gradient of that shape");
      g = ops::empty(t.sizes(), t.dtype(), t.device());
      ops::fill_(g, 1);
    } else {
      SL_CHECK_SHAPE(g.sizes() == t.sizes(), "backward: gradient of shape ", shape_str(g.sizes()),
                     " does not match the tensor's shape ", shape_str(t.sizes()));
      SL_CHECK_DEVICE(g.device() == t.device(), "backward: gradient on ", g.device(),
                      " for a tensor on ", t.device());
      if (g.dtype() != t.dtype()) g = ops::cast(g, t.dtype());
    }
    out.emplace_back(std::move(e), std::move(g));
  }
  return out;
}

}  // namespace

void run_backward(const variable_list& roots, const variable_list& grad_roots, bool retain_graph,
                  bool create_graph) {
  GraphTask task;
  execute(task, make_roots(roots, grad_roots), retain_graph, create_graph);
}

variable_list grad(const variable_list& outputs, const variable_list& inputs,
                   const variable_list& grad_outputs, bool retain_graph, bool create_graph) {
  GraphTask task;
  task.capture_only = true;
  task.captured.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i]);
    SL_CHECK_AUTOGRAD(e.valid(), "grad: input ", i, " does not require grad");
    task.captures[e.node.get()].emplace_back(e.input_nr, i);
  }
  execute(task, make_roots(outputs, grad_outputs), retain_graph, create_graph);
  return task.captured;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  run_backward({*this}, {gradient}, retain_graph, create_graph);
}

}  // namespace sl
