// CPU kernels of the ctc family: the alpha / beta recursions of one sample per task (samples
// split over the OpenMP pool), in log space, as PyTorch's CPU implementation (Note [CTC
// gradient]). Samples without an alignment, targets longer than their inputs among them, take
// the same path (Note [CTC impossible samples]): loops stop at T_b and at the sample's 2 L_b + 1
// states, and log_add of all -inf is -inf, so their nll is +inf and their gradient NaN rows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/loops.h"
#include "core/ops/ctc.h"

namespace sl::cpu {
namespace {

template <class T>
inline T log_add3(T a, T b, T c) {
  T m = std::max(a, std::max(b, c));
  if (m == -std::numeric_limits<T>::infinity()) return m;
  return std::log(std::exp(a - m) + std::exp(b - m) + std::exp(c - m)) + m;
}

template <class T>
inline T log_add(T a, T b) {
  T m = std::max(a, b);
  if (m == -std::numeric_limits<T>::infinity()) return m;
  return std::log(std::exp(a - m) + std::exp(b - m)) + m;
}

/// Shared view of one call's buffers.
template <class T>
struct CtcView {
  const T* lp;  // [T, N, C]
  int64_t T_, N, C, S;
  const int64_t* tg;  // [N, S]
  const int64_t* il;
  const int64_t* tl;
  int64_t blank;
  /// Label of extended position s of sample b (blank at even s).
  int64_t label(int64_t b, int64_t s) const { return s % 2 == 0 ? blank : tg[b * S + s / 2]; }
  T logp(int64_t t, int64_t b, int64_t c) const { return lp[(t * N + b) * C + c]; }
};

template <class T>
CtcView<T> make_view(const Tensor& log_probs, const Tensor& targets, const Tensor& il,
                     const Tensor& tl, int64_t blank) {
  return {log_probs.data_ptr<T>(), log_probs.size(0),      log_probs.size(1),
          log_probs.size(2),       targets.size(1),        targets.data_ptr<int64_t>(),
          il.data_ptr<int64_t>(),  tl.data_ptr<int64_t>(), blank};
}

template <class T>
void ctc_forward_typed(const Tensor& nll, const Tensor& log_alpha, const Tensor& log_probs,
                       const Tensor& targets, const Tensor& input_lengths,
                       const Tensor& target_lengths, int64_t blank) {
  const CtcView<T> v = make_view<T>(log_probs, targets, input_lengths, target_lengths, blank);
  const int64_t Sp = 2 * v.S + 1;
  T* la_all = log_alpha.data_ptr<T>();
  T* out = nll.data_ptr<T>();
  const T neg_inf = -std::numeric_limits<T>::infinity();
  parallel_for(0, v.N, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t Tb = v.il[b], L = v.tl[b], Lp = 2 * L + 1;
      T* la = la_all + b * v.T_ * Sp;
      if (Tb == 0) {
        out[b] = L == 0 ? T(0) : std::numeric_limits<T>::infinity();
        continue;
      }
      std::fill(la, la + Sp, neg_inf);
      la[0] = v.logp(0, b, blank);
      if (L > 0) la[1] = v.logp(0, b, v.label(b, 1));
      for (int64_t t = 1; t < Tb; ++t) {
        const T* prev = la + (t - 1) * Sp;
        T* cur = la + t * Sp;
        for (int64_t s = 0; s < Lp; ++s) {
          const int64_t c = v.label(b, s);
          T a1 = prev[s];
          T a2 = s > 0 ? prev[s - 1] : neg_inf;
          T a3 = (s > 1 && v.label(b, s - 2) != c) ? prev[s - 2] : neg_inf;
          cur[s] = log_add3(a1, a2, a3) + v.logp(t, b, c);
        }
        std::fill(cur + Lp, cur + Sp, neg_inf);
      }
      const T* last = la + (Tb - 1) * Sp;
      T ll = L > 0 ? log_add(last[Lp - 1], last[Lp - 2]) : last[0];
      out[b] = -ll;
    }
  });
}

template <class T>
void ctc_backward_typed(const Tensor& grad, const Tensor& grad_nll, const Tensor& log_probs,
                        const Tensor& targets, const Tensor& input_lengths,
                        const Tensor& target_lengths, const Tensor& nll, const Tensor& log_alpha,
                        int64_t blank, bool zero_infinity) {
  const CtcView<T> v = make_view<T>(log_probs, targets, input_lengths, target_lengths, blank);
  const int64_t Sp = 2 * v.S + 1, C = v.C;
  const T* la_all = log_alpha.data_ptr<T>();
  const T* pn = nll.data_ptr<T>();
  const T* gn = grad_nll.data_ptr<T>();
  T* g = grad.data_ptr<T>();
  const T neg_inf = -std::numeric_limits<T>::infinity();
  parallel_for(0, v.N, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> lb(static_cast<size_t>(v.T_ * Sp));
    std::vector<T> lcab(static_cast<size_t>(C));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t Tb = v.il[b], L = v.tl[b], Lp = 2 * L + 1;
      const T n = pn[b];
      const bool zero = Tb == 0 || (zero_infinity && n == std::numeric_limits<T>::infinity());
      if (zero) {
        for (int64_t t = 0; t < v.T_; ++t)
          std::fill(g + (t * v.N + b) * C, g + (t * v.N + b + 1) * C, T(0));
        continue;
      }
      const T* la = la_all + b * v.T_ * Sp;
      // beta recursion
      T* lbt = lb.data();
      std::fill(lbt + (Tb - 1) * Sp, lbt + Tb * Sp, neg_inf);
      lbt[(Tb - 1) * Sp + Lp - 1] = v.logp(Tb - 1, b, blank);
      if (L > 0) lbt[(Tb - 1) * Sp + Lp - 2] = v.logp(Tb - 1, b, v.label(b, Lp - 2));
      for (int64_t t = Tb - 2; t >= 0; --t) {
        const T* next = lbt + (t + 1) * Sp;
        T* cur = lbt + t * Sp;
        for (int64_t s = 0; s < Lp; ++s) {
          const int64_t c = v.label(b, s);
          T b1v = next[s];
          T b2v = s < Lp - 1 ? next[s + 1] : neg_inf;
          T b3v = (s < Lp - 2 && v.label(b, s + 2) != c) ? next[s + 2] : neg_inf;
          cur[s] = log_add3(b1v, b2v, b3v) + v.logp(t, b, c);
        }
      }
      const T gr = gn[b];
      for (int64_t t = 0; t < v.T_; ++t) {
        T* gt = g + (t * v.N + b) * C;
        if (t >= Tb) {
          std::fill(gt, gt + C, T(0));
          continue;
        }
        std::fill(lcab.begin(), lcab.end(), neg_inf);
        for (int64_t s = 0; s < Lp; ++s) {
          const int64_t c = v.label(b, s);
          lcab[static_cast<size_t>(c)] =
              log_add(lcab[static_cast<size_t>(c)], la[t * Sp + s] + lbt[t * Sp + s]);
        }
        for (int64_t c = 0; c < C; ++c) {
          const T lp = v.logp(t, b, c);
          gt[c] = (std::exp(lp) - std::exp(lcab[static_cast<size_t>(c)] + n - lp)) * gr;
        }
      }
    }
  });
}

void ctc_forward_cpu(const Tensor& nll, const Tensor& log_alpha, const Tensor& log_probs,
                     const Tensor& targets, const Tensor& input_lengths,
                     const Tensor& target_lengths, int64_t blank) {
  switch (log_probs.dtype()) {
    case DType::f32:
      return ctc_forward_typed<float>(nll, log_alpha, log_probs, targets, input_lengths,
                                      target_lengths, blank);
    case DType::f64:
      return ctc_forward_typed<double>(nll, log_alpha, log_probs, targets, input_lengths,
                                       target_lengths, blank);
    default:
      detail::throw_error<DTypeError>("ctc_loss: unsupported dtype ",
                                      dtype_name(log_probs.dtype()));
  }
}

void ctc_backward_cpu(const Tensor& grad, const Tensor& grad_nll, const Tensor& log_probs,
                      const Tensor& targets, const Tensor& input_lengths,
                      const Tensor& target_lengths, const Tensor& nll, const Tensor& log_alpha,
                      int64_t blank, bool zero_infinity) {
  switch (log_probs.dtype()) {
    case DType::f32:
      return ctc_backward_typed<float>(grad, grad_nll, log_probs, targets, input_lengths,
                                       target_lengths, nll, log_alpha, blank, zero_infinity);
    case DType::f64:
      return ctc_backward_typed<double>(grad, grad_nll, log_probs, targets, input_lengths,
                                        target_lengths, nll, log_alpha, blank, zero_infinity);
    default:
      detail::throw_error<DTypeError>("ctc_loss_backward: unsupported dtype ",
                                      dtype_name(log_probs.dtype()));
  }
}

SL_REGISTER_KERNEL(ctc_loss_forward_kernel, DeviceKind::cpu, &ctc_forward_cpu);
SL_REGISTER_KERNEL(ctc_loss_backward_kernel, DeviceKind::cpu, &ctc_backward_cpu);

}  // namespace
}  // namespace sl::cpu
