#include "core/shape.h"

#include <ostream>
#include <sstream>

#include "core/error.h"

namespace sl {

int64_t shape_numel(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    SL_CHECK(s >= 0, "shape: negative size ", s, " in ", shape_str(sizes));
    if (__builtin_mul_overflow(n, s, &n)) {
      detail::throw_error<ValueError>("shape: element count of ", shape_str(sizes),
                                      " overflows int64");
    }
  }
  return n;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape st(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = acc;
    acc *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return st;
}

bool is_contiguous_layout(const Shape& sizes, const Shape& strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 0) return true;
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << shape_str(s); }

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = ndim > 0 ? ndim : 1;
  SL_CHECK_INDEX(dim >= -n && dim < n, op, ": dim ", dim, " out of range for a ", ndim,
                 "-d tensor (expected ", -n, " <= dim < ", n, ")");
  return dim < 0 ? dim + n : dim;
}

std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  std::vector<bool> seen(static_cast<size_t>(ndim > 0 ? ndim : 1), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim, op);
    SL_CHECK(!seen[static_cast<size_t>(w)], op, ": dim ", d, " appears more than once in the dim list");
    seen[static_cast<size_t>(w)] = true;
    if (ndim > 0) out.push_back(w);
  }
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t sa = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t sb = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (sa != sb && sa != 1 && sb != 1) {
      detail::throw_error<ShapeError>(op, ": shapes ", shape_str(a), " and ", shape_str(b),
                                      " do not broadcast (dim ",
                                      static_cast<int64_t>(i) - static_cast<int64_t>(n), ": ", sa,
                                      " vs ", sb, ")");
    }
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

Shape infer_size(const Shape& requested, int64_t numel, const char* op) {
  Shape out = requested;
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      SL_CHECK_SHAPE(infer_at < 0, op, ": only one dim can be -1 in ", shape_str(requested));
      infer_at = static_cast<int>(i);
    } else {
      SL_CHECK_SHAPE(out[i] >= 0, op, ": invalid size ", out[i], " in ", shape_str(requested));
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    SL_CHECK_SHAPE(known != 0 && numel % known == 0, op, ": shape ", shape_str(requested),
                   " is invalid for input of size ", numel);
    out[static_cast<size_t>(infer_at)] = numel / known;
  } else {
    SL_CHECK_SHAPE(known == numel, op, ": shape ", shape_str(requested),
                   " is invalid for input of size ", numel);
  }
  return out;
}

bool compute_view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes,
                          Shape& new_strides) {
  new_strides.assign(new_sizes.size(), 0);
  if (sizes.empty()) {  // 0-d: every new dim is size 1
    for (auto& s : new_strides) s = 1;
    return true;
  }
  int64_t numel = shape_numel(sizes);
  if (numel == 0) {
    new_strides = contiguous_strides(new_sizes);
    return true;
  }
  // Walk old dims from the end, grouping runs that are contiguous with each other ("chunks");
  // each chunk must be covered exactly by a run of new dims.
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t td = static_cast<int64_t>(sizes.size()) - 1; td >= 0; --td) {
    tensor_numel *= sizes[static_cast<size_t>(td)];
    bool chunk_end = td == 0 || (sizes[static_cast<size_t>(td - 1)] != 1 &&
                                 strides[static_cast<size_t>(td - 1)] !=
                                     tensor_numel * chunk_base_stride);
    if (chunk_end) {
      while (view_d >= 0 &&
             (view_numel < tensor_numel || new_sizes[static_cast<size_t>(view_d)] == 1)) {
        new_strides[static_cast<size_t>(view_d)] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (td > 0) {
        chunk_base_stride = strides[static_cast<size_t>(td - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

}  // namespace sl
