#include "core/ops/overlap.h"

#include <algorithm>
#include <utility>

namespace sl::ops {

namespace {
/// [first, last] byte addresses the elements of t occupy (t has at least one element).
std::pair<const char*, const char*> byte_range(const Tensor& t) {
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < t.sizes().size(); ++d) {
    int64_t span = (t.sizes()[d] - 1) * t.strides()[d];
    lo += std::min<int64_t>(span, 0);
    hi += std::max<int64_t>(span, 0);
  }
  const char* base = static_cast<const char*>(t.data_ptr());
  auto es = static_cast<int64_t>(t.element_size());
  return {base + lo * es, base + (hi + 1) * es - 1};
}
}  // namespace

void check_no_internal_overlap(const char* op, const Tensor& t) {
  for (size_t d = 0; d < t.sizes().size(); ++d) {
    SL_CHECK(!(t.sizes()[d] > 1 && t.strides()[d] == 0), op,
             ": unsupported operation: more than one element of the written-to tensor refers to a "
             "single memory location (shape ",
             shape_str(t.sizes()), ", strides ", shape_str(t.strides()),
             "); clone() the tensor before writing to it");
  }
}

bool partially_overlaps(const Tensor& a, const Tensor& b) {
  if (!a.is_same_storage(b) || a.numel() == 0 || b.numel() == 0) return false;
  if (a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
      a.dtype() == b.dtype()) {
    return false;
  }
  auto [a0, a1] = byte_range(a);
  auto [b0, b1] = byte_range(b);
  return a0 <= b1 && b0 <= a1;
}

}  // namespace sl::ops
