// Autograd's bookkeeping for views (Note [In-place on views], autograd/engine.cpp): which tensor a
// view was taken of, bringing a view's grad_fn up to date after its base changed history, and
// rewriting a base's history when one of its views is modified in place (CopySlices).
#pragma once

#include <initializer_list>
#include <memory>

#include "autograd/node.h"

namespace sl::detail {

/// Records that `out` (made by a view op from `input`, sharing its storage) is a view of
/// input's root base. `creation` is normal for single-output view ops and multi_output (with
/// `creator`, the op's backward name) for ops returning several views; it becomes no_grad when
/// grad mode is off, and a view of a no_grad or multi_output view inherits that. Does nothing
/// for non-floating tensors (they never take part in autograd).
void mark_view(Tensor& out, const Tensor& input, ViewCreation creation = ViewCreation::normal,
               const char* creator = nullptr);

/// When `impl` is a tracked view whose storage was written since its grad_fn was made and whose
/// base got a new history meanwhile (an in-place op on the base or on another of its views),
/// replaces the view's grad_fn by an AsStridedBackward of the base's current history, so that
/// it describes the view's current values. Cheap when nothing changed; called by the accessors
/// that read grad_fn (requires_grad, grad_fn, gradient_edge, requires_grad_, ...). A view made
/// under NoGradGuard whose base got a new history throws AutogradError when read with grad mode
/// on (PyTorch's "A view was created in no_grad mode and its base ... modified inplace").
void refresh_view(const std::shared_ptr<TensorImpl>& impl);

/// check_inplace's part for views: throws AutogradError when an in-place op `op` on the view
/// `self` would record (grad mode on, and self, its base or one of `others` requires grad) but
/// cannot: the base is a leaf that requires grad, the view was made under NoGradGuard or by an
/// op returning several views, or elements of the view share memory (an expanded view).
void check_inplace_view(const Tensor& self, const char* op, std::initializer_list<Tensor> others);

/// record_inplace's body for a tracked view `self` (PyTorch's CopySlices): `fn`, the in-place
/// op's node, gets edges to the base's previous history and `others`; the base gets a
/// CopySlices node that sends the gradient outside the view to the base's previous history and
/// the gradient of the view through fn; the view's grad_fn becomes an AsStridedBackward of it.
void rebase_view(const std::shared_ptr<Node>& fn, Tensor& self,
                 std::initializer_list<Tensor> others);

/// After an in-place op recorded its node: makes each view among `others` (the op's operands)
/// compare its grad_fn with its base's history again at its next read. The op read them after
/// its kernel had written and before the record (their edges must be their old histories), so
/// a view of the written memory may have brought itself up to date with the version that the
/// record has only now given a new history.
void recheck_operand_views(std::initializer_list<Tensor> others);

/// Makes the non-leaf tensor `impl` (retains_grad set) store the gradient arriving at its
/// current grad_fn in .grad(); a hook left on an earlier grad_fn (before an in-place op) then
/// stores nothing. Called by retain_grad and whenever an in-place op or a view's refresh gives a
/// retaining tensor a new grad_fn (PyTorch 1.13 moves retain_grad to the new grad_fn too).
void add_retain_grad_hook(const std::shared_ptr<TensorImpl>& impl);

}  // namespace sl::detail
