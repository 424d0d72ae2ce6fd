// Checks and the reduction shared by the loss functions of nn/loss*.cpp (internal to nn).
#pragma once

#include <utility>

#include "core/amp.h"
#include "core/error.h"
#include "nn/loss.h"

namespace sl::nn::functional::detail {

/// l itself (none), its sum or its mean over every element.
inline Tensor reduce(const Tensor& l, Reduction r) {
  switch (r) {
    case Reduction::none:
      return l;
    case Reduction::sum:
      return l.sum();
    case Reduction::mean:
      return l.mean();
  }
  return l;
}

/// Throws ValueError naming op and what when t is undefined, DTypeError when not floating.
inline void check_floating(const Tensor& t, const char* op, const char* what) {
  SL_CHECK(t.defined(), op, ": ", what, " is undefined");
  SL_CHECK_DTYPE(t.is_floating_point(), op, ": ", what, " must be floating point, got ",
                 dtype_name(t.dtype()));
}

/// A floating input and a target of one shape on one device (ShapeError / DeviceError).
inline void check_same_shape(const Tensor& input, const Tensor& target, const char* op) {
  check_floating(input, op, "input");
  SL_CHECK(target.defined(), op, ": target is undefined");
  SL_CHECK_SHAPE(input.sizes() == target.sizes(), op, ": input shape ", shape_str(input.sizes()),
                 " and target shape ", shape_str(target.sizes()), " must be equal");
  SL_CHECK_DEVICE(input.device() == target.device(), op, ": input is on ", input.device(),
                  " but target is on ", target.device());
}

/// input and target in float32 under autocast (Note [Autocast] in core/amp.h), checked by
/// check_same_shape: the start of every loss that compares two same-shaped tensors.
inline std::pair<Tensor, Tensor> same_shape_operands(const Tensor& input, const Tensor& target,
                                                     const char* op) {
  Tensor in = autocast(input, AmpPolicy::fp32), tg = autocast(target, AmpPolicy::fp32);
  check_same_shape(in, tg, op);
  return {in, tg};
}

// Note [Loss weight broadcasting]: an optional weight must broadcast TO the input's shape, as
// PyTorch requires; broadcasting the loss up to a larger weight would silently change the
// 'none' shape and the 'mean' divisor.
/// Throws ShapeError unless w (when defined) broadcasts to input's shape, DeviceError.
inline void check_broadcasts_to(const Tensor& w, const Tensor& input, const char* op,
                                const char* what) {
  if (!w.defined()) return;
  SL_CHECK_DEVICE(w.device() == input.device(), op, ": input is on ", input.device(), " but ", what,
                  " is on ", w.device());
  bool ok = w.dim() <= input.dim();
  for (int64_t i = 1; ok && i <= w.dim(); ++i) {
    const int64_t ws = w.size(-i), is = input.size(-i);
    ok = ws == is || ws == 1;
  }
  SL_CHECK_SHAPE(ok, op, ": ", what, " of shape ", shape_str(w.sizes()),
                 " must broadcast to the input's shape ", shape_str(input.sizes()));
}

}  // namespace sl::nn::functional::detail
