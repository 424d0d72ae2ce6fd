// CPU kernel of the embedding_bag family (core/ops/embedding_bag.h): a task per range of bags,
// each bag's entries walked in order, so the result does not depend on the thread count.
#include <algorithm>

#include "core/cpu/loops.h"
#include "core/ops/embedding_bag.h"

namespace sl::cpu {
namespace {

void embedding_bag_max_cpu(const Tensor& out, const Tensor& arg, const Tensor& rows,
                           const Tensor& bounds, const Tensor& index, int64_t skip) {
  const int64_t B = out.size(0), D = out.size(1), L = rows.size(0);
  const int64_t* bnd = bounds.data_ptr<int64_t>();
  const int64_t* idx = index.data_ptr<int64_t>();
  int64_t* am = arg.data_ptr<int64_t>();
  visit_floating(rows.dtype(), "embedding_bag", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const T* r = rows.data_ptr<T>();
    T* o = out.data_ptr<T>();
    const int64_t per_bag = std::max<int64_t>(D, 1) * 4;
    parallel_for(0, B, std::max<int64_t>(1, kElementwiseGrain / per_bag),
                 [&](int64_t b0, int64_t b1) {
                   for (int64_t b = b0; b < b1; ++b) {
                     const int64_t start = std::clamp<int64_t>(bnd[b], 0, L);
                     const int64_t end = std::clamp<int64_t>(bnd[b + 1], start, L);
                     T* ob = o + b * D;
                     int64_t* ab = am + b * D;
                     bool empty = true;
                     for (int64_t j = start; j < end; ++j) {
                       if (idx[j] == skip) continue;
                       const T* rj = r + j * D;
                       for (int64_t d = 0; d < D; ++d) {
                         if (empty || static_cast<C>(rj[d]) > static_cast<C>(ob[d])) {
                           ob[d] = rj[d];
                           ab[d] = j;
                         }
                       }
                       empty = false;
                     }
                     if (empty) {
                       for (int64_t d = 0; d < D; ++d) {
                         ob[d] = static_cast<T>(C(0));
                         ab[d] = -1;
                       }
                     }
                   }
                 });
  });
}

SL_REGISTER_KERNEL(embedding_bag_max_kernel, DeviceKind::cpu, &embedding_bag_max_cpu);

}  // namespace
}  // namespace sl::cpu
