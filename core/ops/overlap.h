// Memory-overlap checks for ops that write into an existing tensor.
//
// Note [In-place overlap]
// copy_ and the in-place elementwise ops (binary_, unary_, clamp_, masked_fill_) refuse a
// destination in which two elements share one memory location (a broadcast dim of size > 1
// with stride 0, as expand() makes): the result would depend on the order of the writes.
// PyTorch raises the same error. An input that partially overlaps the destination (another
// view of the same memory, e.g. x[1:] += x[:-1]) is copied before the write, so the result is
// always as if every input had been read first, whatever the layout or the thread count.
// The exact same view as the destination needs no copy (elementwise ops read each element
// before writing it). fill_ may write into aliasing elements (they all get the same value).
#pragma once

#include "core/tensor.h"

namespace sl::ops {

/// Throws ValueError naming op when two elements of t refer to the same memory location.
void check_no_internal_overlap(const char* op, const Tensor& t);
/// True when a and b view the same storage, their memory ranges intersect, and they are not
/// the same view (same start, sizes, strides and dtype).
bool partially_overlaps(const Tensor& a, const Tensor& b);

}  // namespace sl::ops
