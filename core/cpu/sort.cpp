// CPU kernels of the sort family over contiguous [outer, n, inner] tensors. Every slice is
// sorted by one thread with a strict total order (value, then input position), which makes the
// result stable and independent of the thread count.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/cpu/loops.h"
#include "core/ops/sort.h"

namespace sl::cpu {
namespace {

/// a before b in ascending order, NaN last.
template <class C>
inline bool less_nan_last(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (b != b) return a == a;
    return a < b;
  } else {
    return a < b;
  }
}

/// Sorts the slices of in: writes the first `k` positions of each sorted slice.
template <class T>
void sort_slices(const Tensor& values, const Tensor& indices, const Tensor& in, int64_t k,
                 bool descending, bool partial) {
  using C = compute_t<T>;
  const int64_t outer = in.size(0), n = in.size(1), inner = in.size(2);
  const T* x = in.data_ptr<T>();
  T* v = values.data_ptr<T>();
  int64_t* ix = indices.data_ptr<int64_t>();
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
  parallel_for(0, outer * inner, grain, [&](int64_t b, int64_t e) {
    std::vector<C> key(static_cast<size_t>(n));
    std::vector<int64_t> perm(static_cast<size_t>(n));
    for (int64_t s = b; s < e; ++s) {
      const int64_t o = s / inner, i = s % inner;
      const T* src = x + o * n * inner + i;
      for (int64_t r = 0; r < n; ++r) key[static_cast<size_t>(r)] = static_cast<C>(src[r * inner]);
      std::iota(perm.begin(), perm.end(), int64_t{0});
      auto before = [&](int64_t p, int64_t q) {
        C a = key[static_cast<size_t>(p)], c = key[static_cast<size_t>(q)];
        bool ab = descending ? less_nan_last(c, a) : less_nan_last(a, c);
        bool ba = descending ? less_nan_last(a, c) : less_nan_last(c, a);
        return ab || (!ba && p < q);
      };
      if (partial) {
        std::partial_sort(perm.begin(), perm.begin() + k, perm.end(), before);
      } else {
        std::sort(perm.begin(), perm.end(), before);
      }
      T* vd = v + o * k * inner + i;
      int64_t* id = ix + o * k * inner + i;
      for (int64_t r = 0; r < k; ++r) {
        int64_t p = perm[static_cast<size_t>(r)];
        vd[r * inner] = src[p * inner];
        id[r * inner] = p;
      }
    }
  });
}

void sort_cpu(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending) {
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    sort_slices<T>(values, indices, in, in.size(1), descending, false);
  });
}

void topk_cpu(const Tensor& values, const Tensor& indices, const Tensor& in, int64_t k,
              bool largest) {
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    sort_slices<T>(values, indices, in, k, largest, true);
  });
}

SL_REGISTER_KERNEL(sort_kernel, DeviceKind::cpu, &sort_cpu);
SL_REGISTER_KERNEL(topk_kernel, DeviceKind::cpu, &topk_cpu);

}  // namespace
}  // namespace sl::cpu
