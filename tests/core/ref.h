// Plain float64 reference arrays and loops for the op-case table (tests only).
//
// Every reference result in tests/core/op_cases_*.cpp is computed here with simple loops over
// row-major std::vector<double> data: no Shardlight op is called, so a kernel bug cannot hide
// in its own reference. Broadcasting, dim wrapping and index arithmetic are re-implemented
// below on purpose.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <vector>

#include <shardlight/shardlight.h>

namespace sl::testing {

/// A row-major float64 array; `dtype`, when set, is the dtype the op's result must have
/// (otherwise the case's dtype).
struct Ref {
  Shape shape;
  std::vector<double> v;
  std::optional<DType> dtype;

  Ref() = default;
  explicit Ref(Shape s, double fill = 0.0)
      : shape(std::move(s)), v(static_cast<size_t>(count(shape)), fill) {}
  Ref(Shape s, std::vector<double> values) : shape(std::move(s)), v(std::move(values)) {}

  static int64_t count(const Shape& s) {
    int64_t n = 1;
    for (int64_t x : s) n *= x;
    return n;
  }
  int64_t numel() const { return static_cast<int64_t>(v.size()); }
  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  /// Flat offset of a multi-index (row-major).
  int64_t offset(const Shape& idx) const {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
    return off;
  }
  double& at(const Shape& idx) { return v[static_cast<size_t>(offset(idx))]; }
  double at(const Shape& idx) const { return v[static_cast<size_t>(offset(idx))]; }
  Ref& as(DType dt) {
    dtype = dt;
    return *this;
  }
};

/// Wraps a dim like PyTorch (0-d tensors accept 0 and -1).
inline int64_t ref_wrap(int64_t d, int64_t ndim) {
  int64_t n = ndim > 0 ? ndim : 1;
  if (d < -n || d >= n) throw std::logic_error("ref_wrap: bad dim in a test case");
  return d < 0 ? d + n : d;
}

/// Calls f(idx) for every multi-index of shape, row-major.
inline void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& f) {
  int64_t n = Ref::count(shape);
  Shape idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(idx);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < shape[static_cast<size_t>(d)]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

/// NumPy broadcasting of two shapes (throws std::logic_error when a test case is malformed).
inline Shape ref_broadcast(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i + a.size() >= n ? a[i + a.size() - n] : 1;
    int64_t y = i + b.size() >= n ? b[i + b.size() - n] : 1;
    if (x != y && x != 1 && y != 1)
      throw std::logic_error("ref_broadcast: shapes do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

/// Element of r at the position idx of a broadcast result shape.
inline double bget(const Ref& r, const Shape& idx) {
  size_t lead = idx.size() - r.shape.size();
  int64_t off = 0;
  for (size_t d = 0; d < r.shape.size(); ++d) {
    int64_t i = r.shape[d] == 1 ? 0 : idx[d + lead];
    off = off * r.shape[d] + i;
  }
  return r.v[static_cast<size_t>(off)];
}

inline Ref map1(const Ref& a, const std::function<double(double)>& f) {
  Ref out(a.shape);
  for (size_t i = 0; i < a.v.size(); ++i) out.v[i] = f(a.v[i]);
  return out;
}

inline Ref map2(const Ref& a, const Ref& b, const std::function<double(double, double)>& f) {
  Ref out(ref_broadcast(a.shape, b.shape));
  for_each_index(out.shape, [&](const Shape& idx) { out.at(idx) = f(bget(a, idx), bget(b, idx)); });
  return out;
}

inline Ref map3(const Ref& a, const Ref& b, const Ref& c,
                const std::function<double(double, double, double)>& f) {
  Ref out(ref_broadcast(ref_broadcast(a.shape, b.shape), c.shape));
  for_each_index(out.shape, [&](const Shape& idx) {
    out.at(idx) = f(bget(a, idx), bget(b, idx), bget(c, idx));
  });
  return out;
}

/// Reduces `dims` (empty: all) of a: f receives the values of each reduced slice in row-major
/// order of the reduced dims.
inline Ref reduce_ref(const Ref& a, std::vector<int64_t> dims, bool keepdim,
                      const std::function<double(const std::vector<double>&)>& f) {
  int64_t n = a.ndim();
  std::vector<bool> red(static_cast<size_t>(std::max<int64_t>(n, 1)), dims.empty());
  for (int64_t& d : dims) red[static_cast<size_t>(ref_wrap(d, n))] = true;
  Shape out_shape, red_shape, kept_shape;
  for (int64_t d = 0; d < n; ++d) {
    bool r = red[static_cast<size_t>(d)];
    if (r)
      red_shape.push_back(a.shape[static_cast<size_t>(d)]);
    else
      kept_shape.push_back(a.shape[static_cast<size_t>(d)]);
    if (!r)
      out_shape.push_back(a.shape[static_cast<size_t>(d)]);
    else if (keepdim)
      out_shape.push_back(1);
  }
  Ref out(out_shape);
  int64_t k = 0;
  for_each_index(kept_shape, [&](const Shape& kidx) {
    std::vector<double> vals;
    for_each_index(red_shape, [&](const Shape& ridx) {
      Shape full(static_cast<size_t>(n));
      size_t ki = 0, ri = 0;
      for (int64_t d = 0; d < n; ++d) {
        full[static_cast<size_t>(d)] = red[static_cast<size_t>(d)] ? ridx[ri++] : kidx[ki++];
      }
      vals.push_back(n == 0 ? a.v[0] : a.at(full));
    });
    out.v[static_cast<size_t>(k++)] = f(vals);
  });
  return out;
}

/// Applies f to every line of a along dim (a 0-d array is one line of length 1); f returns the
/// new line, whose length becomes the size of that dim in the result.
inline Ref along_dim(const Ref& a, int64_t dim,
                     const std::function<std::vector<double>(const std::vector<double>&)>& f) {
  int64_t n = a.ndim();
  if (n == 0) {
    std::vector<double> r = f({a.v[0]});
    return Ref(Shape{}, r);
  }
  int64_t d = ref_wrap(dim, n);
  int64_t outer = 1, len = a.shape[static_cast<size_t>(d)], inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= a.shape[static_cast<size_t>(i)];
  for (int64_t i = d + 1; i < n; ++i) inner *= a.shape[static_cast<size_t>(i)];
  std::optional<int64_t> out_len;
  std::vector<std::vector<double>> lines;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<double> line(static_cast<size_t>(len));
      for (int64_t r = 0; r < len; ++r)
        line[static_cast<size_t>(r)] = a.v[static_cast<size_t>((o * len + r) * inner + i)];
      lines.push_back(f(line));
      out_len = static_cast<int64_t>(lines.back().size());
    }
  }
  if (!out_len)
    out_len = static_cast<int64_t>(f(std::vector<double>(static_cast<size_t>(len))).size());
  Shape s = a.shape;
  s[static_cast<size_t>(d)] = *out_len;
  Ref out(s);
  size_t li = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i, ++li) {
      for (int64_t r = 0; r < *out_len; ++r) {
        out.v[static_cast<size_t>((o * *out_len + r) * inner + i)] =
            lines[li][static_cast<size_t>(r)];
      }
    }
  }
  return out;
}

/// Result-shape permutation: out.shape[i] = a.shape[perm[i]].
inline Ref permute_ref(const Ref& a, const std::vector<int64_t>& perm) {
  Shape s;
  for (int64_t p : perm) s.push_back(a.shape[static_cast<size_t>(p)]);
  Ref out(s);
  for_each_index(s, [&](const Shape& idx) {
    Shape src(idx.size());
    for (size_t i = 0; i < perm.size(); ++i) src[static_cast<size_t>(perm[i])] = idx[i];
    out.at(idx) = a.at(src);
  });
  return out;
}

/// Same data, new shape (row-major order unchanged).
inline Ref reshape_ref(const Ref& a, Shape s) {
  Ref out = a;
  out.shape = std::move(s);
  out.dtype.reset();
  return out;
}

/// torch.matmul semantics with batch broadcasting.
inline Ref matmul_ref(const Ref& a0, const Ref& b0) {
  Ref a = a0, b = b0;
  bool a1 = a.ndim() == 1, b1 = b.ndim() == 1;
  if (a1) a.shape.insert(a.shape.begin(), 1);
  if (b1) b.shape.push_back(1);
  int64_t M = a.shape[a.shape.size() - 2], K = a.shape.back(), N = b.shape.back();
  Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  Shape batch = ref_broadcast(ba, bb);
  Shape os = batch;
  os.insert(os.end(), {M, N});
  Ref out(os);
  for_each_index(os, [&](const Shape& idx) {
    Shape ia(idx.begin(), idx.end() - 2), ib = ia;
    double s = 0;
    for (int64_t k = 0; k < K; ++k) {
      Shape pa = ia, pb = ib;
      pa.insert(pa.end(), {idx[idx.size() - 2], k});
      pb.insert(pb.end(), {k, idx.back()});
      s += bget(a, pa) * bget(b, pb);
    }
    out.at(idx) = s;
  });
  Shape final_shape = batch;
  if (!a1) final_shape.push_back(M);
  if (!b1) final_shape.push_back(N);
  return reshape_ref(out, final_shape);
}

}  // namespace sl::testing
