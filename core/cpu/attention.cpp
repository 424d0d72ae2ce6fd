// CPU kernels of the attention family: one softmax row per iteration, rows split over the
// OpenMP pool (each row is computed by one thread in a fixed order).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/cpu/loops.h"
#include "core/ops/attention.h"

namespace sl::cpu {
namespace {

template <class T, class M>
void softmax_rows(const Tensor& probs, const Tensor& scores, const Tensor& mask, bool causal,
                  double scale) {
  const int64_t A = scores.size(0), B = scores.size(1), L = scores.size(2), S = scores.size(3);
  const T* x = scores.data_ptr<T>();
  T* y = probs.data_ptr<T>();
  const M* mp = mask.defined() ? static_cast<const M*>(mask.data_ptr()) : nullptr;
  const int64_t ma = mp ? mask.stride(0) : 0, mb = mp ? mask.stride(1) : 0;
  const int64_t ml = mp ? mask.stride(2) : 0, ms = mp ? mask.stride(3) : 0;
  const T sc = static_cast<T>(scale);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  parallel_for(0, A * B * L, std::max<int64_t>(1, 4096 / S), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r % L, b = (r / L) % B, a = r / (L * B);
      const T* xr = x + r * S;
      T* yr = y + r * S;
      // positions j >= limit are causally masked
      const int64_t limit = causal ? std::min<int64_t>(S, i + 1) : S;
      for (int64_t j = 0; j < limit; ++j) yr[j] = xr[j] * sc;
      for (int64_t j = limit; j < S; ++j) yr[j] = neg_inf;
      if (mp) {
        const M* mr = mp + a * ma + b * mb + i * ml;
        if constexpr (std::is_same_v<M, bool>) {
          for (int64_t j = 0; j < limit; ++j) {
            if (!mr[j * ms]) yr[j] = neg_inf;
          }
        } else {
          for (int64_t j = 0; j < limit; ++j) yr[j] += mr[j * ms];
        }
      }
      T mx = neg_inf;
      for (int64_t j = 0; j < limit; ++j) mx = std::max(mx, yr[j]);
      if (mx == neg_inf) {
        // every position masked: NaN like PyTorch's exp(-inf - -inf)
        std::fill(yr, yr + S, std::numeric_limits<T>::quiet_NaN());
        continue;
      }
      double sum = 0;
      for (int64_t j = 0; j < limit; ++j) {
        T e = std::exp(yr[j] - mx);
        yr[j] = e;
        sum += static_cast<double>(e);
      }
      const T inv = static_cast<T>(1.0 / sum);
      for (int64_t j = 0; j < limit; ++j) yr[j] *= inv;
      for (int64_t j = limit; j < S; ++j) yr[j] = T(0);
    }
  });
}

template <class T>
void softmax_rows_backward(const Tensor& grad_scores, const Tensor& grad_probs, const Tensor& probs,
                           double scale) {
  const int64_t S = probs.size(3), rows = probs.numel() / S;
  const T* g = grad_probs.data_ptr<T>();
  const T* p = probs.data_ptr<T>();
  T* gs = grad_scores.data_ptr<T>();
  const T sc = static_cast<T>(scale);
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / S), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* gr = g + r * S;
      const T* pr = p + r * S;
      T* out = gs + r * S;
      double dot = 0;
      for (int64_t j = 0; j < S; ++j) dot += static_cast<double>(gr[j]) * pr[j];
      const T d = static_cast<T>(dot);
      for (int64_t j = 0; j < S; ++j) out[j] = sc * pr[j] * (gr[j] - d);
    }
  });
}

void attention_softmax_forward_cpu(const Tensor& probs, const Tensor& scores, const Tensor& mask,
                                   bool is_causal, double scale) {
  auto run = [&](auto z) {
    using T = decltype(z);
    if (mask.defined() && mask.dtype() == DType::b8) {
      softmax_rows<T, bool>(probs, scores, mask, is_causal, scale);
    } else {
      softmax_rows<T, T>(probs, scores, mask, is_causal, scale);
    }
  };
  switch (scores.dtype()) {
    case DType::f32:
      return run(float{});
    case DType::f64:
      return run(double{});
    default:
      detail::throw_error<DTypeError>("attention_softmax: unsupported dtype ",
                                      dtype_name(scores.dtype()));
  }
}

void attention_softmax_backward_cpu(const Tensor& grad_scores, const Tensor& grad_probs,
                                    const Tensor& probs, double scale) {
  switch (probs.dtype()) {
    case DType::f32:
      return softmax_rows_backward<float>(grad_scores, grad_probs, probs, scale);
    case DType::f64:
      return softmax_rows_backward<double>(grad_scores, grad_probs, probs, scale);
    default:
      detail::throw_error<DTypeError>("attention_softmax_backward: unsupported dtype ",
                                      dtype_name(probs.dtype()));
  }
}

SL_REGISTER_KERNEL(attention_softmax_forward_kernel, DeviceKind::cpu,
                   &attention_softmax_forward_cpu);
SL_REGISTER_KERNEL(attention_softmax_backward_kernel, DeviceKind::cpu,
                   &attention_softmax_backward_cpu);

}  // namespace
}  // namespace sl::cpu
