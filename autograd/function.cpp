#include "autograd/function.h"

#include "autograd/ops/reduce.h"
#include "autograd/view_tracking.h"
#include "core/ops/copy.h"
#include "core/ops/reduce.h"
#include "core/ops/view.h"

namespace sl {

bool needs_grad_list(const TensorList& ts) {
  if (!GradMode::is_enabled()) return false;
  for (const auto& t : ts) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

namespace {
void attach(const std::shared_ptr<Node>& node, Tensor* out, uint32_t index) {
  node->outputs.push_back(OutputMeta{out->sizes(), out->dtype(), out->device()});
  AutogradMeta& meta = out->impl()->autograd_meta();
  meta.grad_fn = node;
  meta.output_nr = index;
  meta.requires_grad = false;  // non-leaf: requires_grad() follows from grad_fn
}

template <class Inputs, class Outputs>
void attach_all(const std::shared_ptr<Node>& node, const Inputs& inputs, const Outputs& outputs) {
  node->next_edges.reserve(inputs.size());
  for (const auto& in : inputs) node->next_edges.push_back(gradient_edge(in));
  node->outputs.reserve(outputs.size());
  uint32_t i = 0;
  for (Tensor* out : outputs) attach(node, out, i++);
}
}  // namespace

namespace detail {
void attach_node(const std::shared_ptr<Node>& node, const TensorList& inputs,
                 const std::vector<Tensor*>& outputs) {
  attach_all(node, inputs, outputs);
}
void attach_node(const std::shared_ptr<Node>& node, std::initializer_list<Tensor> inputs,
                 std::initializer_list<Tensor*> outputs) {
  attach_all(node, inputs, outputs);
}
}  // namespace detail

void check_inplace(const Tensor& self, const char* op, std::initializer_list<Tensor> others) {
  ops::check_defined(op, self);  // an undefined self would be dereferenced below
  if (!GradMode::is_enabled() || !self.impl()->autograd) return;
  const AutogradMeta& meta = *self.impl()->autograd;
  SL_CHECK_AUTOGRAD(!(meta.requires_grad && !meta.grad_fn), op,
                    ": a leaf tensor that requires grad is being used in an in-place operation "
                    "(wrap the update in sl::NoGradGuard)");
  if (meta.view) detail::check_inplace_view(self, op, others);
}

namespace detail {
void attach_node_inplace(const std::shared_ptr<Node>& node, Tensor& self,
                         std::initializer_list<Tensor> others) {
  // an integer or bool tensor never joins the graph (copy_ of a float into it records nothing),
  // as PyTorch: its values carry no gradient
  if (!is_floating(self.dtype())) return;
  if (self.impl()->autograd && self.impl()->autograd->view) {
    rebase_view(node, self, others);  // the base's history is rewritten (CopySlices)
    return;
  }
  node->next_edges.reserve(others.size() + 1);
  node->next_edges.push_back(gradient_edge(self));
  for (const auto& in : others) node->next_edges.push_back(gradient_edge(in));
  AutogradMeta& meta = self.impl()->autograd_meta();
  meta.grad_fn = node;
  meta.output_nr = 0;
  meta.requires_grad = false;
  node->outputs.push_back(OutputMeta{self.sizes(), self.dtype(), self.device()});
  if (meta.retains_grad) add_retain_grad_hook(self.impl_ptr());
  recheck_operand_views(others);
}
}  // namespace detail

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.sizes() == shape) return grad;
  const Shape& gs = grad.sizes();
  SL_CHECK_SHAPE(gs.size() >= shape.size(), "sum_to: gradient of shape ", shape_str(gs),
                 " cannot be reduced to ", shape_str(shape));
  size_t lead = gs.size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < gs.size(); ++i) {
    if (i < lead) {
      dims.push_back(static_cast<int64_t>(i));
    } else if (shape[i - lead] == 1 && gs[i] != 1) {
      dims.push_back(static_cast<int64_t>(i));
    } else {
      SL_CHECK_SHAPE(shape[i - lead] == gs[i], "sum_to: gradient of shape ", shape_str(gs),
                     " cannot be reduced to ", shape_str(shape));
    }
  }
  Tensor r = dims.empty() ? grad : grad_sum(grad, dims, /*keepdim=*/true);
  return grad_reshape(r, shape);
}

Tensor grad_reshape(const Tensor& g, const Shape& shape) {
  return GradMode::is_enabled() ? g.reshape(shape) : ops::reshape(g, shape);
}

Tensor grad_expand(const Tensor& g, const Shape& shape) {
  return GradMode::is_enabled() ? g.expand(shape) : ops::expand(g, shape);
}

Tensor grad_sum(const Tensor& g, const std::vector<int64_t>& dims, bool keepdim) {
  return GradMode::is_enabled() ? sum(g, dims, keepdim)
                                : ops::reduce(ReduceOp::sum, g, dims, keepdim);
}

}  // namespace sl
