// CPU kernels of the dropout family (Note [Dropout mask]): one Philox block gives the keep
// decisions of 4 consecutive elements.
#include "core/ops/dropout.h"
#include "core/cpu/loops.h"
#include "core/random.h"

namespace sl::cpu {
namespace {

template <class T>
void dropout_fwd(const Tensor& out, const Tensor& mask, const Tensor& input, double p, double scale,
                 uint64_t seed, uint64_t offset) {
  using C = compute_t<T>;
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  bool* m = mask.data_ptr<bool>();
  const float keep_prob = static_cast<float>(1.0 - p);
  const C s = static_cast<C>(scale);
  const int64_t n = input.numel();
  const int64_t nblocks = (n + 3) / 4;
  parallel_for(0, nblocks, 2048, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      Philox4x32 r = philox4x32(seed, offset + static_cast<uint64_t>(blk));
      const int64_t i0 = blk * 4, i1 = std::min(n, i0 + 4);
      for (int64_t i = i0; i < i1; ++i) {
        const bool keep = uint_to_unit_float(r.v[i - i0]) < keep_prob;
        m[i] = keep;
        y[i] = keep ? static_cast<T>(static_cast<C>(x[i]) * s) : T(0);
      }
    }
  });
}

template <class T>
void dropout_bwd(const Tensor& grad_input, const Tensor& grad_out, const Tensor& mask,
                 double scale) {
  using C = compute_t<T>;
  const T* g = grad_out.data_ptr<T>();
  const bool* m = mask.data_ptr<bool>();
  T* gi = grad_input.data_ptr<T>();
  const C s = static_cast<C>(scale);
  parallel_for(0, grad_out.numel(), kElementwiseGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      gi[i] = m[i] ? static_cast<T>(static_cast<C>(g[i]) * s) : T(0);
  });
}

void dropout_forward_cpu(const Tensor& out, const Tensor& mask, const Tensor& input, double p,
                         double scale, uint64_t seed, uint64_t offset) {
  visit_floating(input.dtype(), "dropout", [&](auto tag) {
    dropout_fwd<typename decltype(tag)::type>(out, mask, input, p, scale, seed, offset);
  });
}

void dropout_backward_cpu(const Tensor& grad_input, const Tensor& grad_out, const Tensor& mask,
                          double scale) {
  visit_floating(grad_out.dtype(), "dropout_backward", [&](auto tag) {
    dropout_bwd<typename decltype(tag)::type>(grad_input, grad_out, mask, scale);
  });
}

SL_REGISTER_KERNEL(dropout_forward_kernel, DeviceKind::cpu, &dropout_forward_cpu);
SL_REGISTER_KERNEL(dropout_backward_kernel, DeviceKind::cpu, &dropout_backward_cpu);

}  // namespace
}  // namespace sl::cpu
